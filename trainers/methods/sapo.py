"""SAPO: V and Q read from two reserved vocabulary entries of the policy itself (no new head).

``V(s_t) = R_max·clip((z_{w+} − z_{w−})/τ_v, −1, 1)`` at the last prompt token and ``Q(s_t, a_t)``
the same at the last response token (:func:`agents.value.sapo_readout`). The old values come out
of the old-log-prob forward pass for free (two gathers on logits computed anyway); the value phase
has nothing left to run. Targets come from the frozen rollout policy (GAE for the advantage and
y^V, SARSA for y^Q); the clipped V and Q losses join the actor loss with weights c_V, c_Q.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor

from agents.value import sapo_readout
from trainers.core_algos import clipped_value_loss
from trainers.experience import Experience
from trainers.methods.base import Method

__all__ = ["SAPO"]


class SAPO(Method):
    name: ClassVar[str] = "sapo"

    def _readout(self, mb: Experience, logits: Tensor) -> tuple[Tensor, Tensor]:
        return sapo_readout(logits, mb.prompt_lengths, mb.response_lengths, self.value_token_ids,
                            self.cfg.tau_v, self.cfg.r_max)

    def old_forward(self, exp: Experience) -> Experience:
        self._old: list[tuple[Tensor, Tensor]] = []
        exp = super().old_forward(exp)
        exp.extra["readout_v"] = torch.cat([v for v, _ in self._old])
        exp.extra["readout_q"] = torch.cat([q for _, q in self._old])
        return exp

    def on_old_logits(self, mb: Experience, logits: Tensor) -> None:
        self._old.append(self._readout(mb, logits))

    def compute_values(self, exp: Experience) -> Experience:
        exp.old_values, exp.old_q = exp.extra["readout_v"], exp.extra["readout_q"]
        return exp

    def value_terms(self, mb: Experience, logits: Tensor, stats: dict[str, Tensor]) -> Tensor:
        cfg = self.cfg
        assert mb.old_values is not None and mb.value_targets is not None
        assert mb.old_q is not None and mb.q_targets is not None
        v, q = self._readout(mb, logits)
        value_loss = clipped_value_loss(v, mb.old_values, mb.value_targets, cfg.value_clip, scale=cfg.r_max)
        q_loss = clipped_value_loss(q, mb.old_q, mb.q_targets, cfg.q_clip, scale=cfg.r_max)
        stats["value_loss"], stats["q_loss"], stats["value_mean"] = value_loss.detach(), q_loss.detach(), v.detach().mean()
        return cfg.value_coef * value_loss + cfg.q_coef * q_loss
