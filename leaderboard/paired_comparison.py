"""Paired comparison of two submissions on the same (seed, task) pairs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from leaderboard.paired_tests import PairedTest
from sapo_gym.bundle import BundleError

__all__ = ["PairRow", "Comparison", "compare_bundles"]


@dataclass(frozen=True)
class PairRow:
    seed: int
    task_id: str
    task_type: str
    success_a: bool
    success_b: bool
    score_a: float
    score_b: float


@dataclass(frozen=True)
class Comparison:
    rows: list[PairRow]
    """Shared (seed, task) pairs in a stable order."""
    test: PairedTest
    categories: dict[str, PairedTest]
    """The same tests within each task type."""
    only_in_one: int
    """Pairs present in only one of the two bundles (left out of the test)."""


def compare_bundles(a: Mapping[str, Any], b: Mapping[str, Any]) -> Comparison:
    """Pair the episodes of two bundles of the same board; exact McNemar + paired permutation tests."""
    if a["env"]["spec_hash"] != b["env"]["spec_hash"]:
        raise BundleError(
            f"the submissions ran on different boards ({a['env']['id']}:{a['env']['split']} "
            f"{a['env']['spec_hash']} vs {b['env']['id']}:{b['env']['split']} {b['env']['spec_hash']})"
        )
    eps_a = {(e["seed"], e["task_id"]): e for e in a["episodes"]}
    eps_b = {(e["seed"], e["task_id"]): e for e in b["episodes"]}
    shared = sorted(set(eps_a) & set(eps_b))
    if not shared:
        raise BundleError("the submissions share no (seed, task) pair")
    rows = [
        PairRow(
            seed,
            tid,
            eps_a[(seed, tid)]["task_type"],
            eps_a[(seed, tid)]["success"],
            eps_b[(seed, tid)]["success"],
            eps_a[(seed, tid)]["score"],
            eps_b[(seed, tid)]["score"],
        )
        for seed, tid in shared
    ]
    by_type = {t: [r for r in rows if r.task_type == t] for t in sorted({r.task_type for r in rows})}
    return Comparison(rows, _test(rows), {t: _test(rs) for t, rs in by_type.items()}, len(set(eps_a) ^ set(eps_b)))


def _test(rows: list[PairRow]) -> PairedTest:
    return PairedTest.of(
        [r.success_a for r in rows], [r.success_b for r in rows], [r.score_a for r in rows], [r.score_b for r in rows]
    )
