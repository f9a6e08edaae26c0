"""Figures of a comparison, drawn from ``results.json`` alone (matplotlib, Agg backend; PNG and SVG).

* ``learning_curves``: two panels, training-rollout success per iteration and held-out success every
  ``eval_every`` iterations (first evaluation seed; iteration 0 is the warm start), each the mean over
  seeds with a min–max band, and the starting policy's held-out success as a dashed line;
* ``value_explained_var``: the explained variance of each iteration's returns by V_old, per method with a value
  function (mean over seeds, min–max band);
* ``category_success``: evaluation success per category and method (bars: mean over seeds,
  whiskers: 95 % t-interval), the starting policy beside them;
* ``phase_times``: the paper's Fig. 2 — seconds per iteration split into its eight phases, one
  stacked horizontal bar per method.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from trainers.compare.config import label
from trainers.method_registry import METHODS
from trainers.profiling import PHASES

__all__ = ["COLOURS", "write_plots"]

COLOURS = {**{name: e.colour for name, e in METHODS.items() if e.colour}, "start": "#7f7f7f"}
"""One colour per method (its registry entry's), the same in every figure; "start" is the warm start's."""


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, out: Path, name: str) -> list[Path]:
    paths = [out / f"{name}.png", out / f"{name}.svg"]
    for p in paths:
        fig.savefig(p, dpi=150 if p.suffix == ".png" else None, bbox_inches="tight")
    return paths


def _band(
    ax: Any, x: Any, series: list[list[float]], colour: str | None, label: str, marker: str | None = None
) -> None:
    """Mean over seeds as a line, the min–max over seeds as a band (``None``, an iteration without episodes, is a gap)."""
    import numpy as np

    ys = np.asarray([s[: len(x)] for s in series if len(s) >= len(x)], dtype=float)  # None → nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a column that is nan for every seed stays nan: a gap
        mean, low, high = np.nanmean(ys, 0), np.nanmin(ys, 0), np.nanmax(ys, 0)
    ax.plot(x, mean, color=colour, label=f"{label} (n={len(ys)})", lw=2, marker=marker)
    if len(ys) > 1:
        ax.fill_between(x, low, high, color=colour, alpha=0.2, lw=0)


def learning_curves(res: dict[str, Any], axes: Any) -> None:
    """Left: training-rollout success per iteration; right (when recorded): held-out success over training."""
    import numpy as np

    train_ax, held_ax = axes
    for algo, m in res["methods"].items():
        _band(
            train_ax,
            np.asarray(m["curves"]["iteration"]) + 1,
            m["curves"]["rollout_success"],
            COLOURS.get(algo),
            label(algo),
        )
        if "held_out_success" in m["curves"]:
            _band(
                held_ax,
                np.asarray(m["curves"]["held_out_iteration"]),
                m["curves"]["held_out_success"],
                COLOURS.get(algo),
                label(algo),
                marker="o",
            )
    start = res["warm_start"]["summary"]["all"]["success"]
    for ax in axes:
        ax.axhline(start, color=COLOURS["start"], ls="--", lw=1.5, label=f"{res['start_name']} (held out, all seeds)")
        ax.set(xlabel="iteration", ylim=(-0.02, 1.02))
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=7)
    train_ax.set(ylabel="success", title="Training rollouts (train tasks, temperature 1)")
    held_ax.set(title=f"Held out ({res['eval_split'] or 'default split'}, eval seed {res['eval_seeds'][0]})")
    if not any("held_out_success" in m["curves"] for m in res["methods"].values()):
        held_ax.text(
            0.5,
            0.5,
            "no held-out evaluation during training\n(--eval-every 0)",
            ha="center",
            va="center",
            transform=held_ax.transAxes,
        )


def value_explained_variance(res: dict[str, Any], ax: Any) -> None:
    """How much of each iteration's return variance V_old explained, per method with a V (mean over seeds, min–max band)."""
    import numpy as np

    drawn = False
    for algo, m in res["methods"].items():
        series = m["curves"].get("value_explained_var") or []
        if any(v is not None for s in series for v in s):
            _band(ax, np.asarray(m["curves"]["iteration"]) + 1, series, COLOURS.get(algo), label(algo))
            drawn = True
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set(
        xlabel="iteration",
        ylabel="explained variance",
        ylim=(-0.5, 1.0),
        title="V explained variance of the new episodes' returns (before each update)",
    )
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(loc="best", fontsize=7)
    else:
        ax.text(0.5, 0.5, "no method with a value function", ha="center", va="center", transform=ax.transAxes)


def advantage_signal(res: dict[str, Any], axes: Any) -> None:
    """Left: per iteration, the share of turns with a non-zero advantage (solid) and, for the group methods, of task
    groups whose rollouts all had the same return (dashed: no signal). Right: held-out success against the env steps
    played so far (mean over seeds), where methods play the same episodes but not the same steps."""
    import numpy as np

    signal_ax, steps_ax = axes
    for algo, m in res["methods"].items():
        c, colour = m["curves"], COLOURS.get(algo)
        x = np.asarray(c["iteration"]) + 1
        if c.get("nonzero_advantage_turns"):
            _band(signal_ax, x, c["nonzero_advantage_turns"], colour, f"{label(algo)}: turns with A ≠ 0")
        if any(v is not None for s in c.get("equal_return_groups") or [] for v in s):
            signal_ax.plot(
                x,
                np.nanmean(np.asarray(c["equal_return_groups"], dtype=float), 0),
                color=colour,
                ls="--",
                label=f"{label(algo)}: groups with equal returns",
            )
        if "held_out_success" in c and c.get("env_steps"):
            cumulative = np.nanmean(np.cumsum(np.asarray(c["env_steps"], dtype=float), 1), 0)
            steps = [0.0, *(cumulative[min(i, len(cumulative)) - 1] for i in c["held_out_iteration"][1:])]
            _band(steps_ax, np.asarray(steps), c["held_out_success"], colour, label(algo), marker="o")
    signal_ax.set(xlabel="iteration", ylabel="share", ylim=(-0.02, 1.02), title="Where the advantage carries signal")
    steps_ax.set(
        xlabel="env steps played (mean over seeds)",
        ylabel="held-out success",
        ylim=(-0.02, 1.02),
        title=f"Held out (eval seed {res['eval_seeds'][0]}) against env steps",
    )
    signal_ax.xaxis.get_major_locator().set_params(integer=True)
    steps_ax.tick_params(labelleft=True)  # the panels share the 0-1 range, not the quantity
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize=7)
        else:
            ax.text(0.5, 0.5, "not recorded", ha="center", va="center", transform=ax.transAxes)


def category_success(res: dict[str, Any], ax: Any) -> None:
    import numpy as np

    cats = [*res["categories"], "all"] if len(res["categories"]) > 1 else ["all"]
    series = [
        ("start", res["start_name"], [res["warm_start"]["summary"].get(c, {}).get("success", 0.0) for c in cats], None)
    ]
    for algo, m in res["methods"].items():
        stats = [m["overall"]["success"] if c == "all" else m["categories"][c]["success"] for c in cats]
        err = None
        if stats[0]["ci_high"] is not None:
            err = np.array([[s["mean"] - s["ci_low"] for s in stats], [s["ci_high"] - s["mean"] for s in stats]])
        series.append((algo, label(algo), [s["mean"] for s in stats], err))
    width = 0.8 / len(series)
    x = np.arange(len(cats))
    for k, (key, name, means, err) in enumerate(series):
        ax.bar(
            x + (k - (len(series) - 1) / 2) * width,
            means,
            width,
            yerr=err,
            capsize=3,
            color=COLOURS.get(key),
            label=name,
            error_kw={"lw": 1},
        )
    ax.set_xticks(x, cats, rotation=20)
    ax.set(
        ylabel="evaluation success",
        ylim=(0, 1.0),
        title=f"Success per category ({res['eval_split'] or 'default split'}; whiskers: 95 % CI over seeds)",
    )
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncol=len(series), loc="upper center", bbox_to_anchor=(0.5, -0.12), frameon=False)


def phase_times(res: dict[str, Any], ax: Any) -> None:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    algos = list(res["methods"])
    for row, algo in enumerate(algos):
        left = 0.0
        for k, phase in enumerate(PHASES):
            width = res["methods"][algo]["phase_seconds"][phase]
            ax.barh(row, width, left=left, color=cmap(k), label=phase.replace("_", " ") if row == 0 else None)
            left += width
        ax.text(left, row, f" {left:.2f} s", va="center", fontsize=8)
    ax.set_yticks(range(len(algos)), [label(a) for a in algos])
    ax.invert_yaxis()
    ax.set(xlabel="seconds per iteration", title="Time per iteration by phase (cf. the paper's Fig. 2)")
    ax.legend(ncol=4, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    ax.margins(x=0.12)


def write_plots(res: dict[str, Any], out: str | Path) -> list[Path]:
    """Draw the five figures into ``out`` (PNG + SVG each); return the written paths."""
    plt = _pyplot()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, draw, size, panels in (
        ("learning_curves", learning_curves, (11.0, 4.0), 2),
        ("value_explained_var", value_explained_variance, (7.2, 4.0), 1),
        ("advantage_signal", advantage_signal, (11.0, 4.0), 2),
        ("category_success", category_success, (7.2, 4.0), 1),
        ("phase_times", phase_times, (7.2, 1.2 + 0.5 * len(res["methods"])), 1),
    ):
        fig, ax = plt.subplots(1, panels, figsize=size, sharey=panels > 1)
        try:
            draw(res, ax)
            written += _save(fig, out, name)
        finally:
            plt.close(fig)
    return written
