"""Plain-Python references of :mod:`trainers.core_algos`'s estimators, for the loop-vs-vectorized tests only.

Each runs row by row over dictionaries in Python floats (float64), with the package functions' conventions
(singletons, Bessel correction, ε placement, the invalid-action penalty), and returns the input's dtype. They are
test code only, so they live under tests/ and not in the package.
"""

from __future__ import annotations

import math
from collections import defaultdict

import torch
from torch import Tensor

__all__ = [
    "turn_gae_loop",
    "sarsa_targets_loop",
    "normalize_turn_advantages_loop",
    "grpo_advantages_loop",
    "anchor_advantages_loop",
    "rloo_advantages_loop",
    "discounted_returns_loop",
    "gigpo_advantages_loop",
]


def turn_gae_loop(rewards: Tensor, values: Tensor, dones: Tensor, mask: Tensor, gamma: float, lam: float) -> Tensor:
    """Reference GAE: plain Python over each trajectory (slow; for the equivalence test only)."""
    adv = torch.zeros_like(values)
    for n in range(values.shape[0]):
        length = int(mask[n].sum())
        next_value, next_adv = 0.0, 0.0
        for t in reversed(range(length)):
            cont = 0.0 if bool(dones[n, t]) else 1.0
            delta = float(rewards[n, t]) + gamma * cont * next_value - float(values[n, t])
            next_adv = delta + gamma * lam * cont * next_adv
            next_value = float(values[n, t])
            adv[n, t] = next_adv
    return adv


def sarsa_targets_loop(rewards: Tensor, q: Tensor, dones: Tensor, mask: Tensor, gamma: float) -> Tensor:
    """Reference SARSA targets in plain Python (for the equivalence test only)."""
    out = torch.zeros_like(q)
    for n in range(q.shape[0]):
        length = int(mask[n].sum())
        for t in range(length):
            q_next = float(q[n, t + 1]) if t + 1 < length else 0.0
            cont = 0.0 if bool(dones[n, t]) else 1.0
            out[n, t] = float(rewards[n, t]) + gamma * cont * q_next
    return out


def normalize_turn_advantages_loop(
    advantages: Tensor, invalid: Tensor, c_inv: float, eps: float = 1e-6, mask: Tensor | None = None
) -> Tensor:
    """Reference SAPO batch normalization in plain Python: ``(Ã − μ_B)/(σ_B + ε)`` over the masked rows, 0 elsewhere."""
    keep = [True] * len(advantages) if mask is None else [bool(m) for m in mask]
    pen = [float(a) - c_inv * float(i) for a, i in zip(advantages, invalid)]
    values = [p for p, k in zip(pen, keep) if k]
    n = len(values)
    mean = sum(values) / n if n else 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    std = math.sqrt(var)
    return torch.tensor([(p - mean) / (std + eps) if k else 0.0 for p, k in zip(pen, keep)], dtype=advantages.dtype)


def grpo_advantages_loop(
    returns: Tensor, group_ids: Tensor, eps: float = 1e-6, weights: Tensor | None = None, scale_by_std: bool = True
) -> Tensor:
    """Reference GRPO in plain Python: each entry counted ``weights`` times; one entry: mean 0, std 1; an equal group
    (std 0) scales by 1."""
    values = [float(r) for r in returns]
    w = [1.0] * len(values) if weights is None else [float(x) for x in weights]
    entries: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for i, g in enumerate(group_ids.tolist()):
        if w[i] > 0:
            entries[g].append((values[i], w[i]))
    out = []
    for i, g in enumerate(group_ids.tolist()):
        count = sum(c for _, c in entries[g])
        if count <= 1:
            mean, std = 0.0, 1.0
        else:
            mean = sum(v * c for v, c in entries[g]) / count
            std = math.sqrt(sum(c * (v - mean) ** 2 for v, c in entries[g]) / (count - 1))
        out.append((values[i] - mean) / (std + eps if std > 0 else 1.0) if scale_by_std else values[i] - mean)
    return torch.tensor(out, dtype=returns.dtype)


def anchor_advantages_loop(
    values: Tensor, group_ids: Tensor, anchor_ids: Tensor, eps: float = 1e-6, scale_by_std: bool = False
) -> Tensor:
    """Reference GiGPO step term in plain Python: ``values`` normalized per (group, anchor); a singleton gets 0."""
    rows: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, key in enumerate(zip(group_ids.tolist(), anchor_ids.tolist())):
        rows[key].append(i)
    out = [0.0] * len(values)
    for members in rows.values():
        for i, a in zip(members, _normalized([float(values[i]) for i in members], scale_by_std, eps)):
            out[i] = a
    return torch.tensor(out, dtype=values.dtype)


def _first_rows(traj: list[int], turn: list[int]) -> set[int]:
    """Row index of each trajectory's smallest turn (the loop references' per-trajectory entries)."""
    best: dict[int, int] = {}
    for i, t in enumerate(traj):
        if t not in best or turn[i] < turn[best[t]]:
            best[t] = i
    return set(best.values())


def rloo_advantages_loop(returns: Tensor, group_ids: Tensor, weights: Tensor | None = None) -> Tensor:
    """Reference RLOO in plain Python (for the equivalence test only)."""
    members: dict[int, list[int]] = defaultdict(list)
    entries: dict[int, list[float]] = defaultdict(list)
    values = [float(r) for r in returns]
    for i, g in enumerate(group_ids.tolist()):
        members[g].append(i)
        if weights is None or float(weights[i]) > 0:
            entries[g].append(values[i])
    out = [0.0] * len(returns)
    for g, rows in members.items():
        n = len(entries[g])
        for i in rows:
            out[i] = (values[i] - sum(entries[g]) / n) * n / (n - 1) if n > 1 else values[i]
    return torch.tensor(out, dtype=returns.dtype)


def discounted_returns_loop(rewards: Tensor, traj_ids: Tensor, turn_idx: Tensor, gamma: float) -> Tensor:
    """Reference discounted returns in plain Python (for the equivalence test only)."""
    rows: dict[int, list[int]] = defaultdict(list)
    for i, traj in enumerate(traj_ids.tolist()):
        rows[traj].append(i)
    out = [0.0] * len(rewards)
    for members in rows.values():
        running = 0.0
        for i in sorted(members, key=lambda j: int(turn_idx[j]), reverse=True):
            running = float(rewards[i]) + gamma * running
            out[i] = running
    return torch.tensor(out, dtype=rewards.dtype)


def _normalized(values: list[float], scale_by_std: bool, eps: float) -> list[float]:
    """``values`` centred on their mean (a group of one: its own value, std 1) and, if asked, over std + ε."""
    if len(values) == 1:
        mean, std = values[0], 1.0
    else:
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return [(v - mean) / (std + eps) if scale_by_std else v - mean for v in values]


def _episode_term_loop(
    score: list[float], traj: list[int], turn: list[int], group: list[int], across: bool, scale_by_std: bool, eps: float
) -> list[float]:
    """The episode term row by row: each row's score against its group's entries (mean 0, std 1 for one entry)."""
    first = _first_rows(traj, turn)
    entries: dict[int, list[float]] = defaultdict(list)
    for i, g in enumerate(group):
        if across or i in first:
            entries[g].append(score[i])
    out = []
    for i, g in enumerate(group):
        values = entries[g]
        if len(values) == 1:
            mean, std = 0.0, 1.0
        else:
            mean = sum(values) / len(values)
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
        out.append((score[i] - mean) / (std + eps if std > 0 else 1.0) if scale_by_std else score[i] - mean)
    return out


def gigpo_advantages_loop(
    rewards: Tensor,
    traj_ids: Tensor,
    turn_idx: Tensor,
    group_ids: Tensor,
    anchor_ids: Tensor,
    gamma: float = 0.95,
    step_weight: float = 1.0,
    scale_by_std: bool = False,
    eps: float = 1e-6,
    stats_across_steps: bool = True,
    penalty: Tensor | None = None,
) -> Tensor:
    """Reference GiGPO in plain Python: dictionaries of rows per group (for the equivalence test only)."""
    traj, turn, group, anchor = traj_ids.tolist(), turn_idx.tolist(), group_ids.tolist(), anchor_ids.tolist()
    pen = [0.0] * len(traj) if penalty is None else [float(p) for p in penalty]
    ret: dict[int, float] = defaultdict(float)
    for i, t in enumerate(traj):
        ret[t] += float(rewards[i])
    score = [ret[t] - pen[i] for i, t in enumerate(traj)]
    episode = _episode_term_loop(score, traj, turn, group, stats_across_steps, scale_by_std, eps)
    step_returns = [g - p for g, p in zip(discounted_returns_loop(rewards, traj_ids, turn_idx, gamma).tolist(), pen)]
    anchors: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i in range(len(traj)):
        anchors[(group[i], anchor[i])].append(i)
    step = [0.0] * len(traj)
    for rows in anchors.values():
        for i, a in zip(rows, _normalized([step_returns[i] for i in rows], scale_by_std, eps)):
            step[i] = a
    return torch.tensor([episode[i] + step_weight * step[i] for i in range(len(traj))], dtype=rewards.dtype)
