"""``sapo-gym compare``: methods (SAPO, PPO and GRPO by default; ``--algos``) under identical settings and budget,
with seeds and intervals.

:func:`compare` runs everything (a shared warm start, then methods × seeds, resumable), writes
``results.md`` / ``results.json`` (:mod:`trainers.compare.report`), the figures
(:mod:`trainers.compare.plots`) and one leaderboard bundle per method/seed. See ``docs/compare.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainers.compare.config import PRESETS, CompareConfig, Preset

__all__ = ["PRESETS", "CompareConfig", "Preset", "compare"]


def compare(cfg: CompareConfig) -> dict[str, Any]:
    """Run (or continue) the comparison in ``cfg.out`` and write its report and plots; return results.json's dict."""
    from trainers.compare.plots import write_plots
    from trainers.compare.report import write_report
    from trainers.compare.runner import run_compare

    start, runs, complete = run_compare(cfg)
    res = write_report(cfg, start, runs, complete)
    if runs:
        write_plots(res, Path(cfg.out) / "plots")
    return res
