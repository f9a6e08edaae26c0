"""PPO: V from a separate critic (same base model, scalar head, its own optimizer); no Q.

The critic reads V(s_t) at the last prompt token, exactly where SAPO reads its V, so the two
methods differ only in the source of V: the same turn-level GAE, normalization and policy loss.
The critic is trained in its own phase (critic update) on the same clipped, R_max-normalized
value loss SAPO uses.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch

from trainers.config import TrainConfig
from trainers.core_algos import clipped_value_loss
from trainers.experience import Experience
from trainers.distributed import map_micro_batches
from trainers.methods.base import Method, micro_batches

__all__ = ["PPO"]


class PPO(Method):
    name: ClassVar[str] = "ppo"

    def __init__(self, cfg: TrainConfig, policy: Any):
        super().__init__(cfg, policy)
        from agents.critic import CriticModel

        self.critic = CriticModel.from_policy(policy, value_scale=cfg.r_max, seed=cfg.seed).to(policy.device)
        if cfg.gradient_checkpointing:  # as the strategy does for the actor (DeepSpeed also does it when preparing the critic)
            self.critic.activation_checkpointing_enable()
        params = [p for p in self.critic.parameters() if p.requires_grad]
        self.critic_optimizer = torch.optim.AdamW(params, lr=cfg.critic_lr, weight_decay=cfg.weight_decay)

    def _values(self, mb: Experience) -> torch.Tensor:
        return self.critic.values(mb.input_ids, mb.attention_mask, mb.prompt_lengths)

    @torch.no_grad()
    def compute_values(self, exp: Experience) -> Experience:
        exp.old_values = torch.cat(map_micro_batches(self.strategy, exp, self.cfg.micro_batch_size, self._values)).float()
        return exp

    def critic_loss(self, micro: Experience, values: torch.Tensor) -> torch.Tensor:
        """``c_V`` · the clipped, R_max-normalized value loss of ``values (B,)`` against the micro-batch's targets."""
        cfg = self.cfg
        return cfg.value_coef * clipped_value_loss(values, micro.old_values, micro.value_targets, cfg.value_clip, scale=cfg.r_max)

    def critic_update(self, exp: Experience, generator: torch.Generator, track: Any) -> dict[str, float]:
        cfg, losses, norms = self.cfg, [], []
        size = math.ceil(len(exp) / cfg.minibatches)
        for _ in range(cfg.ppo_epochs):
            for mb in exp.minibatches(size, generator=generator):
                self.critic_optimizer.zero_grad(set_to_none=True)
                for micro in micro_batches(mb, cfg.micro_batch_size):
                    with track.track_activations():
                        loss = self.critic_loss(micro, self._values(micro))
                        if not bool(torch.isfinite(loss)):
                            raise FloatingPointError(f"non-finite critic loss ({float(loss)})")
                        (loss * len(micro) / len(mb)).backward()
                    losses.append(float(loss.detach()))
                params = [p for p in self.critic.parameters() if p.grad is not None]
                norms.append(float(torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip or float("inf"))))
                self.critic_optimizer.step()
        return {"critic/value_loss": sum(losses) / len(losses), "critic/grad_norm": sum(norms) / len(norms)}
