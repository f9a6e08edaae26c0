"""Baseline agents: the expert (ceiling), the random-admissible agent (floor), and ALFWorld's
observation-only search policy (a strong heuristic that uses no privileged state)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from agents.base import format_action

__all__ = ["ExpertAgent", "RandomAgent", "SearchAgent"]


class ExpertAgent:
    """Follows the env's privileged oracle (``info["expert_action"]``: a walkthrough or planner).

    Falls back to a random admissible action when the env has no oracle for the current state.
    ``privileged = True``: the evaluation harness gives it the full info (other agents get
    :func:`sapo_gym.core.public_info`) and its results are labelled as an oracle's.
    """

    name = "expert"
    privileged = True

    def __init__(self, seed: int = 0):
        self._fallback = RandomAgent(seed)

    def reset(self, num_envs: int) -> None:
        self._fallback.reset(num_envs)

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        out = []
        for obs, info in zip(observations, infos):
            expert = info.get("expert_action")
            out.append(
                format_action(expert, "following the expert plan", info)
                if expert is not None
                else self._fallback.act([obs], [info])[0]
            )
        return out


class RandomAgent:
    """Chooses uniformly among ``info["admissible_actions"]`` (the floor of the leaderboard)."""

    name = "random"

    def __init__(self, seed: int = 0):
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def reset(self, num_envs: int) -> None:
        return None

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        out = []
        for info in infos:
            actions = [a for a in info["admissible_actions"] if a != "help"] or ["look"]
            out.append(format_action(actions[int(self._rng.integers(len(actions)))], "random choice", info))
        return out


class SearchAgent:
    """ALFWorld's observation-only search policy (:class:`sapo_gym.alfworld.search.SearchExpert`) as an agent.

    It reads what any agent may read: the raw observation, the admissible commands and the task's
    goal, parsed from the task sentence (``info["task"]``; with ``info["alfworld_task_type"]``).
    One memory per episode, keyed by ``info["task_id"]`` and started at step 0, so the envs acting
    together must play distinct tasks (as :func:`sapo_gym.evaluation.evaluate` batches them);
    GRPO-style groups of one task are refused with an error.
    """

    name = "search"

    def __init__(self, seed: int = 0):
        self.seed = seed
        self._memory: dict[str, Any] = {}

    def reset(self, num_envs: int) -> None:
        self._memory = {}

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        from sapo_gym.alfworld.search import SearchExpert, SearchGoal

        keys = [str(info.get("task_id")) for info in infos]
        if len(set(keys)) < len(keys):
            raise ValueError("SearchAgent keeps one memory per task: the envs acting together must play distinct tasks")
        out = []
        for key, info in zip(keys, infos):
            if "alfworld_task_type" not in info:
                raise ValueError("SearchAgent plays ALFWorld only (the info has no alfworld_task_type)")
            if info.get("step", 0) == 0 or key not in self._memory:
                self._memory[key] = SearchExpert(SearchGoal.from_sentence(info["alfworld_task_type"], info["task"]))
            expert = self._memory[key]
            expert.observe(info["raw_observation"])
            out.append(format_action(expert.action(info["admissible_actions"]) or "look", "searching the room", info))
        return out
