"""Who gets a freed live slot: tokens refused while the server was full, first refused first.

A token refused a live run because every slot was taken joins the waiting line (once). While the
line is not empty, a freed slot goes to its head: a token that is not waiting (one whose run just
ended, say) is refused too and queues behind, so a handful of tokens cannot hand the slots around
among themselves by reopening at once. A waiting token keeps its place while it asks again at
least every ``hold_seconds`` (the refusal's ``Retry-After`` is far shorter); one that stops asking
drops out, so a slot waits at most that long for a token that went away.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["Waitlist"]


class Waitlist:
    """The line of refused tokens; not thread-safe (the live manager calls it under its lock)."""

    def __init__(self, hold_seconds: float):
        self.hold_seconds = hold_seconds
        self._seen: OrderedDict[int, float] = OrderedDict()
        """token id -> when it last asked, in the order the tokens were first refused."""

    def _drop_stale(self, now: float) -> None:
        for token_id in [t for t, seen in self._seen.items() if now - seen > self.hold_seconds]:
            del self._seen[token_id]

    def may_open(self, token_id: int, free: int, now: float) -> bool:
        """Whether ``token_id`` may take one of ``free`` slots: only tokens ahead of it in the line come first."""
        self._drop_stale(now)
        ahead = 0
        for waiting in self._seen:
            if waiting == token_id:
                break
            ahead += 1
        return ahead < free

    def refused(self, token_id: int, now: float) -> int:
        """Note a refusal (a newcomer joins the end of the line); its place in the line, from 1."""
        self._seen[token_id] = now  # an existing entry keeps its place
        return list(self._seen).index(token_id) + 1

    def opened(self, token_id: int) -> None:
        self._seen.pop(token_id, None)

    def __len__(self) -> int:
        return len(self._seen)
