"""SAPO's ablations: each changes one term of SAPO's equations and keeps every other (``--preset ablation``).

The variants that change a constant are registry entries of SAPO's own class with the constant fixed
(:attr:`~trainers.method_registry.MethodEntry.settings`: ``sapo-noq`` sets c_Q = 0, the ``sapo-tau*`` entries
τ_v). The three here change a computation:

* :class:`SAPONoNorm`: the advantage without the batch normalization of eq. 7;
* :class:`SAPOQMinusV`: the advantage ``Q_old − V_old`` in place of GAE;
* :class:`SAPOHead`: V and Q from a small linear head on the same hidden states, in place of two vocabulary logits
  (the control for "the readout through the vocabulary").

``tests/trainers/test_sapo_ablations.py`` checks on a hand-computed batch that each changes its term and
nothing else.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from trainers.config import TrainConfig
from trainers.core_algos import normalize_turn_advantages
from trainers.experience import Experience
from trainers.forward import PositionLogits
from trainers.methods.sapo import SAPO

__all__ = ["SAPONoNorm", "SAPOQMinusV", "SAPOHead", "HEAD_NAME"]

HEAD_NAME = "sapo_value_head"
"""The head control's submodule of the policy model (so the actor's optimizer and checkpoints carry it)."""


class SAPONoNorm(SAPO):
    """SAPO without batch normalization: eq. 7's ``Â = (Ã − μ_B)/(σ_B + ε)`` becomes ``Â = Ã = A − c_inv·m_inv``,
    the penalized GAE in reward units. The targets y^V and y^Q and every loss are SAPO's."""

    name: ClassVar[str] = "sapo-nonorm"

    def turn_advantages(self, gae: Tensor, exp: Experience) -> Tensor:
        return gae - self.cfg.c_inv * exp.invalid.to(gae.dtype)


class SAPOQMinusV(SAPO):
    """SAPO with ``A_t = Q_old(s_t, a_t) − V_old(s_t)`` in place of GAE's ``A_t`` (the penalty and the batch
    normalization of eq. 7 then as SAPO's). The targets stay SAPO's: ``y^V = V_old + A^GAE`` and SARSA's ``y^Q``."""

    name: ClassVar[str] = "sapo-qv"

    def turn_advantages(self, gae: Tensor, exp: Experience) -> Tensor:
        assert exp.old_q is not None and exp.old_values is not None
        return normalize_turn_advantages(exp.old_q - exp.old_values, exp.invalid, self.cfg.c_inv)


class SAPOHead(SAPO):
    """The control for SAPO's readout through the vocabulary: ``V = R_max·clip((z_{w+} − z_{w−})/τ_v, −1, 1)``
    becomes ``R_max·clip((w·h + b)/τ_v, −1, 1)``, with ``h`` the model's last hidden state at the same position (the
    last prompt token for V, the last response token for Q) and ``(w, b)`` one new ``Linear(H, 1)`` shared by V and Q
    as the two readout rows are, initialized as PPO's critic head (small random weights, bias 0). The readout's ``z_{w+} − z_{w−}`` is
    ``(e_{w+} − e_{w−})·h``, also linear in ``h``: what differs is that its weights are two rows of the LM head,
    shared with the policy's logits, where the head's are its own. The head is a submodule of the policy model
    (:data:`HEAD_NAME`), trained by the actor's optimizer with SAPO's c_V, c_Q losses; V_old and Q_old are recomputed
    in the old log-prob phase (the sampler reads the vocabulary, not the head)."""

    name: ClassVar[str] = "sapo-head"

    def __init__(self, cfg: TrainConfig, policy: Any):
        super().__init__(cfg, policy)
        if cfg.readout_warmup_episodes > 0 or cfg.strategy != "torch":
            raise ValueError(
                "sapo-head trains its head on the torch strategy, without --readout-warmup-episodes "
                "(that fits the vocabulary readout)"
            )
        model = policy.model
        if not hasattr(model, HEAD_NAME):
            hidden, rng = model.config.hidden_size, torch.Generator().manual_seed(cfg.seed)
            head = nn.Linear(hidden, 1)
            with torch.no_grad():  # PPO's critic head's init (OpenRLHF's): small, not zero, so gradients flow at once
                head.weight.copy_(torch.randn(head.weight.shape, generator=rng) / (hidden + 1))
                head.bias.zero_()
            param = next(model.parameters())
            model.add_module(HEAD_NAME, head.to(device=param.device, dtype=param.dtype))
        self.head: nn.Linear = getattr(model, HEAD_NAME)

    def read_values(self, logits: PositionLogits) -> tuple[Tensor, Tensor]:
        if logits.features is None:
            raise ValueError(
                "sapo-head reads the last hidden states: it needs a model whose logits are lm_head(hidden)"
            )
        z = self.head(logits.features.to(self.head.weight.dtype)).squeeze(-1).float()  # (B, 2): V's and Q's positions
        v = self.cfg.r_max * torch.clamp(z / self.cfg.tau_v, -1.0, 1.0)
        return v[:, 0], v[:, 1]

    @torch.no_grad()
    def old_forward(self, exp: Experience) -> Experience:
        sampled = exp.old_log_probs if self.cfg.old_log_probs == "rollout" else None
        exp.value_logits = None  # the sampler's w⁺/w⁻ logits are the vocabulary's V, not the head's: recompute
        exp = super().old_forward(exp)
        if sampled is not None:
            exp.old_log_probs = sampled  # the sampler's own, as SAPO keeps them
        return exp
