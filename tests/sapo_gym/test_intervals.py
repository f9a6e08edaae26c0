"""Hand-computed values of the task-counted confidence intervals."""

from __future__ import annotations

import math

import pytest

from sapo_gym.intervals import Z95, clustered_mean_interval, clustered_rate_interval, mean_interval, per_seed_range


def _tasks(wins: int, n: int) -> dict[str, list[float]]:
    """``n`` tasks of one episode each, the first ``wins`` won."""
    return {f"t{i}": [float(i < wins)] for i in range(n)}


@pytest.mark.parametrize(
    "k, n, expected",
    [
        (0, 16, (0.0, Z95**2 / (16 + Z95**2))),  # p = 0: upper bound z^2 / (n + z^2)
        (16, 16, (16 / (16 + Z95**2), 1.0)),
        (5, 10, (0.236593, 0.763407)),  # the textbook value for 5/10
        (0, 0, (0.0, 0.0)),
    ],
)
def test_the_rate_interval_is_wilsons_over_tasks(k: int, n: int, expected: tuple[float, float]) -> None:
    lo, hi = clustered_rate_interval(_tasks(k, n))
    # float64 arithmetic (~1e-16); abs 1e-6 is the precision of the 6-decimal textbook literals
    assert lo == pytest.approx(expected[0], abs=1e-6) and hi == pytest.approx(expected[1], abs=1e-6)


def test_the_z_is_the_exact_95_percent_quantile() -> None:
    assert math.erf(Z95 / math.sqrt(2)) == pytest.approx(0.95, abs=1e-15)  # P(|N(0,1)| < z), float64's precision


def test_clustered_intervals_by_hand() -> None:
    # a deterministic agent: each task all-or-nothing over its seeds = one observation per task
    assert clustered_rate_interval({"a": [1, 1, 1, 1], "b": [0, 0, 0, 0]}) == clustered_rate_interval(_tasks(1, 2))
    assert clustered_rate_interval({"a": [1], "b": [0]}) == clustered_rate_interval(_tasks(1, 2))
    assert clustered_rate_interval({}) == (0.0, 0.0)
    # a stochastic one: per-task rates 0.5 and 1.0 -> p = 0.75 over n = 2 tasks
    lo, hi = clustered_rate_interval({"a": [1, 0], "b": [1, 1]})
    # Wilson(p=0.75, n=2) by hand: centre (0.75 + z²/4) / (1 + z²/2) = 0.58559, half z·sqrt(0.75·0.25/2 + z²/16) / (1 + z²/2) = 0.38773 (rounded to 5 digits)
    assert lo == pytest.approx(0.19787, abs=1e-5) and hi == pytest.approx(0.97332, abs=1e-5)
    assert clustered_mean_interval({"a": [0.2, 0.4], "b": [1.0, 1.0]}) == pytest.approx(mean_interval([0.3, 1.0]))
    assert per_seed_range({0: [1, 0, 1, 1], 1: [0, 0, 1, 1]}) == (0.5, 0.75)


def test_unequal_tasks_center_the_intervals_on_the_episodes() -> None:
    # scores: task a 0.2, 0.4, 0.6 (mean 0.4), task b 1.0; the episodes' mean (1.2 + 1.0) / 4 = 0.55;
    # cluster-robust variance 2/1 · (3² · 0.15² + 1² · 0.45²) / 4² = 0.050625, sd 0.225
    lo, hi = clustered_mean_interval({"a": [0.2, 0.4, 0.6], "b": [1.0]})
    assert (lo, hi) == pytest.approx((0.55 - Z95 * 0.225, 0.55 + Z95 * 0.225), abs=1e-12)  # float64, few operations
    # equal sizes: the same as the per-task means' interval (the bundles' case: every task once per seed)
    assert clustered_mean_interval({"a": [0.2, 0.6], "b": [1.0, 1.0]}) == mean_interval([0.4, 1.0])
    # a rate: 3 of 4 episodes won, task a thrice: around 0.75, over 1.6 effective tasks (Kish)
    lo, hi = clustered_rate_interval({"a": [1, 1, 1], "b": [0]})
    assert lo < 0.75 < hi


def test_mean_interval_by_hand() -> None:
    # mean .5, sample var (.09+.01+.01+.09)/3, se = sqrt(var/4) = .1290994, half = z * se
    lo, hi = mean_interval([0.2, 0.4, 0.6, 0.8])
    assert lo == pytest.approx(0.5 - Z95 * math.sqrt(0.2 / 3 / 4)) and hi == pytest.approx(
        0.5 + Z95 * math.sqrt(0.2 / 3 / 4)
    )
    assert mean_interval([0.0, 1.0, 1.0, 0.0]) == (0.0, 1.0)  # clipped
    assert mean_interval([0.3]) == (0.3, 0.3)
