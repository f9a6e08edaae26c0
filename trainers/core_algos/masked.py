"""Masked and group statistics and the turn grid: the building blocks of the estimators (see :mod:`trainers.core_algos`).

:func:`group_stats` is the one place where a group's count, mean and std are computed; every advantage estimator
(GRPO, RLOO, GiGPO's two terms, SAPO's batch normalization) takes its statistics from it.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

__all__ = [
    "masked_mean",
    "masked_var",
    "group_index",
    "group_sum",
    "GroupStats",
    "group_stats",
    "scatter_turns",
    "gather_turns",
]


# --------------------------------------------------------------------------------------------
# Masked reductions
# --------------------------------------------------------------------------------------------
def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of ``x`` over positions where ``mask`` is true (0 where nothing is selected).

    Masked-out entries are replaced, not multiplied, so ``nan``/``inf`` there cannot leak.
    ``dim=None`` reduces everything to a scalar.
    """
    mask = mask.bool()
    total = torch.where(mask, x, torch.zeros_like(x))
    if dim is None:
        return total.sum() / mask.sum().clamp_min(1)
    return total.sum(dim) / mask.sum(dim).clamp_min(1)


def masked_var(x: Tensor, mask: Tensor, unbiased: bool = True) -> Tensor:
    """Scalar variance of ``x`` over masked positions (Bessel-corrected like verl's ``masked_var``)."""
    mask = mask.bool()
    n = mask.sum()
    mean = masked_mean(x, mask)
    sq = masked_mean((x - mean) ** 2, mask)
    if unbiased and n > 1:
        sq = sq * n / (n - 1)
    return sq


# --------------------------------------------------------------------------------------------
# Group statistics
# --------------------------------------------------------------------------------------------
def group_index(ids: Tensor) -> tuple[Tensor, int]:
    """``(B,)`` ids, or ``(B, K)`` rows of keys -> ``(inverse (B,) long, G)``: groups renumbered 0..G-1 in sorted order."""
    _, inverse = torch.unique(ids, dim=0 if ids.dim() > 1 else None, return_inverse=True)
    return inverse, int(inverse.max()) + 1 if inverse.numel() else 0


def group_sum(x: Tensor, inverse: Tensor, num_groups: int) -> Tensor:
    """``(B,)`` values, ``(B,)`` group of each row (from :func:`group_index`) -> ``(G,)`` per-group sums (row order)."""
    return torch.zeros(num_groups, dtype=x.dtype, device=x.device).index_add_(0, inverse, x)


class GroupStats(NamedTuple):
    """Statistics of each row's group, all ``(B,)`` (one value per row, the group's broadcast back).

    mean: the weighted mean of the group's entries; exactly their common value when ``equal``.
    std: the Bessel-corrected std (``Σ w(x − mean)² / (Σ w − 1)``); exactly 0 when ``equal``; 1 when ``count <= 1``.
    count: ``Σ w`` over the group's entries (values' dtype).
    equal: the group has entries and they all hold one value.
    """

    mean: Tensor
    std: Tensor
    count: Tensor
    equal: Tensor


def group_stats(values: Tensor, group_ids: Tensor | None = None, weights: Tensor | None = None) -> GroupStats:
    """Count, mean and std of each row's group, exact for a group whose entries are all equal.

    Args:
        values: ``(B,)`` float (float32, bfloat16, ...; the arithmetic stays in this dtype).
        group_ids: ``(B,)`` ids, or ``(B, K)`` rows of keys (a group per distinct row); ``None``: the whole batch is
            one group.
        weights: ``(B,)`` or None (every row, weight 1). Rows with weight > 0 are the *entries* of their group's
            statistics, with that multiplicity (0/1 or counts); every row gets its group's statistics. With
            ``group_ids=None`` it must be a ``bool`` mask.

    Returns :class:`GroupStats`, ``(B,)`` fields. Values of non-entries never reach a statistic (even ``nan``).

    Arithmetic: per group, ``count = Σ w``, ``mean = Σ w·x / max(count, 1)``, ``var = Σ w·(x − mean)² /
    max(count − 1, 1)`` by ``index_add_`` in row order; with ``group_ids=None``, :func:`masked_mean` and
    :func:`masked_var` (full-batch ``sum``) as SAPO's normalization has always done. These are kept operation for
    operation, so every group whose entries are not all equal gets exactly the bits it always had.

    **Equal groups.** In floating point, ``Σ x / n`` of n equal values need not give the value back (64 × 9.8 in
    float32 does not), and the rounding residue divided by ``std + ε`` made an advantage of order 1 out of a group
    with no signal (verl-agent has the same hazard). A group whose entries are all equal (per-group ``amax == amin``)
    therefore gets ``mean`` = that value and ``std`` = 0 exactly (1 if ``count <= 1``), so ``x − mean`` is exactly 0
    for each of its entries. Only such groups can change, and only where rounding had moved them.
    """
    device = values.device
    if group_ids is None:
        if weights is not None and weights.dtype != torch.bool:
            raise ValueError("group_stats over the whole batch (group_ids=None) takes a bool mask as weights")
        mask = torch.ones_like(values, dtype=torch.bool) if weights is None else weights.to(device)
        inverse, num = torch.zeros(values.shape, dtype=torch.long, device=device), 1
        count = mask.sum().to(values.dtype).expand(values.shape)
        mean = masked_mean(values, mask).expand(values.shape)
        var = masked_var(values, mask).expand(values.shape)
        entry = mask
    else:
        w = torch.ones_like(values) if weights is None else weights.to(device=device, dtype=values.dtype)
        inverse, num = group_index(group_ids.to(device))
        entry = w > 0
        zero = torch.zeros_like(values)
        count_g = group_sum(w, inverse, num)
        mean_g = group_sum(torch.where(entry, w * values, zero), inverse, num) / count_g.clamp_min(1)
        var_g = group_sum(torch.where(entry, w * (values - mean_g[inverse]) ** 2, zero), inverse, num) / (
            count_g - 1
        ).clamp_min(1)
        count, mean, var = count_g[inverse], mean_g[inverse], var_g[inverse]
    inf = torch.full((num,), float("inf"), dtype=values.dtype, device=device)
    hi = (-inf).scatter_reduce(0, inverse, torch.where(entry, values, -inf[inverse]), reduce="amax")[inverse]
    lo = inf.scatter_reduce(0, inverse, torch.where(entry, values, inf[inverse]), reduce="amin")[inverse]
    equal = (count > 0) & (hi == lo)
    mean = torch.where(equal & (mean != hi), hi, mean)  # where rounding moved it (not even a zero's sign otherwise)
    var = torch.where(equal, torch.zeros_like(var), var)
    std = torch.where(count <= 1, torch.ones_like(var), var.sqrt())
    return GroupStats(mean=mean, std=std, count=count, equal=equal)


# --------------------------------------------------------------------------------------------
# Turn rows <-> (trajectory, turn) grid
# --------------------------------------------------------------------------------------------
def _grid_index(traj_ids: Tensor, turn_idx: Tensor) -> tuple[Tensor, int, int]:
    """Renumber trajectories 0..N-1 (in sorted id order); return (traj_of_row (B,), N, H)."""
    if traj_ids.dim() != 1 or traj_ids.shape != turn_idx.shape:
        raise ValueError(f"traj_ids and turn_idx must be (B,), got {tuple(traj_ids.shape)}, {tuple(turn_idx.shape)}")
    if turn_idx.numel() and int(turn_idx.min()) < 0:
        raise ValueError("turn_idx must be >= 0")
    traj_of_row, n = group_index(traj_ids)
    h = int(turn_idx.max()) + 1 if turn_idx.numel() else 0
    return traj_of_row, n, h


def scatter_turns(x: Tensor, traj_ids: Tensor, turn_idx: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Lay turn rows out as one trajectory per grid row.

    Args:
        x: ``(B,)`` a per-turn quantity (any dtype).
        traj_ids: ``(B,)`` long, trajectory of each row (any integers; renumbered 0..N-1 in sorted order).
        turn_idx: ``(B,)`` long, 0-based turn index within the trajectory.

    Returns:
        grid: ``(N, H)`` with ``grid[n, h] = x[row]`` for the row of trajectory ``n`` turn ``h``, 0 elsewhere.
        mask: ``(N, H)`` bool, true at filled cells. Each row is a prefix (turns 0..len-1).
        row_of: ``(N, H)`` long, the batch row of each cell, -1 at empty cells.

    Raises ``ValueError`` on a duplicated (trajectory, turn) pair or a trajectory with a missing turn,
    since a recursion over such a trajectory would silently be wrong.
    """
    traj_of_row, n, h = _grid_index(traj_ids, turn_idx)
    row_of = torch.full((n, h), -1, dtype=torch.long, device=x.device)
    row_of[traj_of_row, turn_idx] = torch.arange(x.shape[0], device=x.device)
    mask = row_of >= 0
    if int(mask.sum()) != x.shape[0]:
        raise ValueError("duplicate (traj_id, turn_idx) pairs in the batch")
    lengths = mask.sum(1)
    if not bool((mask == (torch.arange(h, device=x.device)[None, :] < lengths[:, None])).all()):
        raise ValueError("a trajectory has a gap in its turn indices (turns must be 0..len-1)")
    grid = torch.zeros((n, h), dtype=x.dtype, device=x.device)
    grid[traj_of_row, turn_idx] = x
    return grid, mask, row_of


def gather_turns(grid: Tensor, traj_ids: Tensor, turn_idx: Tensor) -> Tensor:
    """Inverse of :func:`scatter_turns`: ``(N, H)`` grid -> ``(B,)`` in the batch's row order."""
    traj_of_row, _, _ = _grid_index(traj_ids, turn_idx)
    return grid[traj_of_row, turn_idx]
