"""Cost limits of the request bodies: their size (also chunked and gzip-inflated), the time to read
them, strict gzip framing, and a per-token rate limit.

* A body with a ``Content-Length`` over the limit is refused before it is read; a chunked one is
  read from the server's de-chunked input up to the limit + 1 byte, so one byte too many is a
  ``413`` (werkzeug's own limited stream stops silently at the limit, which would hand a cut
  body to the parser).
* ``Content-Encoding: gzip``: every member is inflated (RFC 1952 allows several: ``cat a.gz
  b.gz`` is valid), each must end with its CRC and length trailer, and nothing else may follow
  the last member; the inflated total is bounded by the same limit, the members by
  :data:`MAX_GZIP_MEMBERS`, and inflating costs time linear in the body (many tiny members included).
* A body must arrive within a deadline (``body_seconds``, from when the request's headers are in):
  on ``sapo-gym leaderboard serve`` (werkzeug's server) every receive from the connection waits at
  most until then, and past it the body ends and the request is a ``408`` — the per-read socket
  timeout alone let a client drip a byte every few seconds forever. It holds for ``Content-Length``
  and chunked bodies and every endpoint (the live ones included), and for the unread rest of a body
  the server drains after answering. (Behind another WSGI server, that server's own limits apply.)
  :func:`read_body` reads a request's body once; a second call gets the same bytes.
* :class:`RateLimiter`: a token bucket per API token, charged per request and per MiB received,
  so a submitter cannot spend the server's CPU faster than the configured rate; the buckets are rows of
  the database, shared by every server process.
"""

from __future__ import annotations

import math
import socket
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, abort, request
from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from werkzeug.exceptions import HTTPException

from leaderboard.bundle import BundleError
from leaderboard.server.db import RateBucket

__all__ = ["read_body", "install_body_deadline", "body_seconds", "gunzip_strict", "MAX_GZIP_MEMBERS", "RateLimiter", "RateLimited"]

_GZIP_MAGIC = b"\x1f\x8b"
_READ_CHUNK = 1 << 16
_GUARD, _BODY = "sapo_gym.body_guard", "sapo_gym.body"
MIN_RATE = 1 << 20
"""Bytes a second the default body deadline allows for (1 MiB/s, 8 Mbit/s): see :func:`body_seconds`."""


def body_seconds(max_upload_bytes: int) -> float:
    """The default body deadline: 10 s, plus the largest upload at :data:`MIN_RATE` (74 s for 64 MiB)."""
    return 10.0 + max_upload_bytes / MIN_RATE


class _DeadlineSocket:
    """The connection's socket as a reader sees it: a receive waits at most until the deadline (or the server's
    per-read timeout, if sooner, which raises as before). Past the deadline the stream ends (the body's reader
    stops, and read_body answers 408), or with ``raise_at_deadline`` the read times out (werkzeug then drops
    the connection, as it does for a stalled one: the request line and headers)."""

    def __init__(self, sock: socket.socket, deadline: float, raise_at_deadline: bool = False):
        self._sock, self.deadline, self.expired, self.raise_at_deadline = sock, deadline, False, raise_at_deadline

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        remaining = self.deadline - time.monotonic()
        if remaining > 0 and not self.expired:
            timeout = self._sock.gettimeout()
            self._sock.settimeout(remaining if timeout is None else min(timeout, remaining))
            try:
                return self._sock.recv_into(buffer, nbytes, flags)
            except TimeoutError:
                if timeout is not None and timeout < remaining:
                    raise  # the per-read timeout came first
            finally:
                self._sock.settimeout(timeout)
        self.expired = True
        if self.raise_at_deadline:
            raise TimeoutError("the deadline passed")
        return 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def install_body_deadline(app: Flask, seconds: float) -> None:
    """Give every request on werkzeug's server ``seconds`` to deliver its body (see the module docstring)."""
    app.config["SAPO_BODY_SECONDS"] = float(seconds)

    @app.before_request
    def _guard() -> None:
        env = request.environ
        sock, stream = env.get("werkzeug.socket"), env.get("wsgi.input")
        raw = getattr(getattr(stream, "_rfile", stream), "raw", None)  # the de-chunker reads the connection's file too
        if sock is not None and isinstance(raw, socket.SocketIO) and getattr(raw, "_sock", None) is sock:
            # left in place after the request: werkzeug drains an unread body through it after answering
            raw._sock = env[_GUARD] = _DeadlineSocket(sock, time.monotonic() + float(seconds))


def _expired() -> bool:
    guard = request.environ.get(_GUARD)
    return guard is not None and guard.expired


def _timed_out() -> None:
    from flask import current_app

    abort(408, f"the request body did not arrive within {current_app.config.get('SAPO_BODY_SECONDS', 0):g} s "
               "(the server's limit on the time to send a body)")


def _read_chunked(limit: int) -> bytes:
    stream = request.environ["wsgi.input"]  # de-chunked by the server (wsgi.input_terminated)
    chunks, total = [], 0
    while True:
        try:
            chunk = stream.read(min(_READ_CHUNK, limit + 1 - total))
        except (OSError, ValueError):  # werkzeug's de-chunking: a bad chunk size, or a body cut mid-chunk
            abort(400, "malformed chunked body (Transfer-Encoding: chunked)")
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            abort(413)


def _read(limit: int) -> bytes:
    length = request.content_length
    if length is not None:
        if length > limit:
            abort(413)
        return request.get_data(cache=False)
    if "wsgi.input_terminated" not in request.environ:
        return b""  # neither a length nor a terminated stream: nothing can be read safely
    return _read_chunked(limit)


def read_body(limit: int) -> bytes:
    """The raw request body, at most ``limit`` bytes (``413`` beyond, with or without a length; ``408``
    past the body deadline). Read once: a later call (another limit) gets the same bytes."""
    data = request.environ.get(_BODY)
    if data is None:
        try:
            data = _read(limit)
        except HTTPException:  # a body cut short (400) by the deadline is a 408
            if _expired():
                _timed_out()
            raise
        if _expired():
            _timed_out()
        request.environ[_BODY] = data
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
            raise BundleError(f"body is not valid gzip: member {member + 1} is truncated (no CRC and length trailer)", status=400)
        end = min(pos + window, len(view))
        try:
            chunk = inflater.decompress(view[pos:end], allowed + 1)
        except zlib.error as exc:
            raise BundleError(f"body is not valid gzip: {exc}", status=400) from None
        out.append(chunk)
        allowed -= len(chunk)
        if allowed < 0 or inflater.unconsumed_tail:
            abort(413)
        pos, window = end - len(inflater.unused_data), min(window * 2, _READ_CHUNK)
    return b"".join(out), pos


def gunzip_strict(data: bytes, limit: int, max_members: int = MAX_GZIP_MEMBERS) -> bytes:
    """Inflate every gzip member of ``data``; 400 on bad framing or past ``max_members`` members, 413 past ``limit``
    bytes. Time and memory are linear in ``len(data)`` and ``limit``, whatever the members' number and sizes."""
    if not data:
        raise BundleError("body is not valid gzip: it is empty", status=400)
    view, out, total, pos, member = memoryview(data), [], 0, 0, 0
    while pos < len(view):
        if view[pos:pos + 2] != _GZIP_MAGIC:
            raise BundleError(f"body is not valid gzip: {len(view) - pos} bytes of trailing data after member {member}"
                              if member else "body is not valid gzip: no gzip header", status=400)
        if member >= max_members:
            raise BundleError(f"body is not valid gzip for this server: more than {max_members} gzip members "
                              "(compress the bundle as one stream)", status=400)
        chunk, pos = _inflate_member(view, pos, limit - total, member)
        total, member = total + len(chunk), member + 1
        out.append(chunk)
    return b"".join(out)


class RateLimited(Exception):
    def __init__(self, retry_after: float):
        super().__init__(f"rate limit exceeded: retry in {retry_after:.0f} s")
        self.retry_after = retry_after


def _take(level: float, stamp: float, now: float, units: float, rate: float, burst: float) -> tuple[float, RateLimited | None]:
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
            level, refused = _take(*self._buckets.get(key, (self.burst, now)), now, units, self.per_minute / 60.0,
                                   self.burst)
            self._buckets[key] = (level, now)
        if refused is not None:
            raise refused

    def _charge_db(self, key: int, units: float, now: float) -> None:
        engine = getattr(self.store, "engine", self.store)
        insert = pg_insert if engine.dialect.name == "postgresql" else sqlite_insert  # the two databases served
        with engine.begin() as conn:
            # inserted first (a no-op when present), so two processes cannot both create it; then locked
            conn.execute(insert(RateBucket).values(key=key, level=self.burst, stamp=now).on_conflict_do_nothing())
            row = conn.execute(select(RateBucket.level, RateBucket.stamp).where(RateBucket.key == key)
                               .with_for_update()).one()
            level, refused = _take(row.level, row.stamp, now, units, self.per_minute / 60.0, self.burst)
            conn.execute(update(RateBucket).where(RateBucket.key == key).values(level=level, stamp=now))
        if refused is not None:
            raise refused

    @staticmethod
    def cost(body_bytes: int) -> float:
        return 1.0 + body_bytes / float(1 << 20)


def request_handler(timeout: float, header_timeout: float | None = None) -> type:
    """werkzeug's request handler with a socket timeout: a client that stalls (slowloris, a dead
    link) for ``timeout`` seconds on a read or write is disconnected instead of holding a thread; and,
    with ``header_timeout``, a deadline on each request's line and headers *in all* (a client that sends
    a header byte every few seconds never stalls a read, but holds its thread no longer than that; an idle
    keep-alive connection is closed after it too). The body has its own deadline (:func:`install_body_deadline`)."""
    from werkzeug.serving import WSGIRequestHandler

    class TimeoutRequestHandler(WSGIRequestHandler):
        def handle_one_request(self) -> None:
            mark = getattr(self.server, "mark_waiting", None)  # a draining BoundedServer takes no further request
            if mark is not None and not mark(self.connection, True):
                self.close_connection = True
                return
            raw = getattr(self.rfile, "raw", None)
            guarded = header_timeout is not None and header_timeout > 0 and isinstance(raw, socket.SocketIO)
            if guarded:
                raw._sock = _DeadlineSocket(self.connection, time.monotonic() + float(header_timeout), raise_at_deadline=True)  # type: ignore[union-attr]
            super().handle_one_request()

        def parse_request(self) -> bool:
            ok = super().parse_request()  # the headers are read: the body's reader sees the plain socket again
            raw = getattr(self.rfile, "raw", None)
            if isinstance(getattr(raw, "_sock", None), _DeadlineSocket):
                raw._sock = self.connection  # type: ignore[union-attr]
            mark = getattr(self.server, "mark_waiting", None)
            if mark is not None:
                mark(self.connection, False)
            return ok

    TimeoutRequestHandler.timeout = float(timeout)
    return TimeoutRequestHandler
