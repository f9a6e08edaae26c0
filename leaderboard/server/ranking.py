"""Ranks: only verified submissions have one, counted over every verified row of their board.

A rank is the row's position by success, then score, then id (the earlier submission first) among
all verified submissions of the same spec hash, computed by the database with a window function,
so it is the same whichever rows a page or an API call happens to load or however it is sorted.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import func, select

from leaderboard.server.db import Submission

__all__ = ["STATUS_FILTERS", "ranks", "parse_status_filter"]

STATUS_FILTERS = {
    "ranked": ("verified", "pending", "verifying"),
    "all": ("verified", "pending", "verifying", "failed"),
    "verified": ("verified",),
    "pending": ("pending", "verifying"),
    "failed": ("failed",),
}
"""``?status=`` values of the API's list; the default ``ranked`` leaves failed submissions out."""


def parse_status_filter(value: str | None) -> tuple[str, ...] | None:
    """The statuses a ``?status=`` value selects, or None for an unknown value."""
    return STATUS_FILTERS.get(value or "ranked")


def ranks(store: object, ids: Iterable[int]) -> dict[int, int]:
    """``{id: rank}`` for the verified submissions among ``ids`` (unverified ones have no rank)."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    position = func.row_number().over(
        partition_by=Submission.spec_hash, order_by=(Submission.success.desc(), Submission.score.desc(), Submission.id)
    )
    board_of = select(Submission.spec_hash).where(Submission.id.in_(wanted)).distinct()
    ranked = (
        select(Submission.id.label("id"), position.label("rank"))
        .where(Submission.status == "verified", Submission.spec_hash.in_(board_of))
        .subquery()
    )
    query = select(ranked.c.id, ranked.c.rank).where(ranked.c.id.in_(wanted))
    with store.session() as s:  # type: ignore[attr-defined]
        return {int(i): int(r) for i, r in s.execute(query)}
