"""Cost limits of the submission endpoint: the body's size (also chunked and gzip-inflated), strict
gzip framing, and a per-token rate limit.

* A body with a ``Content-Length`` over the limit is refused before it is read; a chunked one is
  read from the server's de-chunked input up to the limit + 1 byte, so one byte too many is a
  ``413`` (werkzeug's own limited stream stops silently at the limit, which would hand a cut
  body to the parser).
* ``Content-Encoding: gzip``: every member is inflated (RFC 1952 allows several: ``cat a.gz
  b.gz`` is valid), each must end with its CRC and length trailer, and nothing else may follow
  the last member; the inflated total is bounded by the same limit.
* :class:`RateLimiter`: a token bucket per API token, charged per request and per MiB received,
  so a submitter cannot spend the server's CPU faster than the configured rate.
"""

from __future__ import annotations

import math
import threading
import time
import zlib
from dataclasses import dataclass, field

from flask import abort, request

from leaderboard.bundle import BundleError

__all__ = ["read_body", "gunzip_strict", "RateLimiter", "RateLimited"]

_GZIP_MAGIC = b"\x1f\x8b"
_READ_CHUNK = 1 << 16


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


def read_body(limit: int) -> bytes:
    """The raw request body, at most ``limit`` bytes (``413`` beyond, with or without a length)."""
    length = request.content_length
    if length is not None:
        if length > limit:
            abort(413)
        return request.get_data(cache=False)
    if "wsgi.input_terminated" not in request.environ:
        return b""  # neither a length nor a terminated stream: nothing can be read safely
    return _read_chunked(limit)


def gunzip_strict(data: bytes, limit: int) -> bytes:
    """Inflate every gzip member of ``data``; 400 on bad framing, 413 past ``limit`` bytes."""
    out, total, rest, member = [], 0, data, 0
    if not rest:
        raise BundleError("body is not valid gzip: it is empty", status=400)
    while rest:
        if rest[:2] != _GZIP_MAGIC:
            raise BundleError(f"body is not valid gzip: {len(rest)} bytes of trailing data after member {member}"
                              if member else "body is not valid gzip: no gzip header", status=400)
        inflater = zlib.decompressobj(wbits=31)
        try:
            chunk = inflater.decompress(rest, limit + 1 - total)
        except zlib.error as exc:
            raise BundleError(f"body is not valid gzip: {exc}", status=400) from None
        total += len(chunk)
        out.append(chunk)
        if total > limit or inflater.unconsumed_tail:
            abort(413)
        if not inflater.eof:
            raise BundleError(f"body is not valid gzip: member {member + 1} is truncated (no CRC and length trailer)", status=400)
        rest, member = inflater.unused_data, member + 1
    return b"".join(out)


class RateLimited(Exception):
    def __init__(self, retry_after: float):
        super().__init__(f"rate limit exceeded: retry in {retry_after:.0f} s")
        self.retry_after = retry_after


@dataclass
class _Bucket:
    level: float
    stamp: float


@dataclass
class RateLimiter:
    """Token buckets per API token: ``burst`` units at most, refilled at ``per_minute`` units a minute.

    A request costs 1 unit plus 1 per MiB of (inflated) body, so 200 small submissions in a burst
    pass while a stream of 64 MiB bundles is slowed to a few a minute. ``per_minute <= 0`` disables it.
    """

    per_minute: float = 60.0
    burst: float = 300.0
    _buckets: dict[int, _Bucket] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def charge(self, key: int, units: float, now: float | None = None) -> None:
        """Take ``units`` from ``key``'s bucket or raise :class:`RateLimited` (nothing is taken then)."""
        if self.per_minute <= 0:
            return
        now = time.monotonic() if now is None else now
        rate = self.per_minute / 60.0
        with self._lock:
            bucket = self._buckets.setdefault(key, _Bucket(self.burst, now))
            bucket.level = min(self.burst, bucket.level + (now - bucket.stamp) * rate)
            bucket.stamp = now
            if bucket.level < units:
                raise RateLimited(math.ceil((units - bucket.level) / rate))
            bucket.level -= units

    @staticmethod
    def cost(body_bytes: int) -> float:
        return 1.0 + body_bytes / float(1 << 20)


def request_handler(timeout: float) -> type:
    """werkzeug's request handler with a socket timeout: a client that stalls (slowloris, a dead
    link) for ``timeout`` seconds on a read or write is disconnected instead of holding a thread."""
    from werkzeug.serving import WSGIRequestHandler

    return type("TimeoutRequestHandler", (WSGIRequestHandler,), {"timeout": float(timeout)})
