"""GRPO: no value at all; G rollouts per task and a group-relative advantage per turn (verl-agent's rule).

Each turn row's score is its trajectory's undiscounted return minus ``c_inv`` when the turn's action was invalid
(:func:`~trainers.core_algos.turn_scores`: verl-agent subtracts the penalty from the turn's reward *before* any
advantage). ``A_t = (s_t − mean_G)/(std_G + ε)``, the statistics over the group's entries
(:func:`~trainers.core_algos.group_entries`): every turn row (``grpo_stats_across_steps``, verl-agent's default)
or each trajectory's first turn. The group statistics already normalize: no batch normalization on top. Scores,
entries and the advantage are all in ``trainers/core_algos/group.py``; a group whose entries are all equal (all
success, all fail) gets exactly 0 (:func:`~trainers.core_algos.group_stats`).
"""

from __future__ import annotations

from typing import ClassVar

import torch

from trainers.core_algos import grpo_advantages
from trainers.experience import Experience
from trainers.methods.base import Method

__all__ = ["GRPO"]


class GRPO(Method):
    name: ClassVar[str] = "grpo"

    @torch.no_grad()
    def compute_advantages(self, exp: Experience) -> Experience:
        scores, entries = self.group_scores(exp)
        exp.advantages = grpo_advantages(scores, exp.group_ids, weights=entries)
        return exp
