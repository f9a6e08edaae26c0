"""PPO: V from a separate critic (same base model, scalar head, its own optimizer); no Q.

The critic reads V(s_t) at the last prompt token, exactly where SAPO reads its V, so the two
methods differ only in the source of V: the same turn-level GAE, normalization and policy loss.
The critic is trained in its own phase (critic update) on the same clipped, R_max-normalized
value loss SAPO uses, through the same update function and strategy as the actor (the trainer
prepares it: its own AdamW at ``critic_lr``, gradient checkpointing when asked).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from trainers.config import TrainConfig
from trainers.core_algos import clipped_value_loss
from trainers.distributed import map_micro_batches
from trainers.experience import Experience
from trainers.methods.base import Method

__all__ = ["PPO"]


class PPO(Method):
    name: ClassVar[str] = "ppo"

    def __init__(self, cfg: TrainConfig, policy: Any):
        super().__init__(cfg, policy)
        from agents.critic import CriticModel

        self.critic = CriticModel.from_policy(policy, value_scale=cfg.r_max, seed=cfg.seed).to(policy.device)
        if cfg.gradient_checkpointing:  # as the strategy does for the actor (its prepare() finds it already on)
            self.critic.activation_checkpointing_enable()

    def _values(self, mb: Experience) -> torch.Tensor:
        return self.critic.values(mb.input_ids, mb.attention_mask, mb.prompt_lengths)

    @torch.no_grad()
    def compute_values(self, exp: Experience) -> Experience:
        exp.old_values = torch.cat(
            map_micro_batches(self.strategy, exp, self.cfg.micro_batch_size, self._values)
        ).float()
        return exp

    def critic_loss(self, micro: Experience) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``c_V`` · the clipped, R_max-normalized value loss of the critic's values against the targets."""
        cfg = self.cfg
        loss = cfg.value_coef * clipped_value_loss(
            self._values(micro), micro.old_values, micro.value_targets, cfg.value_clip, scale=cfg.r_max
        )
        return loss, {"value_loss": loss.detach()}
