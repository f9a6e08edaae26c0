"""Who gets a freed live slot: tokens refused while the server was full, first refused first.

A token refused a live run because every slot was taken joins the waiting line (once). While the
line is not empty, a freed slot goes to its head: a token that is not waiting (one whose run just
ended, say) is refused too and queues behind, so a handful of tokens cannot hand the slots around
among themselves by reopening at once. A waiting token keeps its place while it asks again at
least every ``hold_seconds`` (the refusal's ``Retry-After`` is far shorter); one that stops asking
drops out, so a slot waits at most that long for a token that went away.

The line is the ``live_waitlist`` table, so every server process sees one line. Its functions run
inside the live manager's start transaction, which holds the start lock (no two starts interleave).
"""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from leaderboard.server.db import LiveWaiting

__all__ = ["may_open", "refused", "opened"]


def _line(s: Session, now: float, hold_seconds: float) -> list[int]:
    """The waiting tokens in order, after dropping those that stopped asking."""
    s.execute(delete(LiveWaiting).where(LiveWaiting.last_seen < now - hold_seconds))
    return list(s.scalars(select(LiveWaiting.token_id).order_by(LiveWaiting.first_refused, LiveWaiting.token_id)))


def may_open(s: Session, token_id: int, free: int, now: float, hold_seconds: float) -> bool:
    """Whether ``token_id`` may take one of ``free`` slots: only tokens ahead of it in the line come first."""
    line = _line(s, now, hold_seconds)
    ahead = line.index(token_id) if token_id in line else len(line)
    return ahead < free


def refused(s: Session, token_id: int, now: float, hold_seconds: float) -> int:
    """Note a refusal (a newcomer joins the end of the line; a waiting token keeps its place); its place, from 1."""
    row = s.get(LiveWaiting, token_id)
    if row is None:
        s.add(LiveWaiting(token_id=token_id, first_refused=now, last_seen=now))
    else:
        row.last_seen = now
    s.flush()
    return _line(s, now, hold_seconds).index(token_id) + 1


def opened(s: Session, token_id: int) -> None:
    """The token opened a run: it leaves the line."""
    s.execute(delete(LiveWaiting).where(LiveWaiting.token_id == token_id))
