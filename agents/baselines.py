"""Baseline agents: the expert (ceiling) and the random-admissible agent (floor)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from agents.base import format_action

__all__ = ["ExpertAgent", "RandomAgent"]


class ExpertAgent:
    """Follows the env's privileged oracle (``info["expert_action"]``: a walkthrough or planner).

    Falls back to a random admissible action when the env has no oracle for the current state.
    """

    name = "expert"

    def __init__(self, seed: int = 0):
        self._fallback = RandomAgent(seed)

    def reset(self, num_envs: int) -> None:
        self._fallback.reset(num_envs)

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        out = []
        for obs, info in zip(observations, infos):
            expert = info.get("expert_action")
            out.append(format_action(expert, "following the expert plan") if expert is not None
                       else self._fallback.act([obs], [info])[0])
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
            out.append(format_action(actions[int(self._rng.integers(len(actions)))], "random choice"))
        return out
