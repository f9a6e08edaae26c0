"""Token log-probs and entropy, the clipped policy and value losses, the KL penalty, explained variance."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from trainers.core_algos.masked import masked_mean

__all__ = [
    "AggMode",
    "KLKind",
    "token_log_probs",
    "entropy_from_logits",
    "aggregate_loss",
    "clipped_policy_loss",
    "clipped_value_loss",
    "explained_variance",
    "kl_penalty",
]

AggMode = Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"]
KLKind = Literal["low_var_kl", "k1", "k2"]


# --------------------------------------------------------------------------------------------
# Logits: log-probs and entropy (the value tokens' readout and mask: agents.logits)
# --------------------------------------------------------------------------------------------
def token_log_probs(logits: Tensor, labels: Tensor) -> Tensor:
    """``log softmax(logits)[labels]``: ``(B, T, V)``, ``(B, T)`` -> ``(B, T)`` in float32.

    Uses ``z_label − logsumexp(z)`` rather than a full ``log_softmax`` so no second ``(B, T, V)``
    tensor is kept. Logits and labels must already be aligned (logits at t predict label at t).
    """
    logits = logits.float()
    picked = logits.gather(-1, labels.unsqueeze(-1).long()).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Entropy of ``softmax(logits)`` per position: ``(..., V)`` -> ``(...)`` float32.

    Safe with ``−inf`` entries (the banned value tokens contribute exactly 0).
    """
    logits = logits.float()
    probs = torch.softmax(logits, dim=-1)
    finite = torch.where(torch.isneginf(logits), torch.zeros_like(logits), logits)
    return torch.logsumexp(logits, dim=-1) - (probs * finite).sum(-1)


# --------------------------------------------------------------------------------------------
# Losses
# --------------------------------------------------------------------------------------------
def aggregate_loss(loss_mat: Tensor, mask: Tensor, mode: AggMode = "token-mean") -> Tensor:
    """Reduce a ``(B, T)`` loss to a scalar like verl's ``agg_loss``.

    ``token-mean``: mean over all action tokens of the batch; ``seq-mean-token-sum``: sum per row,
    mean over rows; ``seq-mean-token-mean``: mean per row, mean over rows with at least one token.
    """
    mask = mask.bool()
    if mode == "token-mean":
        return masked_mean(loss_mat, mask)
    per_row = torch.where(mask, loss_mat, torch.zeros_like(loss_mat)).sum(-1)
    has = mask.any(-1)
    if mode == "seq-mean-token-sum":
        return masked_mean(per_row, has)
    if mode == "seq-mean-token-mean":
        return masked_mean(per_row / mask.sum(-1).clamp_min(1), has)
    raise ValueError(f"unknown loss aggregation mode {mode!r}")


def clipped_policy_loss(
    log_probs: Tensor,
    old_log_probs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float,
    clip_eps_high: float | None = None,
    agg_mode: AggMode = "token-mean",
) -> tuple[Tensor, dict[str, Tensor]]:
    """Token-level clipped PPO surrogate ``−min(ρA, clip(ρ, 1−ε, 1+ε_high)A)``, aggregated.

    Args:
        log_probs, old_log_probs: ``(B, T)`` log π_θ and log π_old of the sampled tokens.
        advantages: ``(B, T)``, or ``(B,)`` turn advantages broadcast to every token of the row.
        mask: ``(B, T)`` bool action tokens.
        clip_eps_high: upper clip (default ``clip_eps``; DAPO-style asymmetric clipping when set).

    Returns ``(loss, stats)`` with detached ``clipfrac`` and ``approx_kl`` (k1 of π_old to π_θ).
    """
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(log_probs)
    mask = mask.bool()
    advantages = torch.where(mask, advantages, torch.zeros_like(advantages))
    high = clip_eps if clip_eps_high is None else clip_eps_high
    log_ratio = torch.where(mask, log_probs - old_log_probs, torch.zeros_like(log_probs)).clamp(-20.0, 20.0)
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    loss = aggregate_loss(torch.maximum(unclipped, clipped), mask, agg_mode)
    with torch.no_grad():
        stats = {
            "clipfrac": masked_mean((clipped > unclipped).float(), mask),
            "approx_kl": masked_mean(-log_ratio, mask),
        }
    return loss, stats


def clipped_value_loss(
    pred: Tensor, old: Tensor, target: Tensor, clip_eps: float, mask: Tensor | None = None, scale: float = 1.0
) -> Tensor:
    """Clipped value (or Q) loss in normalized space, averaged per turn.

    With ``p = pred/scale``, ``o = old/scale``, ``y = target/scale`` (``scale`` = R_max for SAPO):
    ``mean_turns max((p − y)², (o + clip(p − o, −ε, ε) − y)²)``. No 0.5 factor: c_V / c_Q absorb it.
    All tensors ``(B,)``; ``mask`` ``(B,)`` bool selects the turns (default: all).
    """
    p, o, y = pred / scale, old / scale, target / scale
    p_clipped = o + torch.clamp(p - o, -clip_eps, clip_eps)
    loss = torch.maximum((p - y) ** 2, (p_clipped - y) ** 2)
    mask = torch.ones_like(loss, dtype=torch.bool) if mask is None else mask.bool()
    return masked_mean(loss, mask)


def explained_variance(pred: Tensor, target: Tensor) -> Tensor:
    """``1 − Var(target − pred) / Var(target)`` over ``(B,)`` (1: perfect, 0: no better than a constant; 0 if Var(target) = 0)."""
    var = target.float().var(unbiased=False)
    resid = (target.float() - pred.float()).var(unbiased=False)
    return torch.where(var > 0, 1 - resid / var.clamp_min(1e-12), torch.zeros_like(var))


def kl_penalty(log_probs: Tensor, ref_log_probs: Tensor, kind: KLKind = "low_var_kl") -> Tensor:
    """Per-token KL estimate of π_θ from the frozen reference, ``(B, T)``.

    ``low_var_kl`` (k3, Schulman): ``exp(ref − lp) − (ref − lp) − 1``, clamped to [−10, 10] like
    verl; ``k1``: ``lp − ref``; ``k2``: ``½(lp − ref)²``. Mask and aggregate with :func:`aggregate_loss`.
    """
    diff = log_probs - ref_log_probs
    if kind == "k1":
        return diff
    if kind == "k2":
        return 0.5 * diff**2
    if kind == "low_var_kl":
        log_ratio = (-diff).clamp(-20.0, 20.0)
        return (torch.exp(log_ratio) - log_ratio - 1.0).clamp(-10.0, 10.0)
    raise ValueError(f"unknown KL kind {kind!r}")
