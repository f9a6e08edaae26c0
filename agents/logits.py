"""SAPO's two value tokens w⁺/w⁻ in a model's logits: the value they read out, and the policy without them.

The policy LM's vocabulary carries two extra tokens whose logits SAPO reads as a value
(:func:`value_readout`) and which the policy never samples (:func:`mask_value_tokens`). Both act on
raw logits ``(..., V)`` only, so the generators (``agents.generation``) and the trainer's readout and losses
(``trainers.forward``, ``trainers.methods``) share them. SAPO equations follow the paper (arXiv 2608.19842).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["value_readout", "mask_value_tokens"]


def value_readout(logits: Tensor, w_plus: int, w_minus: int, tau_v: float, r_max: float) -> Tensor:
    """SAPO's two-token value: ``R_max · clip((z_{w+} − z_{w−}) / τ_v, −1, 1)``.

    ``logits`` ``(..., V)`` taken at the readout position (last prompt token for V, last response
    token for Q); returns ``(...)`` in float32. The clip has zero gradient outside [−1, 1], as in the paper.
    """
    diff = logits[..., w_plus].float() - logits[..., w_minus].float()
    return r_max * torch.clamp(diff / tau_v, -1.0, 1.0)


def mask_value_tokens(logits: Tensor, value_token_ids: Sequence[int] | Tensor) -> Tensor:
    """Remove w+/w- from the policy: a copy of ``logits (..., V)`` with ``−inf`` at those ids.

    The ONE helper used for sampling, old log-probs, current log-probs and entropy, so the four
    always see the same distribution. Out of place: the readout may use the same logits.
    """
    ids = torch.as_tensor(value_token_ids, dtype=torch.long, device=logits.device)
    if ids.numel() == 0:
        return logits
    return logits.index_fill(-1, ids, float("-inf"))
