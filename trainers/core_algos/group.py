"""The group estimators, which need no value model: GRPO, RLOO and GiGPO, with the scores and entries they share.

Each trajectory is compared with the other rollouts of its task group (``G`` rollouts of one task, ``group_ids``);
every statistic comes from :func:`~trainers.core_algos.masked.group_stats` (one helper, exact for a group whose
entries are all equal: such a group carries no signal and gets advantage exactly 0).

* **GRPO** (Shao et al. 2024; verl's ``compute_grpo_outcome_advantage``): ``A_i = (s_i − mean_G)/(std_G + ε)``, std
  Bessel-corrected, ε = 1e-6; ``scale_by_std=False`` keeps only ``s_i − mean_G`` (Dr. GRPO / ``mean_norm``). A group
  whose statistics rest on one entry gets mean 0, std 1 (verl's convention): it keeps its raw score.
* **RLOO** (REINFORCE leave-one-out; Kool et al. 2019, "Buy 4 REINFORCE samples, get a baseline for free!";
  Ahmadian et al. 2024, "Back to Basics"): ``A_i = R_i − (1/(G−1))·Σ_{j≠i} R_j``, the mean return of the
  *other* members of the group as baseline; no scaling. A group of one keeps its raw return (baseline 0, verl's
  convention).
* **GiGPO** (Group-in-Group Policy Optimization; Feng et al. 2025, arXiv 2505.10978; verl-agent's
  ``gigpo/core_gigpo.py``): ``A_t = A^E(τ) + ω·A^S(t)``. The episode term ``A^E`` is GRPO's group-normalized
  return. The step term groups the turns of one task group whose env observation is the same (an *anchor
  state*, ``anchor_ids``), takes each turn's discounted return from that step ``G_t = Σ_{k≥t} γ^{k−t} r_k``
  and normalizes it within its anchor group. Two normalizations, for both terms alike (verl-agent's modes):
  ``mean_norm`` subtracts the group mean (the paper's "w/o std"), ``mean_std_norm`` also divides by the
  Bessel-corrected std + ε (ε = 1e-6; "w/ std"). An anchor group of one turn gets step advantage 0 (its
  own mean, std 1), an episode group of one trajectory its raw return (mean 0, std 1), as verl-agent does.

**Scores, entries and the invalid-action penalty** (verl-agent's placement): every turn row carries a *score*,
its trajectory's return minus ``c_inv`` when that turn's action was invalid (:func:`turn_scores`; verl-agent's
``apply_invalid_action_penalty`` subtracts it from each turn's episode reward before any advantage, and from
GiGPO's step returns alike). Group statistics are taken over *entries* (:func:`group_entries`): every turn row
(verl-agent's default ``compute_mean_std_cross_steps=True``), or one row per trajectory, its first turn (the row
verl-agent's ``seen_pairs`` rule keeps when that flag is off). Every row's own score is then compared with them.

Shapes: ``B`` turn rows, ``N`` trajectories. Plain-Python references of these functions, for the equivalence
tests, are in ``tests/support/core_algos_reference.py`` (not part of the package).
"""

from __future__ import annotations

import torch
from torch import Tensor

from trainers.core_algos.masked import gather_turns, group_index, group_stats, group_sum, scatter_turns

__all__ = [
    "trajectory_returns",
    "turn_scores",
    "group_entries",
    "equal_return_groups",
    "grpo_advantages",
    "rloo_advantages",
    "discounted_returns",
    "anchor_advantages",
    "gigpo_advantages",
]


def trajectory_returns(rewards: Tensor, traj_ids: Tensor) -> Tensor:
    """``(B,)`` turn rewards -> ``(B,)`` undiscounted return of each row's trajectory (broadcast back)."""
    traj_of_row, n = group_index(traj_ids)
    return group_sum(rewards, traj_of_row, n)[traj_of_row]


def turn_scores(rewards: Tensor, traj_ids: Tensor, penalty: Tensor | None = None) -> Tensor:
    """Each turn row's score: its trajectory's undiscounted return minus the row's ``penalty``.

    Args:
        rewards, traj_ids: ``(B,)`` turn rows.
        penalty: ``(B,)`` per row (``c_inv·m_t``: the invalid-action penalty), or None for 0.

    Returns ``(B,)`` in row order.
    """
    scores = trajectory_returns(rewards, traj_ids)
    return scores if penalty is None else scores - penalty.to(scores.dtype)


def equal_return_groups(rewards: Tensor, traj_ids: Tensor, group_ids: Tensor) -> Tensor:
    """The fraction of task groups whose trajectories all have the same undiscounted return: the groups a
    group-relative estimator gets no signal from (all success or all failure; their advantages are exactly 0 but for
    the invalid-action penalty). A group of one trajectory counts as equal.

    Args:
        rewards, traj_ids, group_ids: ``(B,)`` turn rows.

    Returns a 0-dim float tensor in [0, 1].
    """
    traj_of_row, n = group_index(traj_ids)
    returns = group_sum(rewards.to(torch.float64), traj_of_row, n)  # (N,), float64: a sum of equal rewards stays exact
    first_row = torch.full((n,), -1, dtype=torch.long, device=traj_ids.device)
    first_row = first_row.scatter(0, traj_of_row, torch.arange(len(traj_ids), device=traj_ids.device))
    group_of_traj, g = group_index(group_ids[first_row])
    low = returns.new_full((g,), float("inf")).scatter_reduce(0, group_of_traj, returns, reduce="amin")
    high = returns.new_full((g,), float("-inf")).scatter_reduce(0, group_of_traj, returns, reduce="amax")
    return (low == high).float().mean()


def group_entries(traj_ids: Tensor, turn_idx: Tensor, across_steps: bool) -> Tensor:
    """``(B,)`` float 0/1: the rows whose scores enter their group's statistics.

    ``across_steps``: every row. Otherwise one row per trajectory, the one with its smallest turn index.
    """
    if across_steps:
        return torch.ones(traj_ids.shape, dtype=torch.float32, device=traj_ids.device)
    traj_of_row, n = group_index(traj_ids)
    first = torch.full((n,), torch.iinfo(torch.long).max, dtype=torch.long, device=traj_ids.device)
    first = first.scatter_reduce(0, traj_of_row, turn_idx.to(torch.long), reduce="amin")
    return (turn_idx.to(torch.long) == first[traj_of_row]).float()


def grpo_advantages(
    returns: Tensor,
    group_ids: Tensor,
    eps: float = 1e-6,
    weights: Tensor | None = None,
    scale_by_std: bool = True,
) -> Tensor:
    """Group-relative advantage ``(R − mean_G)/(std_G + ε)`` (std Bessel-corrected, as in verl).

    Args:
        returns: ``(N,)`` one score per entry (a trajectory's return, or a turn row's score).
        group_ids: ``(N,)`` long, entries that played the same task share an id.
        weights: ``(N,)`` optional counts. ``None`` gives the trajectory-level statistics of GRPO;
            0/1 from :func:`group_entries` picks the rows of the statistics (every row gets an advantage);
            each trajectory's number of turns gives verl-agent's "statistics across steps"
            (``compute_mean_std_cross_steps=True``: every turn row enters the group's mean/std).
        scale_by_std: ``False`` keeps only the mean subtraction (Dr. GRPO / verl-agent ``mean_norm``).

    A group whose statistics rest on one entry gets mean 0, std 1 (verl's convention), so a singleton
    trajectory keeps its raw return as advantage; a group of equal entries gets exactly 0 (:func:`group_stats`),
    and a row outside an equal group's entries gets its offset from their value, unscaled (std 0 has nothing to scale).
    Returns ``(N,)``; the caller broadcasts to turns/tokens.
    """
    stats = group_stats(returns, group_ids, weights)
    mean = torch.where(stats.count <= 1, torch.zeros_like(stats.mean), stats.mean)
    centered = returns - mean
    if not scale_by_std:
        return centered
    # an equal group has no spread to scale by (std exactly 0): its entries are 0 either way, and a row outside its
    # entries (a later, penalized turn) keeps its offset instead of being divided by ε (−c_inv/ε = −10⁵·c_inv)
    return centered / torch.where(stats.std > 0, stats.std + eps, torch.ones_like(stats.std))


def rloo_advantages(returns: Tensor, group_ids: Tensor, weights: Tensor | None = None) -> Tensor:
    """Leave-one-out advantage ``R_i − mean_{j≠i, j∈G(i)} R_j``, i.e. ``n/(n−1)·(R_i − mean_G)``.

    Args:
        returns: ``(N,)`` one score per entry (a trajectory's return, or a turn row's score).
        group_ids: ``(N,)`` long, entries of the same task share an id.
        weights: ``(N,)`` optional 0/1: only these entries make the group's mean and count ``n`` (verl-agent's
            ``compute_rloo_outcome_advantage`` over :func:`group_entries`); every entry gets an advantage.

    Returns ``(N,)``; a group of one entry keeps the raw score (baseline 0, verl's convention). Without weights
    the advantages of a group sum to 0 (``Σ_i R_i − Σ_i (S − R_i)/(G−1) = S − S``); a group of equal entries gets
    exactly 0 (:func:`group_stats`).
    """
    stats = group_stats(returns, group_ids, weights)
    n = stats.count
    centred = returns - stats.mean
    return torch.where(n > 1, centred * n / (n - 1).clamp_min(1), returns)


def discounted_returns(rewards: Tensor, traj_ids: Tensor, turn_idx: Tensor, gamma: float) -> Tensor:
    """``G_t = r_t + γ·G_{t+1}`` within each trajectory (0 past its last recorded turn: no bootstrap).

    Args:
        rewards, traj_ids, turn_idx: ``(B,)`` turn rows, in any order (turns of a trajectory are 0..len-1).

    Returns ``(B,)`` in row order.
    """
    r, mask, _ = scatter_turns(rewards, traj_ids, turn_idx)
    out = torch.zeros_like(r)
    running = torch.zeros_like(r[:, 0])
    for t in reversed(range(r.shape[1])):
        running = torch.where(mask[:, t], r[:, t] + gamma * running, torch.zeros_like(running))
        out[:, t] = running
    return gather_turns(out, traj_ids, turn_idx)


def anchor_advantages(
    values: Tensor, group_ids: Tensor, anchor_ids: Tensor, eps: float = 1e-6, scale_by_std: bool = False
) -> Tensor:
    """GiGPO's step term: ``values`` normalized within each anchor group (same ``group_ids`` and ``anchor_ids``).

    Args:
        values: ``(B,)`` per turn (GiGPO: the discounted return from the step, :func:`discounted_returns`).
        group_ids: ``(B,)`` long, task group of each turn.
        anchor_ids: ``(B,)`` long, identity of the env observation the turn acted on (equal observation,
            equal id); grouped together with ``group_ids``, so equal observations of two tasks never mix.
        scale_by_std: ``False``: ``v − mean`` (``mean_norm``); ``True``: ``(v − mean)/(std + ε)``
            (``mean_std_norm``; std Bessel-corrected).

    Returns ``(B,)``; a turn alone in its anchor group, or in one whose values are all equal, gets exactly 0
    (:func:`group_stats`: its own mean, std 1).
    """
    keys = torch.stack([group_ids.to(torch.long), anchor_ids.to(torch.long)], dim=1)
    stats = group_stats(values, keys)
    centered = values - stats.mean
    return centered / (stats.std + eps) if scale_by_std else centered


def gigpo_advantages(
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
    """GiGPO's turn advantage ``A^E + ω·A^S``, the penalty placed as verl-agent places it.

    Args:
        rewards, traj_ids, turn_idx, group_ids, anchor_ids: ``(B,)`` turn rows, any order.
        gamma: γ of the step term's discounted returns (verl-agent's GiGPO scripts: 0.95).
        step_weight: ω (verl-agent's ``step_advantage_w``, 1.0).
        scale_by_std: ``mean_std_norm`` (True) or ``mean_norm`` (False, verl-agent's default), for both terms.
        stats_across_steps: the episode term's group statistics over every turn row's score (verl-agent's
            ``episode_norm_reward`` default) or over one entry per trajectory (:func:`group_entries`).
        penalty: ``(B,)`` ``c_inv·m_t`` or None: subtracted from each row's episode score and from its step return
            before either normalization (verl-agent's ``apply_invalid_action_penalty``).

    Returns ``(B,)`` in row order.
    """
    scores = turn_scores(rewards, traj_ids, penalty)
    entries = group_entries(traj_ids, turn_idx, stats_across_steps)
    episode = grpo_advantages(scores, group_ids, eps=eps, weights=entries, scale_by_std=scale_by_std)
    step_returns = discounted_returns(rewards, traj_ids, turn_idx, gamma)
    if penalty is not None:
        step_returns = step_returns - penalty.to(step_returns.dtype)
    step = anchor_advantages(step_returns, group_ids, anchor_ids, eps=eps, scale_by_std=scale_by_std)
    return episode + step_weight * step
