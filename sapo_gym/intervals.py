"""Confidence intervals of an evaluation's rates and means, counting tasks, not episodes.

The independent evidence of an evaluation is the task: a deterministic agent replayed on more seeds plays the
same episodes again, so an interval that counted episodes would narrow without any new evidence. Every
interval here is taken over the per-task values (each task's mean over its episodes), with ``n`` = the number
of tasks. The success rate's is Wilson's score interval at 95 % (:data:`Z95`); a mean's is the normal one.

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


def _cluster_means(values_by_cluster: Mapping[Any, Sequence[float]]) -> list[float]:
    """Each non-empty cluster's mean, in the mapping's order."""
    return [sum(float(v) for v in vals) / len(vals) for vals in values_by_cluster.values() if len(vals)]


def clustered_rate_interval(values_by_cluster: Mapping[Any, Sequence[float]], z: float = Z95) -> tuple[float, float]:
    """Wilson interval of a success rate whose independent evidence is the *cluster* (the task), not the episode.

    ``values_by_cluster``: task id -> the 0/1 outcomes of its episodes (one per seed). The rate is the
    mean of the per-task rates; the interval is Wilson's with ``n`` = the number of tasks. Repeating
    a deterministic agent's episodes over more seeds changes nothing (each task's rate is the same),
    and a stochastic agent's per-task rate in (0, 1) gives a conservative interval (a Bernoulli has
    the largest variance of any [0, 1] variable with that mean). ``(0, 0)`` without a task.
    """
    means = _cluster_means(values_by_cluster)
    if not means:
        return (0.0, 0.0)
    k = len(means)
    return _wilson(sum(means) / k, k, z)


def clustered_mean_interval(values_by_cluster: Mapping[Any, Sequence[float]], z: float = Z95) -> tuple[float, float]:
    """Normal interval of a mean over clusters: :func:`mean_interval` of the per-task means (``n`` = tasks)."""
    return mean_interval(_cluster_means(values_by_cluster), z)


def per_seed_range(values_by_seed: Mapping[Any, Sequence[float]]) -> tuple[float, float]:
    """(min, max) over seeds of the per-seed mean: the spread that seeds show, reported apart from the interval."""
    means = _cluster_means(values_by_seed)
    return (min(means), max(means)) if means else (0.0, 0.0)
