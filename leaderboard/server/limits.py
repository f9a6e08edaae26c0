"""Cost limits of the request bodies: their size (also gzip-inflated), strict gzip framing, and a per-token rate
limit.

* :func:`read_body`: a body over the limit is a ``413`` (one with a ``Content-Length`` over it is not read). It reads
  a request's body once; a second call gets the same bytes. The time a body takes to arrive, and how many
  connections a client holds, are nginx's to bound (``sapo_cli/deploy/nginx.conf``): the app sees a request only
  once its whole body is in.
* ``Content-Encoding: gzip``: every member is inflated (RFC 1952 allows several: ``cat a.gz
  b.gz`` is valid), each must end with its CRC and length trailer, and nothing else may follow
  the last member; the inflated total is bounded by the same limit, the members by
  :data:`MAX_GZIP_MEMBERS`, and inflating costs time linear in the body (many tiny members included).
* :class:`RateLimiter`: a token bucket per API token, charged per request and per MiB received,
  so a submitter cannot spend the server's CPU faster than the configured rate; the buckets are rows of
  the database, shared by every server process.
"""

from __future__ import annotations

import math
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from flask import abort, request
from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from leaderboard.server.db import RateBucket
from sapo_gym.bundle import BundleError

__all__ = ["read_body", "gunzip_strict", "MAX_GZIP_MEMBERS", "RateLimiter", "RateLimited"]

_GZIP_MAGIC = b"\x1f\x8b"
_INFLATE_WINDOW = 1 << 16
_BODY = "sapo_gym.body"


def read_body(limit: int) -> bytes:
    """The raw request body, at most ``limit`` bytes (``413`` beyond: a ``Content-Length`` over it is refused unread;
    a chunked body past the app's ``MAX_CONTENT_LENGTH`` is werkzeug's 413, one under it but over ``limit`` is read
    and refused). Read once: a later call (another limit) gets the same bytes."""
    data = request.environ.get(_BODY)
    if data is None:
        if request.content_length is not None and request.content_length > limit:
            abort(413)
        data = request.environ[_BODY] = request.get_data(cache=False)
    if len(data) > limit:
        abort(413)
    return data


MAX_GZIP_MEMBERS = 64
"""gzip members a body may hold (``cat a.gz b.gz`` makes two; thousands of empty ones only cost the server)."""
_FIRST_WINDOW = 64
"""Input bytes first given to a member's inflater; doubled while the member goes on (see :func:`gunzip_strict`)."""


def _inflate_member(view: memoryview, pos: int, allowed: int, member: int) -> tuple[bytes, int]:
    """Inflate the member at ``view[pos:]``: (its output, where the next member starts). Its input is fed in windows
    that double from :data:`_FIRST_WINDOW` up to 64 KiB, so the bytes read past its end (copied into
    ``unused_data``) are at most about its own size: every member costs time linear in its length."""
    inflater, out, window = zlib.decompressobj(wbits=31), [], _FIRST_WINDOW
    while not inflater.eof:
        if pos >= len(view):
            raise BundleError(
                f"body is not valid gzip: member {member + 1} is truncated (no CRC and length trailer)", status=400
            )
        end = min(pos + window, len(view))
        try:
            chunk = inflater.decompress(view[pos:end], allowed + 1)
        except zlib.error as exc:
            raise BundleError(f"body is not valid gzip: {exc}", status=400) from None
        out.append(chunk)
        allowed -= len(chunk)
        if allowed < 0 or inflater.unconsumed_tail:
            abort(413)
        pos, window = end - len(inflater.unused_data), min(window * 2, _INFLATE_WINDOW)
    return b"".join(out), pos


def gunzip_strict(data: bytes, limit: int, max_members: int = MAX_GZIP_MEMBERS) -> bytes:
    """Inflate every gzip member of ``data``; 400 on bad framing or past ``max_members`` members, 413 past ``limit``
    bytes. Time and memory are linear in ``len(data)`` and ``limit``, whatever the members' number and sizes."""
    if not data:
        raise BundleError("body is not valid gzip: it is empty", status=400)
    view, out, total, pos, member = memoryview(data), [], 0, 0, 0
    while pos < len(view):
        if view[pos : pos + 2] != _GZIP_MAGIC:
            raise BundleError(
                f"body is not valid gzip: {len(view) - pos} bytes of trailing data after member {member}"
                if member
                else "body is not valid gzip: no gzip header",
                status=400,
            )
        if member >= max_members:
            raise BundleError(
                f"body is not valid gzip for this server: more than {max_members} gzip members "
                "(compress the bundle as one stream)",
                status=400,
            )
        chunk, pos = _inflate_member(view, pos, limit - total, member)
        total, member = total + len(chunk), member + 1
        out.append(chunk)
    return b"".join(out)


class RateLimited(Exception):
    def __init__(self, retry_after: float):
        super().__init__(f"rate limit exceeded: retry in {retry_after:.0f} s")
        self.retry_after = retry_after


def _take(
    level: float, stamp: float, now: float, units: float, rate: float, burst: float
) -> tuple[float, RateLimited | None]:
    """A bucket charged ``units`` at ``now``: its new level (refilled at ``rate`` units a second since ``stamp``, capped
    at ``burst``, less ``units`` when it holds that many) and the refusal when it does not (nothing taken then). The
    caller stores the level stamped ``now`` either way. A clock that went back refills nothing: wall clocks step."""
    level = min(burst, level + max(0.0, now - stamp) * rate)
    if level < units:
        return level, RateLimited(math.ceil((units - level) / rate))
    return level - units, None


@dataclass
class RateLimiter:
    """Token buckets per API token: ``burst`` units at most, refilled at ``per_minute`` units a minute.

    A request costs 1 unit plus 1 per MiB of (inflated) body, so 200 small submissions in a burst
    pass while a stream of 64 MiB bundles is slowed to a few a minute. ``per_minute <= 0`` disables it.

    With a ``store`` (or its engine) the buckets are rows of ``rate_buckets`` (:class:`leaderboard.server.db.RateBucket`),
    so every server process on the database (``serve --workers N``, several hosts) charges the same bucket; each
    charge is one transaction that locks the row (PostgreSQL: ``SELECT ... FOR UPDATE``; SQLite: the engine's
    ``BEGIN IMMEDIATE`` locks the database). Their clock is the wall clock (``time.time()``). Without a store they
    live in this process's memory, on the monotonic clock.
    """

    per_minute: float = 60.0
    burst: float = 300.0
    store: Any = None
    """A :class:`leaderboard.server.store.Store` or an SQLAlchemy engine; None: buckets in memory."""
    _buckets: dict[int, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def charge(self, key: int, units: float, now: float | None = None) -> None:
        """Take ``units`` from ``key``'s bucket or raise :class:`RateLimited` (nothing is taken then)."""
        if self.per_minute <= 0:
            return
        if self.store is not None:
            self._charge_db(key, units, time.time() if now is None else now)
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            level, refused = _take(
                *self._buckets.get(key, (self.burst, now)), now, units, self.per_minute / 60.0, self.burst
            )
            self._buckets[key] = (level, now)
        if refused is not None:
            raise refused

    def _charge_db(self, key: int, units: float, now: float) -> None:
        engine = getattr(self.store, "engine", self.store)
        insert = pg_insert if engine.dialect.name == "postgresql" else sqlite_insert  # the two databases served
        with engine.begin() as conn:
            # inserted first (a no-op when present), so two processes cannot both create it; then locked
            conn.execute(insert(RateBucket).values(key=key, level=self.burst, stamp=now).on_conflict_do_nothing())
            row = conn.execute(
                select(RateBucket.level, RateBucket.stamp).where(RateBucket.key == key).with_for_update()
            ).one()
            level, refused = _take(row.level, row.stamp, now, units, self.per_minute / 60.0, self.burst)
            conn.execute(update(RateBucket).where(RateBucket.key == key).values(level=level, stamp=now))
        if refused is not None:
            raise refused

    @staticmethod
    def cost(body_bytes: int) -> float:
        return 1.0 + body_bytes / float(1 << 20)
