"""One forward pass of a causal LM, keeping the logits only where the losses read them.

The losses need the logits that predict each action token (log-probs, entropy, KL) and, for
SAPO, the logits at the last prompt token (V) and the last response token (Q). Prompts are most
of a row's tokens, so :func:`forward_positions` runs the decoder once and applies the LM head to
those K + 2B positions only, instead of all B·T (TRL's ``logits_to_keep`` does the same for the
completion). That is exact for models whose logits are ``lm_head(last_hidden_state)`` (Qwen2,
Llama, Mistral, SmolLM2); models that scale or soft-cap their logits get the full forward.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from agents.constraint import restrict_logits
from agents.logits import mask_value_tokens, value_readout
from trainers.core_algos import entropy_from_logits, token_log_probs
from trainers.experience import Experience

__all__ = ["PositionLogits", "forward_positions", "action_log_probs", "action_entropy", "readout_values"]


@dataclass
class PositionLogits:
    """Raw logits (value tokens included) at the positions the losses read."""

    action: Tensor
    """(K, V): the logits predicting each of the K action tokens, in ``action_mask`` row-major order."""
    state: Tensor | None
    """(B, V) at the last prompt token (SAPO's V), or None when not asked for."""
    end: Tensor | None
    """(B, V) at the last response token (SAPO's Q), or None when not asked for."""
    features: Tensor | None = None
    """(B, 2, H): the last hidden states the ``state`` and ``end`` logits are read from (a readout forward pass of a
    model whose logits are ``lm_head(last_hidden_state)``; None otherwise). The head control reads V and Q here."""


def _plain_head(model: nn.Module) -> bool:
    config = getattr(model, "config", None)
    scaled = any(getattr(config, k, None) for k in ("final_logit_softcapping", "logit_scale", "logits_scaling"))
    return not scaled and hasattr(model, "get_decoder") and model.get_output_embeddings() is not None


def forward_positions(model: nn.Module, batch: Experience, readout: bool = False) -> PositionLogits:
    """Run ``model`` (an HF causal LM) on the batch's rows; logits at the action (and readout) positions."""
    rows = torch.arange(len(batch), device=batch.input_ids.device)
    predicting = batch.action_mask[:, 1:]
    plain = _plain_head(model)
    if plain:
        hidden = model.get_decoder()(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False
        ).last_hidden_state
        head = model.get_output_embeddings()
    else:
        hidden = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False).logits
        head = nn.Identity()
    action = head(hidden[:, :-1][predicting])
    if not readout:
        return PositionLogits(action, None, None)
    state, end = hidden[rows, batch.state_positions], hidden[rows, batch.action_end_positions]
    return PositionLogits(action, head(state), head(end), torch.stack([state, end], dim=1) if plain else None)


def _policy(logits: PositionLogits, batch: Experience, value_token_ids: tuple[int, ...], temperature: float) -> Tensor:
    """The policy's ``(K, V)`` logits at the action tokens: w+/w- removed, divided by the sampling temperature
    (as verl does), and restricted to the sampler's allowed tokens under constrained decoding."""
    z = mask_value_tokens(logits.action / temperature, value_token_ids)
    if batch.allowed_tokens is None:
        return z
    return restrict_logits(z, batch.allowed_tokens[:, 1:][batch.action_mask[:, 1:].bool()])


def action_log_probs(
    logits: PositionLogits, batch: Experience, value_token_ids: tuple[int, ...], temperature: float
) -> Tensor:
    """``(B, T)`` log π(token_t | tokens_<t) at the action tokens, 0 elsewhere (lined up with ``input_ids``)."""
    mask = batch.action_mask.bool()
    labels = batch.input_ids[:, 1:][mask[:, 1:]]
    lp = token_log_probs(_policy(logits, batch, value_token_ids, temperature), labels)
    out = torch.zeros(batch.input_ids.shape, dtype=torch.float32, device=lp.device)
    return out.masked_scatter(F.pad(mask[:, 1:], (1, 0)), lp)


def action_entropy(
    logits: PositionLogits, batch: Experience, value_token_ids: tuple[int, ...], temperature: float
) -> Tensor:
    """``(K,)`` entropy of the policy at each action token (0 where a constraint forces the token)."""
    return entropy_from_logits(_policy(logits, batch, value_token_ids, temperature))


def readout_values(
    logits: PositionLogits, value_token_ids: tuple[int, ...], tau_v: float, r_max: float
) -> tuple[Tensor, Tensor]:
    """SAPO's ``(V (B,), Q (B,))`` in reward units: :func:`value_readout` of the w⁺/w⁻ logits at the last
    prompt token and at the last response token (a forward pass with ``readout=True``)."""
    assert logits.state is not None and logits.end is not None
    w_plus, w_minus = value_token_ids
    return (
        value_readout(logits.state, w_plus, w_minus, tau_v, r_max),
        value_readout(logits.end, w_plus, w_minus, tau_v, r_max),
    )
