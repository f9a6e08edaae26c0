"""GRPO: no value at all; G rollouts per task and a group-relative trajectory advantage.

``A = (R − mean_G)/(std_G + ε)`` per trajectory (``R`` its undiscounted return), broadcast to every
turn and token of the trajectory; the invalid-action penalty ``c_inv·m_t`` is then subtracted per
turn, as for SAPO and PPO (the group statistics already normalize, so there is no batch
normalization on top). ``grpo_stats_across_steps`` switches to verl-agent's variant where every
turn row enters its group's statistics.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from trainers.core_algos import grpo_advantages, trajectory_returns
from trainers.experience import Experience
from trainers.methods.base import Method

__all__ = ["GRPO"]


class GRPO(Method):
    name: ClassVar[str] = "grpo"

    @torch.no_grad()
    def compute_advantages(self, exp: Experience) -> Experience:
        returns = trajectory_returns(exp.rewards, exp.traj_ids)  # (B,) broadcast to turns
        _, traj_of_row = torch.unique(exp.traj_ids, return_inverse=True)
        n, device = int(traj_of_row.max()) + 1, exp.traj_ids.device
        first_row = torch.full((n,), len(exp), dtype=torch.long, device=device).scatter_reduce(
            0, traj_of_row, torch.arange(len(exp), device=device), reduce="amin"
        )
        turns = torch.zeros(n, device=device).index_add_(0, traj_of_row, torch.ones(len(exp), device=device))
        weights = turns if self.cfg.grpo_stats_across_steps else None
        traj_adv = grpo_advantages(returns[first_row], exp.group_ids[first_row], weights=weights)
        exp.advantages = traj_adv[traj_of_row] - self.cfg.c_inv * exp.invalid.float()
        return exp
