"""Admission of a bundle to a board: everything checked before a submission is stored.

:func:`sapo_gym.bundle.check_bundle` (strict schema, consistency, recomputed aggregates), then
against the hosted boards: the spec hash is known, the env fields are exactly the board's, and
for every seed the split's task ids are all present, once each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from leaderboard.boards import Board, BoardRegistry
from leaderboard.precheck import check_structure
from sapo_gym.bundle import BundleError, check_bundle, evaluation_mode_name

__all__ = ["admit"]


def _check_env(bundle: Mapping[str, Any], boards: BoardRegistry) -> Board:
    env = bundle["env"]
    board = boards.get(env["spec_hash"])
    if board is None:
        hosted = ", ".join(f"{b.key}={b.spec_hash}" for b in boards) or "none"
        raise BundleError(
            f"unknown spec hash {env['spec_hash']!r} for {env['id']}:{env['split']}; this server hosts {hosted}"
        )
    for key in ("id", "version", "revision", "protocol", "horizon", "split", "dataset", "backend"):
        if env.get(key) != board.spec_fields.get(key):
            raise BundleError(
                f"env.{key} = {env.get(key)!r} does not match spec hash {board.spec_hash} "
                f"({board.spec_fields.get(key)!r})"
            )
    return board


def _check_tasks(bundle: Mapping[str, Any], board: Board) -> None:
    expected = set(board.task_ids)
    for seed in bundle["evaluation"]["seeds"]:
        counts = Counter(ep["task_id"] for ep in bundle["episodes"] if ep["seed"] == seed)
        dups = sorted(t for t, c in counts.items() if c > 1)
        if dups:
            raise BundleError(f"seed {seed}: duplicated task ids {dups[:5]}{' ...' if len(dups) > 5 else ''}")
        unknown = sorted(set(counts) - expected)
        if unknown:
            raise BundleError(
                f"seed {seed}: task ids not in split {board.split!r}: {unknown[:5]}{' ...' if len(unknown) > 5 else ''}"
            )
        missing = sorted(expected - set(counts))
        if missing:
            raise BundleError(
                f"seed {seed}: {len(missing)} of the {len(expected)} tasks of split {board.split!r} are missing, "
                f"e.g. {missing[:5]}; a submission must cover the whole split"
            )


def _check_task_types(bundle: Mapping[str, Any], board: Board) -> None:
    if not board.task_types:
        return
    for i, ep in enumerate(bundle["episodes"]):
        expected = board.task_types.get(ep["task_id"])
        if expected is not None and ep["task_type"] != expected:
            kinds = sorted(set(board.task_types.values()))
            raise BundleError(
                f"episodes[{i}]: task_type {ep['task_type']!r} is not the type of task {ep['task_id']!r} "
                f"on board {board.key} ({expected!r}; the board's task types: {kinds[:20]})"
            )


def admit(bundle: Mapping[str, Any], boards: BoardRegistry) -> Board:
    """Run every pre-storage check; return the bundle's board or raise :class:`BundleError`."""
    check_structure(bundle, boards)  # counts first: cheap, and it bounds what the schema validation costs
    check_bundle(bundle)
    mode = evaluation_mode_name(bundle)
    if mode != "every-task":
        raise BundleError(
            f"evaluation.mode is {mode!r}: boards rank every-task evaluations only (every task of the split "
            "once per seed); a sampled evaluation is a number for a paper's table, not for a board"
        )
    board = _check_env(bundle, boards)
    _check_tasks(bundle, board)
    _check_task_types(bundle, board)
    return board
