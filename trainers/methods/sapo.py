"""SAPO: V and Q read from two reserved vocabulary entries of the policy itself (no new head).

``V(s_t) = R_max·clip((z_{w+} − z_{w−})/τ_v, −1, 1)`` at the last prompt token and ``Q(s_t, a_t)``
the same at the last response token (``Experience.state_positions``, ``Experience.action_end_positions``).
The old values come out of the old-log-prob forward pass for free (the LM head applied at two more
positions per row; :meth:`~trainers.methods.base.Method.old_forward` with ``readout``), or, with
``old_log_probs='rollout'``, out of the sampler's own logits at the same positions; the value phase
has nothing left to run. Targets come from the frozen rollout policy (GAE for the advantage and
y^V, SARSA for y^Q); the clipped V and Q losses join the actor loss with weights c_V, c_Q.
"""

from __future__ import annotations

from typing import ClassVar

from torch import Tensor

from trainers.core_algos import clipped_value_loss
from trainers.experience import Experience
from trainers.forward import PositionLogits
from trainers.methods.base import Method

__all__ = ["SAPO"]


class SAPO(Method):
    name: ClassVar[str] = "sapo"
    readout: ClassVar[bool] = True

    def value_terms(self, mb: Experience, logits: PositionLogits, stats: dict[str, Tensor]) -> Tensor:
        cfg = self.cfg
        assert mb.old_values is not None and mb.value_targets is not None
        assert mb.old_q is not None and mb.q_targets is not None
        v, q = self.read_values(logits)
        value_loss = clipped_value_loss(v, mb.old_values, mb.value_targets, cfg.value_clip, scale=cfg.r_max)
        q_loss = clipped_value_loss(q, mb.old_q, mb.q_targets, cfg.q_clip, scale=cfg.r_max)
        stats["value_loss"], stats["q_loss"], stats["value_mean"] = (
            value_loss.detach(),
            q_loss.detach(),
            v.detach().mean(),
        )
        stats["value_saturated"] = (v.detach().abs() >= cfg.r_max).float().mean()
        stats["q_saturated"] = (q.detach().abs() >= cfg.r_max).float().mean()
        return cfg.value_coef * value_loss + cfg.q_coef * q_loss
