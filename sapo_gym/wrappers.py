"""Wrappers that each do one thing."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["InvalidActionPenalty", "TaskSchedule"]


class InvalidActionPenalty(gym.Wrapper[str, str, str, str]):
    """Subtract ``coef`` from a turn's reward when ``info["is_action_valid"]`` is False.

    This is the one place the paper's invalid-action penalty (default 0.1) is applied to env
    rewards; backends never apply it. Trainers may apply it instead (their ``c_inv`` option);
    use one or the other, not both.
    """

    def __init__(self, env: gym.Env[str, str], coef: float = 0.1):
        super().__init__(env)
        self.coef = float(coef)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if not info.get("is_action_valid", True):
            reward -= self.coef
        return obs, reward, terminated, truncated, info


class TaskSchedule(gym.Wrapper[str, str, str, str]):
    """Choose each episode's task from a seeded schedule shared by all workers of a vector env.

    Worker ``w`` belongs to group ``g = w // group_size``. At its ``k``-th reset it plays task
    ``perm[(k * num_groups + g) % n]``, where ``perm`` is a permutation of the split's tasks drawn
    from ``schedule_seed`` (re-drawn after each pass over the split). Members of one group
    therefore always play the same task (GRPO), and every worker derives the schedule alone, so
    no coordination is needed. An explicit ``task_id``/``task_index`` in ``options`` wins.
    """

    def __init__(self, env: gym.Env[str, str], worker: int, group_size: int, num_groups: int, schedule_seed: int):
        super().__init__(env)
        if group_size < 1 or num_groups < 1:
            raise ValueError("group_size and num_groups must be >= 1")
        self.group = worker // group_size
        self.num_groups = num_groups
        self.schedule_seed = schedule_seed
        self._episode = 0
        self._n = len(env.unwrapped.task_ids)  # type: ignore[attr-defined]

    def task_index(self, episode: int) -> int:
        slot = episode * self.num_groups + self.group
        rnd, pos = divmod(slot, self._n)
        perm = np.random.default_rng([self.schedule_seed, rnd]).permutation(self._n)
        return int(perm[pos])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        return self.reset_episode(self._episode, seed=seed, options=options)

    def reset_episode(
        self, episode: int, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Reset as the member's ``episode``-th episode (the caller counts: a rollout, a Ray worker's vector env);
        an explicit ``task_id``/``task_index`` in ``options`` wins. Counts one reset, as :meth:`reset` does."""
        options = dict(options or {})
        if "task_id" not in options and "task_index" not in options:
            options["task_index"] = self.task_index(episode)
        self._episode += 1
        return self.env.reset(seed=seed, options=options)
