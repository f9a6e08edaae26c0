"""Confidence intervals of an evaluation's rates and means, counting tasks, not episodes.

The independent evidence of an evaluation is the task: a deterministic agent replayed on more seeds plays the
same episodes again, so an interval that counted episodes would narrow without any new evidence. Every
interval here is around the episodes' rate or mean (what a table prints beside it) with the task as the unit of
evidence: with as many episodes per task, over the per-task values with ``n`` = the number of tasks. The success
rate's is Wilson's score interval at 95 % (:data:`Z95`); a mean's is the normal one.

Pure functions over plain Python sequences: :func:`sapo_gym.evaluation.summarize` (the table ``evaluate``
prints) and the result bundle's aggregates (:mod:`sapo_gym.bundle`) both call them, so the two agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["Z95", "mean_interval", "clustered_rate_interval", "clustered_mean_interval", "per_seed_range"]

Z95 = 1.959963984540054
"""The standard normal's 0.975 quantile: the z of a two-sided 95 % interval."""


def _wilson(p: float, n: int, z: float) -> tuple[float, float]:
    """Wilson score interval of a proportion ``p`` observed over ``n > 0`` trials, clipped to [0, 1]."""
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(0.0, p * (1 - p)) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mean_interval(values: Sequence[float], z: float = Z95, low: float = 0.0, high: float = 1.0) -> tuple[float, float]:
    """Normal-approximation interval of a mean (sample sd, ``n - 1``), clipped to ``[low, high]``."""
    n = len(values)
    if n == 0:
        return (0.0, 0.0)
    mean = sum(values) / n
    if n == 1:
        return (max(low, mean), min(high, mean))
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    half = z * math.sqrt(var / n)
    return (max(low, mean - half), min(high, mean + half))


def _clusters(values_by_cluster: Mapping[Any, Sequence[float]]) -> list[tuple[int, float]]:
    """Each non-empty cluster's (size, mean), in the mapping's order."""
    return [(len(vals), sum(float(v) for v in vals) / len(vals)) for vals in values_by_cluster.values() if len(vals)]


def _pooled(clusters: Sequence[tuple[int, float]]) -> tuple[float, int]:
    """The episodes' mean and their number, from the clusters' (size, mean)."""
    total = sum(n for n, _ in clusters)
    return sum(n * m for n, m in clusters) / total, total


def _equal_sizes(clusters: Sequence[tuple[int, float]]) -> bool:
    return len({n for n, _ in clusters}) <= 1


def clustered_rate_interval(values_by_cluster: Mapping[Any, Sequence[float]], z: float = Z95) -> tuple[float, float]:
    """Wilson interval of a success rate whose independent evidence is the *cluster* (the task), not the episode.

    ``values_by_cluster``: task id -> the 0/1 outcomes of its episodes (one per seed). The interval is around the
    episodes' rate (the rate a table prints beside it), Wilson's with ``n`` = the effective number of tasks,
    Kish's ``(Σ n_t)² / Σ n_t²`` for tasks of ``n_t`` episodes: the number of tasks when every task has as many
    episodes (then the episodes' rate is the mean of the per-task rates), fewer when some task was played more
    often (an evaluation that draws its tasks, as verl-agent's validation does). It is the worst case, each task's
    episodes all alike: repeating a deterministic agent's episodes over more seeds changes nothing, and a
    stochastic agent's per-task rate in (0, 1) gives a conservative interval (a Bernoulli has the largest variance
    of any [0, 1] variable with that mean). ``(0, 0)`` without a task.
    """
    clusters = _clusters(values_by_cluster)
    if not clusters:
        return (0.0, 0.0)
    if _equal_sizes(clusters):
        return _wilson(sum(m for _, m in clusters) / len(clusters), len(clusters), z)
    rate, total = _pooled(clusters)
    return _wilson(rate, total * total / sum(n * n for n, _ in clusters), z)


def clustered_mean_interval(values_by_cluster: Mapping[Any, Sequence[float]], z: float = Z95) -> tuple[float, float]:
    """Normal interval of the episodes' mean with the task as the unit of evidence: with equal-sized tasks,
    :func:`mean_interval` of the per-task means (``n`` = tasks); otherwise the cluster-robust (ratio-estimator)
    variance ``k / (k − 1) · Σ n_t² (m_t − m)² / (Σ n_t)²`` around the episodes' mean ``m``, which is the former's
    when the sizes are equal."""
    clusters = _clusters(values_by_cluster)
    if _equal_sizes(clusters):
        return mean_interval([m for _, m in clusters], z)
    mean, total = _pooled(clusters)
    k = len(clusters)
    var = k / (k - 1) * sum(n * n * (m - mean) ** 2 for n, m in clusters) / (total * total)
    half = z * math.sqrt(var)
    return (max(0.0, mean - half), min(1.0, mean + half))


def per_seed_range(values_by_seed: Mapping[Any, Sequence[float]]) -> tuple[float, float]:
    """(min, max) over seeds of the per-seed mean: the spread that seeds show, reported apart from the interval."""
    means = [m for _, m in _clusters(values_by_seed)]
    return (min(means), max(means)) if means else (0.0, 0.0)
