"""RLOO: no value at all; G rollouts per task and a leave-one-out baseline (Kool et al. 2019; Ahmadian et al. 2024).

``A_t = n/(n−1)·(s_t − mean_G)``: the turn's score minus the mean of the group's *other* entries
(:func:`~trainers.core_algos.rloo_advantages`, verl-agent's ``compute_rloo_outcome_advantage``). Scores and entries
as GRPO's: the trajectory's return minus ``c_inv`` on an invalid turn, before the baseline; entries every turn row
(``grpo_stats_across_steps``, verl-agent's default) or each trajectory's first turn. A group of one entry keeps
its score; a group of equal entries exactly 0 (:func:`~trainers.core_algos.group_stats`); no normalization on top
(RLOO scales nothing).
"""

from __future__ import annotations

from typing import ClassVar

import torch

from trainers.core_algos import rloo_advantages
from trainers.experience import Experience
from trainers.methods.base import Method

__all__ = ["RLOO"]


class RLOO(Method):
    name: ClassVar[str] = "rloo"

    @torch.no_grad()
    def compute_advantages(self, exp: Experience) -> Experience:
        scores, entries = self.group_scores(exp)
        exp.advantages = rloo_advantages(scores, exp.group_ids, weights=entries)
        return exp
