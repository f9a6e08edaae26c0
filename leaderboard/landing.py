"""Whether a bundle from an evaluation about to start can land on a hosted board, said before the first request.

A board (:mod:`leaderboard.boards`) admits ``every-task`` bundles of the whole split whose spec hash is the one
its registered env computes with its defaults; :func:`board_verdict` checks a planned evaluation against the
boards this code hosts the same way (the env built as a board builds it) and says which board, or why none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Verdict", "board_verdict"]


@dataclass(frozen=True)
class Verdict:
    board: str | None
    """``env_id:split`` of the board the bundle lands on, or None."""
    reasons: tuple[str, ...]
    """Why it cannot land (empty when it can)."""

    @property
    def lands(self) -> bool:
        return self.board is not None and not self.reasons

    def describe(self, spec_hash: str) -> str:
        if self.lands:
            return f"board check: the bundle can land on board {self.board} (spec {spec_hash})"
        return "board check: the bundle cannot land on a board: " + "; ".join(self.reasons)


def _hosted_splits(env_id: str) -> tuple[str, ...] | None:
    from leaderboard.boards import EVAL_SPLITS
    from sapo_gym.registration import ENVS

    if env_id not in ENVS:
        return None
    return EVAL_SPLITS.get(env_id, ("",))


def _spec_differences(mine: Mapping[str, Any], board: Mapping[str, Any]) -> list[str]:
    return [
        f"{k} {mine.get(k)!r} (the board's: {board.get(k)!r})"
        for k in sorted(set(mine) | set(board))
        if k != "prompt" and mine.get(k) != board.get(k)
    ]


def board_verdict(
    env_id: str, split: str, spec_fields: Mapping[str, Any], spec_hash: str, mode_name: str, limited: bool
) -> Verdict:
    """Which board a bundle of this evaluation lands on, or why none (``limited``: not every task of the split)."""
    from leaderboard.boards import make_env

    reasons = []
    if mode_name != "every-task":
        reasons.append(f"mode {mode_name}: boards rank every-task bundles only")
    if limited:
        reasons.append("--limit: a board needs every task of the split")
    splits = _hosted_splits(env_id)
    if splits is None or (split not in splits and "" not in splits):
        hosted = ", ".join(s for s in splits or () if s) or "none"
        return Verdict(None, (*reasons, f"no board hosts {env_id} split {split!r} (hosted splits: {hosted})"))
    try:
        env = make_env(env_id, split)
    except Exception as exc:  # a backend or data this machine lacks: say so, do not guess
        return Verdict(None, (*reasons, f"the board env {env_id}:{split} cannot be built here to compare ({exc})"))
    try:
        board_hash, board_fields = env.unwrapped.spec_hash(), env.unwrapped.spec_fields()
    finally:
        env.close()
    key = f"{env_id}:{split}"
    if board_hash != spec_hash:
        diff = _spec_differences(dict(spec_fields), dict(board_fields)) or ["(fields equal, hash differs)"]
        reasons.append(f"spec hash {spec_hash} is not board {key}'s {board_hash}: " + ", ".join(diff))
    return Verdict(key, tuple(reasons))
