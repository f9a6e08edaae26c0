"""Small, exact statistics for the leaderboard: confidence intervals and paired tests.

All functions are pure and take plain Python sequences; they are checked against hand-computed
values in ``tests/leaderboard/test_stats.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["wilson_interval", "mean_interval", "clustered_rate_interval", "clustered_mean_interval", "per_seed_range",
           "mcnemar_exact", "paired_permutation", "PairedTest"]

Z95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ``successes / n`` (``(0, 0)`` when n = 0)."""
    if n == 0:
        return (0.0, 0.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
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
    return [sum(float(v) for v in vals) / len(vals) for vals in values_by_cluster.values() if len(vals)]


def clustered_rate_interval(values_by_cluster: Mapping[Any, Sequence[float]], z: float = Z95) -> tuple[float, float]:
    """Wilson interval of a success rate whose independent evidence is the *cluster* (the task), not the episode.

    ``values_by_cluster``: task id -> the 0/1 outcomes of its episodes (one per seed). The rate is the
    mean of the per-task rates; the interval is Wilson's with ``n`` = the number of tasks. Repeating
    a deterministic agent's episodes over more seeds changes nothing (each task's rate is the same),
    and a stochastic agent's per-task rate in (0, 1) gives a conservative interval (a Bernoulli has
    the largest variance of any [0, 1] variable with that mean).
    """
    means = _cluster_means(values_by_cluster)
    if not means:
        return (0.0, 0.0)
    k = len(means)
    return _wilson_rate(sum(means) / k, k, z)


def _wilson_rate(p: float, n: int, z: float) -> tuple[float, float]:
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(0.0, p * (1 - p)) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def clustered_mean_interval(values_by_cluster: Mapping[Any, Sequence[float]], z: float = Z95) -> tuple[float, float]:
    """Normal interval of a mean over clusters: :func:`mean_interval` of the per-task means (``n`` = tasks)."""
    return mean_interval(_cluster_means(values_by_cluster), z)


def per_seed_range(values_by_seed: Mapping[Any, Sequence[float]]) -> tuple[float, float]:
    """(min, max) over seeds of the per-seed mean: the spread that seeds show, reported apart from the interval."""
    means = _cluster_means(values_by_seed)
    return (min(means), max(means)) if means else (0.0, 0.0)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts.

    ``only_a``: tasks A solved and B did not; ``only_b``: the reverse. Under H0 each discordant
    pair is a fair coin, so p = min(1, 2 * P[Binomial(n, 1/2) <= min(only_a, only_b)]).
    """
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_permutation(a: Sequence[float], b: Sequence[float], rounds: int = 10000, seed: int = 0) -> float:
    """Two-sided paired (sign-flip) permutation p-value for mean(a - b) = 0.

    Under H0 each pair's difference is equally likely to have either sign. Exact enumeration of
    all 2^m sign vectors of the m non-zero differences when m <= 16, else a seeded Monte Carlo
    estimate with ``rounds`` draws (the +1 correction keeps p > 0). Vectorized: ``signs`` is
    ``(draws, m)``, the permuted sums ``signs @ diffs`` are ``(draws,)``.
    """
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    diffs = np.asarray([x - y for x, y in zip(a, b) if abs(x - y) > 1e-12], dtype=np.float64)
    m = diffs.size
    if m == 0:
        return 1.0
    observed = abs(diffs.sum()) - 1e-9
    if m <= 16:
        bits = (np.arange(2**m)[:, None] >> np.arange(m)) & 1  # (2^m, m): every sign vector once
        return float(np.mean(np.abs((1 - 2 * bits) @ diffs) >= observed))
    rng = np.random.default_rng(seed)
    hits = 0
    step = max(1, min(2048, (1 << 20) // m))  # at most 2^20 signs (8 MiB) at a time, however many pairs
    for start in range(0, rounds, step):
        signs = rng.choice((-1.0, 1.0), size=(min(step, rounds - start), m))
        hits += int(np.count_nonzero(np.abs(signs @ diffs) >= observed))
    return (hits + 1) / (rounds + 1)


@dataclass(frozen=True)
class PairedTest:
    """Comparison of two submissions on the same (seed, task) pairs."""

    pairs: int
    success_a: float
    success_b: float
    only_a: int
    """Pairs that A solved and B did not."""
    only_b: int
    mcnemar_p: float
    """Exact McNemar test on success."""
    score_a: float
    score_b: float
    permutation_p: float
    """Paired permutation test on the score."""

    @classmethod
    def of(cls, success_a: Sequence[bool], success_b: Sequence[bool], score_a: Sequence[float], score_b: Sequence[float]) -> "PairedTest":
        n = len(success_a)
        if not n == len(success_b) == len(score_a) == len(score_b):
            raise ValueError("paired samples differ in length")
        only_a = sum(1 for x, y in zip(success_a, success_b) if x and not y)
        only_b = sum(1 for x, y in zip(success_a, success_b) if y and not x)
        return cls(
            pairs=n,
            success_a=sum(success_a) / max(n, 1),
            success_b=sum(success_b) / max(n, 1),
            only_a=only_a,
            only_b=only_b,
            mcnemar_p=mcnemar_exact(only_a, only_b),
            score_a=sum(score_a) / max(n, 1),
            score_b=sum(score_b) / max(n, 1),
            permutation_p=paired_permutation(score_a, score_b),
        )
