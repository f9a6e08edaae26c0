"""Small, exact statistics for the leaderboard: the paired tests that compare two submissions.

All functions are pure and take plain Python sequences; they are checked against hand-computed
values in ``tests/leaderboard/test_lb_stats.py``. The confidence intervals of one submission's
aggregates are :mod:`sapo_gym.intervals` (the evaluation harness prints the same ones).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["mcnemar_exact", "paired_permutation", "PairedTest"]


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
    def of(
        cls, success_a: Sequence[bool], success_b: Sequence[bool], score_a: Sequence[float], score_b: Sequence[float]
    ) -> PairedTest:
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
