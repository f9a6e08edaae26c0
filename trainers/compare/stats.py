"""Statistics over seeds: mean ± 95 % Student-t interval, and the lift of a method over its warm start.

Seeds are few (2–5), so the interval uses Student's t with n − 1 degrees of freedom rather than
the normal approximation (which is ~2.2× too narrow at n = 3). Pure functions of plain floats.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sapo_gym.intervals import Z95

__all__ = [
    "T975",
    "Difference",
    "Lift",
    "SeedStat",
    "binomial_variance",
    "collapse",
    "lift_over",
    "seed_stat",
    "seeds_to_resolve",
    "t_quantile",
    "welch_df",
    "welch_difference",
]

T975 = (
    12.706204736,
    4.302652730,
    3.182446305,
    2.776445105,
    2.570581836,
    2.446911851,
    2.364624252,
    2.306004135,
    2.262157163,
    2.228138852,
    2.200985160,
    2.178812830,
    2.160368656,
    2.144786688,
    2.131449546,
    2.119905299,
    2.109815578,
    2.100922040,
    2.093024054,
    2.085963447,
)
"""Two-sided 95 % quantiles t_{0.975, df} for df = 1..20."""


def t_quantile(df: int) -> float:
    """t_{0.975, df}; beyond the table the normal quantile plus the first Cornish–Fisher term."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(T975):
        return T975[df - 1]
    return Z95 + (Z95**3 + Z95) / (4 * df)


@dataclass(frozen=True)
class SeedStat:
    """A quantity measured once per seed: mean and its 95 % t-interval (None with a single seed)."""

    mean: float
    ci_low: float | None
    ci_high: float | None
    values: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "values": list(self.values)}

    def format(self, pct: bool = True) -> str:
        """``52.1 ± 8.3`` (percent) or ``0.521 ± 0.083``; a single seed prints the value alone."""
        scale, digits = (100.0, 1) if pct else (1.0, 3)
        text = f"{self.mean * scale:.{digits}f}"
        if self.ci_high is not None:
            text += f" ± {(self.ci_high - self.mean) * scale:.{digits}f}"
        return text


def seed_stat(values: Sequence[float]) -> SeedStat:
    """Mean and Student-t 95 % interval of per-seed values (no interval from one seed)."""
    n = len(values)
    if n == 0:
        raise ValueError("no values")
    mean = math.fsum(values) / n
    if n == 1:
        return SeedStat(mean, None, None, tuple(values))
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(n - 1) * sd / math.sqrt(n)
    return SeedStat(mean, mean - half, mean + half, tuple(values))


@dataclass(frozen=True)
class Lift:
    """Did RL change success over the warm start it started from?"""

    baseline: float
    """Success of the warm start (the same evaluation split and seeds)."""
    after: SeedStat
    """Success after RL, over seeds."""
    verdict: str
    """'lifted' (the interval of the gain is above 0), 'lowered' (below 0), or 'no detectable change'."""
    gain_low: float | None = None
    """Lower end of the gain's 95 % interval (None: one seed and no episode counts)."""
    gain_high: float | None = None
    """Upper end of the gain's 95 % interval."""

    @property
    def gain(self) -> float:
        return self.after.mean - self.baseline

    def line(self, method: str, start: str) -> str:
        """One honest sentence with the numbers."""

        def pct(x: float) -> str:
            return f"{100 * x:.1f} %"

        if self.gain_low is None or self.gain_high is None:
            ci = "one seed, no interval"
        else:
            ci = f"95 % CI of the gain [{100 * self.gain_low:+.1f}, {100 * self.gain_high:+.1f}] points"
        head = {
            "lifted": "RL lifted success",
            "lowered": "RL lowered success",
            "no detectable change": "RL did not detectably change success",
        }[self.verdict]
        return (
            f"{method}: {head} over the {start}: {pct(self.baseline)} → {pct(self.after.mean)} "
            f"({100 * self.gain:+.1f} points; {ci}; seeds: {', '.join(pct(v) for v in self.after.values)})."
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "after": self.after.to_dict(),
            "gain": self.gain,
            "gain_ci_low": self.gain_low,
            "gain_ci_high": self.gain_high,
            "verdict": self.verdict,
        }


def binomial_variance(rate: float, episodes: int) -> float:
    """Variance of a success rate measured on ``episodes`` episodes, Agresti–Coull adjusted.

    (x + 2) / (n + 4) keeps the variance positive at 0 % and 100 %, where the plain p(1 − p) / n
    would claim a measurement without noise.
    """
    adjusted = (rate * episodes + 2.0) / (episodes + 4.0)
    return adjusted * (1.0 - adjusted) / (episodes + 4.0)


def welch_df(terms: Sequence[tuple[float, int]]) -> int:
    """Welch–Satterthwaite degrees of freedom of a sum of variance estimates ``(variance, df)``:
    ν = (Σ vᵢ)² / Σ (vᵢ² / dfᵢ), rounded down (conservative); terms with df < 1 or no variance are skipped."""
    used = [(v, d) for v, d in terms if v > 0 and d >= 1]
    if not used:
        return max([d for _, d in terms] + [1])
    total = math.fsum(v for v, _ in used)
    return max(1, int(total**2 / math.fsum(v * v / d for v, d in used)))


def lift_over(baseline: float, per_seed: Sequence[float], episodes: int = 0, baseline_episodes: int = 0) -> Lift:
    """Compare per-seed success after RL with the warm start's success.

    The gain's 95 % interval is mean − baseline ± t_ν·√(var_after + var_baseline): var_after is the
    squared standard error over seeds, but never below the evaluation noise of the seeds' pooled
    episodes (two seeds with 0 / 60 each do not measure 0 % exactly); var_baseline is the warm start's
    evaluation noise (``baseline_episodes``). Episode counts of 0 leave the evaluation noise out (the
    plain t-interval over seeds). ν is the Welch–Satterthwaite degrees of freedom of that sum
    (:func:`welch_df`): k − 1 for a seed variance, episodes − 1 for a binomial one, so the few seeds'
    t-quantile widens only the part of the interval they estimate. With one seed, the interval holds
    the evaluation noise only (normal quantile); with one seed and no counts only the direction is
    reported and the line says so.
    """
    after = seed_stat(per_seed)
    k = len(per_seed)
    var_after = 0.0 if k == 1 else statistics.variance(per_seed) / k  # squared standard error of the mean
    df_after = k - 1
    if episodes and binomial_variance(after.mean, k * episodes) > var_after:
        var_after, df_after = binomial_variance(after.mean, k * episodes), k * episodes - 1
    var_base = binomial_variance(baseline, baseline_episodes) if baseline_episodes else 0.0
    gain = after.mean - baseline
    if k == 1 and not (episodes or baseline_episodes):
        verdict = "lifted" if gain > 0 else "lowered" if gain < 0 else "no detectable change"
        return Lift(baseline, after, verdict)
    terms = [(var_after, df_after)] + ([(var_base, baseline_episodes - 1)] if baseline_episodes else [])
    half = (t_quantile(welch_df(terms)) if k > 1 else 1.959963984540054) * math.sqrt(var_after + var_base)
    low, high = gain - half, gain + half
    verdict = "lifted" if low > 0 else "lowered" if high < 0 else "no detectable change"
    return Lift(baseline, after, verdict, low, high)


def collapse(invalid_rates: Sequence[float | None], successes: Sequence[float | None], window: int = 3) -> str | None:
    """Did a training run collapse? ``None``, or the first collapse as a sentence.

    Two kinds, on the per-iteration rollout metrics: the invalid-format rate above 0.5 for ``window``
    consecutive iterations; or success falling to 0 and staying there (0 from some iteration to the end,
    at least ``window`` iterations long, after a success above 0). ``None`` marks an iteration without
    episodes (all lost with their env workers): it is skipped, neither breaking a run nor counting in it.
    """
    run, first = 0, 0
    for i, rate in enumerate(invalid_rates):
        if rate is None:
            continue
        run, first = (run + 1, first if run else i) if rate > 0.5 else (0, 0)
        if run == window:
            return f"invalid-format rate above 0.5 for {window} iterations from iteration {first}"
    seen = [(i, s) for i, s in enumerate(successes) if s is not None]
    tail = len(seen)
    while tail > 0 and seen[tail - 1][1] == 0:
        tail -= 1
    if len(seen) - tail >= window and any(s > 0 for _, s in seen[:tail]):
        return f"success 0 from iteration {seen[tail][0]} to the end ({len(seen) - tail} iterations)"
    return None


@dataclass(frozen=True)
class Difference:
    """The difference of two methods' per-seed means with its 95 % Welch interval (None with fewer than 2 seeds each)."""

    diff: float
    low: float | None
    high: float | None

    @property
    def resolved(self) -> bool:
        """Whether the interval excludes 0."""
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)


def _welch_half(var_a: float, var_b: float, n_a: int, n_b: int) -> float:
    """Half-width of the 95 % Welch interval of a difference of means (sample variances, seeds per side)."""
    terms = [(var_a / n_a, n_a - 1), (var_b / n_b, n_b - 1)]
    return t_quantile(welch_df(terms)) * math.sqrt(var_a / n_a + var_b / n_b)


def welch_difference(a: Sequence[float], b: Sequence[float]) -> Difference:
    """``mean(a) − mean(b)`` with its 95 % Welch interval over seeds (unequal variances, Welch–Satterthwaite df)."""
    diff = math.fsum(a) / len(a) - math.fsum(b) / len(b)
    if len(a) < 2 or len(b) < 2:
        return Difference(diff, None, None)
    half = _welch_half(statistics.variance(a), statistics.variance(b), len(a), len(b))
    return Difference(diff, diff - half, diff + half)


def seeds_to_resolve(a: Sequence[float], b: Sequence[float], limit: int = 1000) -> int | None:
    """The seeds per method at which the observed difference of ``a`` and ``b`` would have a Welch interval excluding 0,
    if the difference and both seed spreads stayed as observed (the smallest n ≥ 2 with t_ν·√((s_a² + s_b²)/n) < |d|).
    None: no difference, fewer than 2 seeds a side, or more than ``limit`` seeds needed."""
    if len(a) < 2 or len(b) < 2:
        return None
    diff = abs(math.fsum(a) / len(a) - math.fsum(b) / len(b))
    var_a, var_b = statistics.variance(a), statistics.variance(b)
    if diff == 0:
        return None
    for n in range(2, limit + 1):
        if _welch_half(var_a, var_b, n, n) < diff:
            return n
    return None
