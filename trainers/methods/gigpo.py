"""GiGPO: no value at all; GRPO's episode-level group advantage plus a step-level one from anchor states.

``A_t = A^E(τ) + ω·A^S(t)`` (arXiv 2505.10978; verl-agent's ``gigpo/core_gigpo.py``;
:func:`~trainers.core_algos.gigpo_advantages`): ``A^E`` is the trajectory's return normalized within its task
group, as GRPO's; ``A^S`` is the turn's discounted return from that step (γ = ``gigpo_gamma``) normalized within
its *anchor group*, the turns of the same task group that acted on the same env state. The state is decided on
the env's raw observation (``info["raw_observation"]``: the backend's own text, not the rendered prompt with its
step counter and history), recorded per turn by the rollout and hashed with the group id into
``Experience.anchor_ids``. ``gigpo_mode`` picks ``mean_norm`` (subtract the mean; verl-agent's default) or
``mean_std_norm`` (also divide by the std + 1e-6) for both terms.

The invalid-action penalty ``c_inv·m_t`` is subtracted, as verl-agent does, from each turn's episode score and from
its step return *before* the two normalizations; no batch normalization on top. The episode term's statistics
are GRPO's (``grpo_stats_across_steps``: over every turn row, verl-agent's ``episode_norm_reward`` default, or
over each trajectory's first turn).
"""

from __future__ import annotations

from typing import ClassVar

import torch

from trainers.core_algos import gigpo_advantages
from trainers.experience import Experience
from trainers.methods.base import Method

__all__ = ["GiGPO"]


class GiGPO(Method):
    name: ClassVar[str] = "gigpo"

    @torch.no_grad()
    def compute_advantages(self, exp: Experience) -> Experience:
        cfg = self.cfg
        if exp.anchor_ids is None:
            raise ValueError(
                "GiGPO needs each turn's raw env observation (Experience.anchor_ids): the rollout records "
                "it as TurnRecord.anchor from info['raw_observation']"
            )
        exp.advantages = gigpo_advantages(
            exp.rewards,
            exp.traj_ids,
            exp.turn_idx,
            exp.group_ids,
            exp.anchor_ids,
            gamma=cfg.gigpo_gamma,
            step_weight=cfg.gigpo_step_weight,
            scale_by_std=cfg.gigpo_mode == "mean_std_norm",
            stats_across_steps=cfg.grpo_stats_across_steps,
            penalty=cfg.c_inv * exp.invalid.float(),
        )
        return exp
