"""Cheap checks that run before the full JSON Schema validation, so a costly bundle is refused early.

Validating the schema costs ~0.1 ms per turn (82 s for 64 MiB of tiny turns); these checks cost
microseconds per episode:

* :func:`prescan` counts the ``"output"`` and ``"initial_observation"`` keys in the raw bytes
  (tens of milliseconds for 64 MiB) and refuses a body that holds more turns or episodes than a
  bundle may, before it is parsed (parsing 64 MiB of tiny turns costs seconds and ~0.5 GiB);
* :func:`check_structure` then checks the parsed shape against the board: there are no more episodes
  than seeds x tasks, no episode has more turns than the board's horizon, and the totals stay under
  :data:`MAX_EPISODES` and :data:`MAX_TURNS` (the authoritative count: a key written with
  escapes, which the byte count misses, is counted here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leaderboard.boards import Board, BoardRegistry
from sapo_gym.bundle import BundleError

__all__ = ["MAX_EPISODES", "MAX_TURNS", "prescan", "check_structure"]

MAX_EPISODES = 40_000
"""Most episodes in one bundle (the largest board, WebShop's 500 tasks, times 64 seeds, fits)."""
MAX_TURNS = 250_000
"""Most turns in one bundle, all episodes together."""
_SLACK = 1_000  # other keys may be spelled the same (an aggregates category named "output")


def prescan(data: bytes) -> None:
    """Refuse (413) raw bundle bytes that name more turns or episodes than a bundle may hold."""
    turns = data.count(b'"output"')
    if turns > MAX_TURNS + _SLACK:
        raise BundleError(f"bundle too large: about {turns:,} turns, at most {MAX_TURNS:,} are accepted", status=413)
    episodes = data.count(b'"initial_observation"')
    if episodes > MAX_EPISODES + _SLACK:
        raise BundleError(
            f"bundle too large: about {episodes:,} episodes, at most {MAX_EPISODES:,} are accepted", status=413
        )


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []  # a wrong type is the schema's to report, with its path


def _board(bundle: Mapping[str, Any], boards: BoardRegistry) -> Board | None:
    env = bundle.get("env")
    spec_hash = env.get("spec_hash") if isinstance(env, dict) else None
    return boards.get(spec_hash) if isinstance(spec_hash, str) else None


def check_structure(bundle: Mapping[str, Any], boards: BoardRegistry) -> None:
    """Counts and shape before the schema: 413 past the caps, 422 for a count the board rules out."""
    episodes = _list(bundle.get("episodes"))
    if len(episodes) > MAX_EPISODES:
        raise BundleError(
            f"bundle too large: {len(episodes):,} episodes, at most {MAX_EPISODES:,} are accepted", status=413
        )
    board = _board(bundle, boards)
    horizon = board.spec_fields.get("horizon") if board is not None else None
    evaluation = bundle.get("evaluation")
    seeds = evaluation.get("seeds") if isinstance(evaluation, dict) else None
    if board is not None and isinstance(seeds, list) and len(episodes) > len(seeds) * len(board.task_ids):
        raise BundleError(
            f"{len(episodes)} episodes, more than the {len(seeds)} seed(s) x {len(board.task_ids)} tasks of "
            f"board {board.key}: a bundle covers the split once per seed"
        )
    total = 0
    for i, ep in enumerate(episodes):
        turns = _list(ep.get("turns") if isinstance(ep, dict) else None)
        total += len(turns)
        if isinstance(horizon, int) and len(turns) > horizon:
            raise BundleError(
                f"episodes[{i}]: {len(turns)} turns, but board {board.key} ends every episode "  # type: ignore[union-attr]
                f"by step {horizon}"
            )
        if total > MAX_TURNS:
            raise BundleError(f"bundle too large: more than {MAX_TURNS:,} turns", status=413)
