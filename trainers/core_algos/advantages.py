"""Turn-level targets and advantages of the value-based methods: GAE and SARSA (SAPO, PPO), SAPO's normalization.

The group estimators (GRPO, RLOO, GiGPO) are in :mod:`trainers.core_algos.group`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from trainers.core_algos.masked import gather_turns, group_stats, scatter_turns

__all__ = ["turn_gae", "sarsa_targets", "normalize_turn_advantages", "turn_targets"]


# --------------------------------------------------------------------------------------------
# Turn-level targets (on the (N, H) grid)
# --------------------------------------------------------------------------------------------
def _next_turn(x: Tensor, mask: Tensor) -> Tensor:
    """``(N, H)`` -> ``x[:, t+1]`` where turn t+1 exists, else 0 (past the last valid turn)."""
    nxt = torch.zeros_like(x)
    nxt[:, :-1] = torch.where(mask[:, 1:], x[:, 1:], torch.zeros_like(x[:, 1:]))
    return nxt


def turn_gae(rewards: Tensor, values: Tensor, dones: Tensor, mask: Tensor, gamma: float, lam: float) -> Tensor:
    """Generalized advantage estimation over turns, vectorized across trajectories.

    ``δ_t = r_t + γ(1−d_t)V_{t+1} − V_t``; ``A_t = δ_t + γλ(1−d_t)A_{t+1}``, with ``V_{t+1} = 0`` and
    ``A_{t+1} = 0`` past the last valid turn: truncation at the horizon bootstraps 0 (SAPO's choice,
    the paper does not bootstrap a truncated tail).

    Args:
        rewards, values: ``(N, H)`` float; values are the FROZEN rollout estimates ``V_old``.
        dones: ``(N, H)`` bool, episode terminated at this turn.
        mask: ``(N, H)`` bool, real turns (a prefix of each row).

    Returns:
        advantages ``(N, H)``, 0 at masked cells.
    """
    not_done = (~dones.bool()).to(values.dtype)
    zero = torch.zeros_like(values)
    v = torch.where(mask, values, zero)
    r = torch.where(mask, rewards.to(values.dtype), zero)
    delta = torch.where(mask, r + gamma * not_done * _next_turn(v, mask) - v, zero)
    adv = torch.zeros_like(values)
    running = torch.zeros_like(values[:, 0])
    for t in reversed(range(values.shape[1])):
        running = delta[:, t] + gamma * lam * not_done[:, t] * running
        running = torch.where(mask[:, t], running, torch.zeros_like(running))
        adv[:, t] = running
    return adv


def sarsa_targets(rewards: Tensor, q: Tensor, dones: Tensor, mask: Tensor, gamma: float) -> Tensor:
    """SARSA targets for SAPO's Q readout: ``y^Q_t = r_t + γ(1−d_t)Q_old_{t+1}`` (0 past the last turn).

    Shapes as in :func:`turn_gae`; returns ``(N, H)``, 0 at masked cells.
    """
    not_done = (~dones.bool()).to(q.dtype)
    zero = torch.zeros_like(q)
    q_next = _next_turn(torch.where(mask, q, zero), mask)
    return torch.where(mask, rewards.to(q.dtype) + gamma * not_done * q_next, zero)


def normalize_turn_advantages(
    advantages: Tensor, invalid: Tensor, c_inv: float, eps: float = 1e-6, mask: Tensor | None = None
) -> Tensor:
    """SAPO's batch normalization: ``Ã = A − c_inv·m_inv``; ``Â = (Ã − μ_B)/(σ_B + ε)``.

    Args:
        advantages: ``(B,)`` raw turn advantages (GAE).
        invalid: ``(B,)`` bool, format-invalid action at this turn (``m_inv``).
        mask: ``(B,)`` bool, rows that are real turns (default: all). μ_B, σ_B (Bessel-corrected,
            like verl's ``masked_whiten``) are taken over these rows; other rows come back 0.

    The batch is one group of :func:`~trainers.core_algos.masked.group_stats`: a batch whose penalized advantages
    are all equal (e.g. every turn 0) gives exactly 0, not rounding noise over ε.
    """
    mask = torch.ones_like(advantages, dtype=torch.bool) if mask is None else mask.bool()
    penalized = advantages - c_inv * invalid.to(advantages.dtype)
    stats = group_stats(penalized, None, mask)
    return torch.where(mask, (penalized - stats.mean) / (stats.std + eps), torch.zeros_like(penalized))


def turn_targets(
    rewards: Tensor,
    old_values: Tensor,
    dones: Tensor,
    traj_ids: Tensor,
    turn_idx: Tensor,
    gamma: float,
    lam: float,
    old_q: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Turn rows in, GAE advantages and value / SARSA targets out, all ``(B,)`` in row order.

    Returns ``(A, y^V = V_old + A, y^Q or None)``. ``A`` is the raw GAE (before the invalid penalty
    and normalization of :func:`normalize_turn_advantages`).
    """
    r, mask, _ = scatter_turns(rewards, traj_ids, turn_idx)
    v, _, _ = scatter_turns(old_values, traj_ids, turn_idx)
    d, _, _ = scatter_turns(dones.bool(), traj_ids, turn_idx)
    adv = gather_turns(turn_gae(r, v, d, mask, gamma, lam), traj_ids, turn_idx)
    y_q = None
    if old_q is not None:
        q, _, _ = scatter_turns(old_q, traj_ids, turn_idx)
        y_q = gather_turns(sarsa_targets(r, q, d, mask, gamma), traj_ids, turn_idx)
    return adv, old_values + adv, y_q
