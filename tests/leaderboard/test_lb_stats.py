"""Hand-computed values of the leaderboard statistics."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from leaderboard.paired_tests import PairedTest, mcnemar_exact, paired_permutation


@pytest.mark.parametrize(
    "only_a, only_b, p",
    [
        (0, 0, 1.0),
        (0, 5, 2 / 32),
        (1, 5, 2 * 7 / 64),
        (3, 3, 1.0),
        (15, 0, 2 / 2**15),
        (2, 8, 2 * (1 + 10 + 45) / 1024),
    ],
)
def test_mcnemar_exact(only_a: int, only_b: int, p: float) -> None:
    assert mcnemar_exact(only_a, only_b) == pytest.approx(p)
    assert mcnemar_exact(only_b, only_a) == pytest.approx(p)  # symmetric


@pytest.mark.parametrize(
    "a, b, p",
    [
        ([1, 1, 1], [0, 0, 0], 2 / 8),  # only the all-plus and all-minus flips reach |sum| = 3
        ([1, 0], [0, 1], 1.0),  # observed sum 0: every flip is as extreme
        ([0.5, 0.2, 0.0], [0.0, 0.0, 0.1], 4 / 8),  # sums +-.8, +-.6 of 8 reach .6
        ([0.3, 0.3], [0.3, 0.3], 1.0),  # no differences
    ],
)
def test_paired_permutation_exact(a: list[float], b: list[float], p: float) -> None:
    assert paired_permutation(a, b) == pytest.approx(p)


@pytest.mark.parametrize("seed", range(5))
def test_paired_permutation_exact_matches_a_loop_over_sign_vectors(seed: int) -> None:
    rng = random.Random(seed)
    a = [rng.random() for _ in range(9)]
    b = [rng.random() if rng.random() < 0.8 else x for x in a]
    diffs = [x - y for x, y in zip(a, b) if x != y]
    # float64 sums of <= 9 differences in [-1, 1]: within ~1e-14 of exact, so 1e-9 only absorbs rounding ties
    hits = sum(
        abs(sum(s * d for s, d in zip(signs, diffs))) >= abs(sum(diffs)) - 1e-9
        for signs in itertools.product((1, -1), repeat=len(diffs))
    )
    assert paired_permutation(a, b) == pytest.approx(hits / 2 ** len(diffs))


def test_paired_permutation_monte_carlo_matches_binomial() -> None:
    # 20 differences of +-1 with 6 negative: |sum| = 8; under H0 sum = 2X - 20, X ~ Bin(20, 1/2),
    # so p = P(X <= 6) + P(X >= 14) = 2 * sum_{i<=6} C(20, i) / 2^20.
    a, b = [1.0] * 14 + [0.0] * 6, [0.0] * 14 + [1.0] * 6
    exact = 2 * sum(math.comb(20, i) for i in range(7)) / 2**20
    # a seeded Monte-Carlo estimate (the same draws every run) of p = 0.115 from 10,000 rounds: binomial std
    # sqrt(p(1 - p) / 10,000) = 3.2e-3, so 0.015 is 4.7 standard deviations
    assert paired_permutation(a, b, rounds=10000, seed=1) == pytest.approx(exact, abs=0.015)


def test_paired_test_counts() -> None:
    t = PairedTest.of(
        [True, True, False, False], [True, False, True, False], [1.0, 1.0, 0.0, 0.5], [1.0, 0.0, 1.0, 0.5]
    )
    assert (t.pairs, t.only_a, t.only_b, t.success_a, t.success_b) == (4, 1, 1, 0.5, 0.5)
    assert t.mcnemar_p == 1.0 and t.permutation_p == 1.0
    with pytest.raises(ValueError):
        paired_permutation([1.0], [1.0, 2.0])
