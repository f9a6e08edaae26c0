"""One bounded HTTP POST to a model server: the configured URL only, a wall-clock deadline, a cap on the body.

:func:`bounded_post` is how :class:`agents.openai_agent.OpenAIChatAgent` talks to its server:

* **No redirect is followed.** The request goes through the session's transport adapter directly (requests'
  redirect handling, which would re-send the body and headers to another origin and read a redirect's whole
  body first, is never entered); a 3xx comes back as it is and the agent refuses it. The prompts, the API key
  and every ``--header`` go to the configured URL and nowhere else.
* **A deadline for the whole request** (``timeout`` seconds, not per read): a watchdog timer shuts down the
  sockets the request uses when it passes, so a server that drips a byte every few seconds, in its headers or
  its body, ends the request at the deadline with :class:`DeadlineExceeded` (a ``requests.Timeout``: retried
  as timeouts are).
* **A cap on the decoded body** (``max_bytes``): the body is read in chunks and counted after decompression
  (gzip and deflate are decoded here, at most ``max_bytes + 1`` bytes of output per step; another
  ``Content-Encoding`` is refused), so an endless stream or a compression bomb ends with
  :class:`ResponseTooLarge` once ``max_bytes`` is passed, holding no more than that in memory (the bytes on
  the wire are capped too, at twice that).
"""

from __future__ import annotations

import socket
import threading
import zlib
from collections.abc import Mapping
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ReadTimeoutError

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "DeadlineExceeded", "ResponseTooLarge", "BoundedAdapter", "bounded_post"]

DEFAULT_MAX_RESPONSE_BYTES = 8 << 20
"""The largest decoded body accepted from a model server (a reply is cut at 65,536 characters anyway)."""
ACCEPT_ENCODING = "gzip, deflate"
"""The encodings asked for, and the only ones decoded."""
_CHUNK = 64 << 10
_local = threading.local()


class DeadlineExceeded(requests.Timeout):
    """The request took longer than its deadline, however the time was spent (connecting, headers, body)."""


class ResponseTooLarge(RuntimeError):
    """The server's decoded body passed the cap: an endless stream or a compression bomb."""


class _Watch:
    """The connections one request uses; when its deadline passes, their sockets are shut down (a blocked read returns)."""

    def __init__(self, seconds: float):
        self.expired = self._over = False
        self._conns: list[Any] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, seconds), self._expire)
        self._timer.daemon = True

    def add(self, conn: Any) -> None:
        with self._lock:
            self._conns.append(conn)
            shut = self.expired and not self._over
        if shut:
            _shut(conn)

    def _expire(self) -> None:
        with self._lock:
            if self._over:
                return
            self.expired = True
            conns = list(self._conns)
        for conn in conns:
            _shut(conn)

    def __enter__(self) -> _Watch:
        _local.watch = self
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            self._over = True
        self._timer.cancel()
        _local.watch = None


def _shut(conn: Any) -> None:
    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError, ValueError):
            pass


def _register(conn: Any) -> None:
    watch = getattr(_local, "watch", None)
    if watch is not None:
        watch.add(conn)


class _Watched:
    """Registers its connection with the request's watchdog when it connects and when it sends."""

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        _register(self)

    def request(self, *args: Any, **kwargs: Any) -> None:
        _register(self)
        super().request(*args, **kwargs)  # type: ignore[misc]


class _WatchedHTTP(_Watched, HTTPConnection):
    pass


class _WatchedHTTPS(_Watched, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTP


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPS


_POOLS = {"http": _HTTPPool, "https": _HTTPSPool}


class BoundedAdapter(HTTPAdapter):
    """requests' adapter whose connections a request's deadline can cut (direct and through a proxy)."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **kwargs)
        manager.pool_classes_by_scheme = _POOLS
        return manager


class _Decoder:
    """The body's ``Content-Encoding`` undone, ``room + 1`` bytes of output at most per call."""

    def __init__(self, url: str, encoding: str | None):
        name = (encoding or "identity").strip().lower()
        if name in ("", "identity"):
            self._zlib = None
        elif name in ("gzip", "x-gzip", "deflate"):
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 32)  # a gzip or zlib header, detected
        else:
            raise RuntimeError(f"{url} answered with Content-Encoding {encoding!r}; only {ACCEPT_ENCODING} are decoded")

    def feed(self, data: bytes, room: int) -> bytes:
        if self._zlib is None:
            return data[: room + 1]
        out = bytearray()
        while data and len(out) <= room:
            out += self._zlib.decompress(data, room + 1 - len(out))
            if self._zlib.eof:  # the next gzip member, if any (nothing piles up undecoded)
                data = self._zlib.unused_data
                self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 32)
            else:
                data = self._zlib.unconsumed_tail
        return bytes(out)


def _read_body(url: str, response: Any, max_bytes: int, watch: _Watch, seconds: float) -> bytes:
    decoder = _Decoder(url, response.headers.get("Content-Encoding"))
    body, raw = bytearray(), 0
    while True:
        try:
            chunk = response.raw.read(_CHUNK, decode_content=False)
        except (ReadTimeoutError, TimeoutError) as exc:
            if watch.expired:
                raise DeadlineExceeded(f"{url}: no whole answer within {seconds:g} s") from None
            raise requests.Timeout(f"{url}: {exc}") from None
        except Exception as exc:  # the connection broke (or the watchdog shut it)
            if watch.expired:
                raise DeadlineExceeded(f"{url}: no whole answer within {seconds:g} s") from None
            raise requests.ConnectionError(f"{url}: the answer broke off: {type(exc).__name__}: {exc}") from None
        if watch.expired:
            raise DeadlineExceeded(f"{url}: no whole answer within {seconds:g} s")
        if not chunk:
            return bytes(body)
        raw += len(chunk)
        if (
            raw > 2 * max_bytes + _CHUNK
        ):  # compressed data that decodes to little (empty gzip members, one after another)
            raise ResponseTooLarge(
                f"{url} answered with more than {2 * max_bytes:,} bytes on the wire; the answer was refused"
            )
        try:
            body += decoder.feed(chunk, max_bytes - len(body))
        except zlib.error as exc:
            raise RuntimeError(
                f"{url} answered with a body that does not decode as {response.headers.get('Content-Encoding')}: {exc}"
            ) from None
        if len(body) > max_bytes:
            raise ResponseTooLarge(
                f"{url} answered with more than {max_bytes:,} bytes (decoded); the answer was refused"
            )


def bounded_post(
    session: requests.Session,
    url: str,
    payload: Any,
    headers: Mapping[str, str],
    timeout: float,
    max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
) -> tuple[int, Mapping[str, str], bytes]:
    """POST ``payload`` as JSON to ``url``: ``(status, headers, decoded body)``; redirects are returned, not followed.

    Raises ``requests.ConnectionError`` / ``requests.Timeout`` (:class:`DeadlineExceeded` past ``timeout`` seconds in
    all), :class:`ResponseTooLarge` past ``max_bytes``, RuntimeError for an encoding it does not decode."""
    prepared = session.prepare_request(
        requests.Request("POST", url, json=payload, headers={"Accept-Encoding": ACCEPT_ENCODING, **headers})
    )
    settings = session.merge_environment_settings(prepared.url, {}, True, None, None)
    adapter = session.get_adapter(prepared.url)
    with _Watch(timeout) as watch:
        try:
            response = adapter.send(
                prepared,
                stream=True,
                timeout=(timeout, timeout),
                verify=settings["verify"],
                cert=settings["cert"],
                proxies=settings["proxies"],
            )
        except requests.RequestException:
            if watch.expired:
                raise DeadlineExceeded(f"{url}: no answer within {timeout:g} s") from None
            raise
        try:
            body = _read_body(url, response, max_bytes, watch, timeout)
        except BaseException:
            response.close()
            raise
    response.raw.release_conn()
    return response.status_code, response.headers, body
