"""Geometry of the per-category bar chart (rendered as inline SVG by ``_bars.html``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Bar", "BarChart", "category_bars"]


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    low: float
    high: float
    n: int
    y: float
    """Top of this row, in SVG units."""
    width: float
    """Bar length for ``value``."""
    x_low: float
    x_high: float


@dataclass(frozen=True)
class BarChart:
    bars: list[Bar]
    width: int
    height: int
    left: int
    """x of the 0 % axis (labels sit to its left)."""
    plot_width: int
    row: int
    ticks: list[tuple[float, str]]
    """(x, label) of the grid lines at 0, 1/4, 1/2, 3/4 and 1."""
    percent: bool
    """Label values as percentages (success) or as fractions (score)."""

    def label(self, value: float) -> str:
        return f"{100 * value:.1f} %" if self.percent else f"{value:.3f}"


def category_bars(
    aggregates: Mapping[str, Mapping[str, Any]], metric: str = "success", plot_width: int = 420
) -> BarChart:
    """One horizontal bar per category (``all`` last) with its 95 % interval as a whisker."""
    left, row = 150, 30
    names = [k for k in aggregates if k != "all"] + ["all"]
    bars = []
    for i, name in enumerate(names):
        a = aggregates[name]
        lo, hi = a[f"{metric}_ci_low"], a[f"{metric}_ci_high"]
        bars.append(
            Bar(
                name,
                a[metric],
                lo,
                hi,
                int(a["episodes"]),
                y=10 + i * row,
                width=a[metric] * plot_width,
                x_low=left + lo * plot_width,
                x_high=left + hi * plot_width,
            )
        )
    percent = metric == "success"
    ticks = [(left + f * plot_width, f"{f:.0%}" if percent else f"{f:g}") for f in (0, 0.25, 0.5, 0.75, 1.0)]
    return BarChart(bars, left + plot_width + 70, 10 + len(names) * row + 20, left, plot_width, row, ticks, percent)
