"""Hostile HTTP clients against a server on 127.0.0.1, each bounded in connections, bytes and time, and the honest
client that must still be answered while they run (``tests/support/hostile_http.py`` is the other side: a hostile
*server* for the agents' clients).

:class:`Attack` runs the classes tried against the served board and env server, each in its own threads, until
``stop()`` (or its ``seconds``): slow headers and slow bodies (a byte at a time, inside every per-read timeout),
held sockets (connected, silent), huge bodies (a ``Content-Length`` far past the limit, and a chunked body streamed
past it) and a connection flood (connect and close, as fast as it goes). Each records how its connections ended.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

HOST = "127.0.0.1"
HONEST_ADDRESS = "127.0.0.2"
"""The honest client's own address: Linux routes all of 127/8 to the loopback, so the server sees another client
(a per-client bound of the attackers' address does not count it)."""


@dataclass
class Outcome:
    """How one hostile connection ended: ``answer`` (its first bytes; b"" when closed without one), when."""

    kind: str
    answer: bytes = b""
    seconds: float = 0.0
    closed: bool = False


@dataclass
class Attack:
    """The hostile classes against ``port`` (``path``: a POST endpoint), started by :meth:`start`."""

    port: int
    path: str
    headers: str = ""
    """Header lines of the POSTs (``"Authorization: Bearer T\\r\\n"``: a body the app would read, not refuse unread)."""
    slow_headers: int = 16
    slow_bodies: int = 16
    held: int = 200
    huge: int = 4
    flood: int = 300
    every: float = 0.5
    """Seconds between two dripped bytes (keep it under the server's per-read timeout)."""
    seconds: float = 30.0
    """The longest any attacker runs (a bound, whatever the server does)."""
    outcomes: list[Outcome] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Attack:
        head = f"POST {self.path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{self.headers}"
        jobs: list[tuple[str, Any, tuple[Any, ...]]] = []
        jobs += [("slow headers", self._drip, (b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: ", b"a"))] * self.slow_headers
        for i in range(self.slow_bodies):
            framing = "Transfer-Encoding: chunked\r\n\r\n" if i % 2 else "Content-Length: 100000\r\n\r\n"
            jobs.append(("slow body", self._drip, ((head + framing).encode(), b"1\r\n{\r\n" if i % 2 else b"{")))
        jobs += [("huge length", self._huge, ((head + "Content-Length: 1073741824\r\n\r\n").encode(),))] * self.huge
        jobs += [("huge chunked", self._chunked, ((head + "Transfer-Encoding: chunked\r\n\r\n").encode(),))] * self.huge
        jobs += [("held", self._held, ())] * self.held
        jobs += [("flood", self._flood, ())]
        for kind, target, args in jobs:
            thread = threading.Thread(target=self._record, args=(kind, target, args), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def ended(self, kinds: tuple[str, ...], count: int, timeout: float) -> bool:
        """Wait up to ``timeout`` s until ``count`` connections of ``kinds`` have ended; whether they did."""
        deadline = time.monotonic() + timeout
        while sum(o.kind in kinds for o in list(self.outcomes)) < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def stop(self) -> list[Outcome]:
        """End every attacker (each within a second) and return the outcomes."""
        self._stop.set()
        for thread in self._threads:
            thread.join(self.seconds + 10)
        assert not any(t.is_alive() for t in self._threads), "an attacker did not stop"
        return self.outcomes

    def _record(self, kind: str, target: Any, args: tuple[Any, ...]) -> None:
        start = time.monotonic()
        try:
            answer, closed = target(*args)
        except OSError as exc:  # refused or reset: the server closed it
            answer, closed = repr(exc).encode(), True
        with self._lock:
            self.outcomes.append(Outcome(kind, answer, time.monotonic() - start, closed))

    def _connect(self) -> socket.socket:
        sock = socket.create_connection((HOST, self.port), timeout=10)
        sock.settimeout(0.05)
        return sock

    def _until_answer(self, sock: socket.socket, piece: bytes, every: float) -> tuple[bytes, bool]:
        """Until the server answers or closes, or the attack ends: look for an answer, then send ``piece`` (when
        the server takes it) and wait ``every`` s."""
        deadline = time.monotonic() + self.seconds
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                return sock.recv(4096), True  # an answer, or b"": closed
            except TimeoutError:
                pass
            if piece:
                try:
                    sock.sendall(piece)
                except TimeoutError:  # the server reads no more: look for its answer
                    pass
            self._stop.wait(every)
        return b"", False

    def _drip(self, head: bytes, piece: bytes) -> tuple[bytes, bool]:
        with self._connect() as sock:
            sock.sendall(head)
            return self._until_answer(sock, piece, self.every)

    def _held(self) -> tuple[bytes, bool]:
        with self._connect() as sock:
            return self._until_answer(sock, b"", 0.2)

    def _huge(self, head: bytes) -> tuple[bytes, bool]:
        with self._connect() as sock:
            sock.sendall(head)
            return self._until_answer(sock, b"{" * 65536, 0.0)

    def _chunked(self, head: bytes) -> tuple[bytes, bool]:
        chunk = b"%x\r\n%s\r\n" % (65536, b" " * 65536)
        with self._connect() as sock:
            sock.sendall(head)
            return self._until_answer(sock, chunk, 0.0)

    def _flood(self) -> tuple[bytes, bool]:
        opened = 0
        while opened < self.flood and not self._stop.is_set():
            with socket.create_connection((HOST, self.port), timeout=10):
                opened += 1
        return str(opened).encode(), True


@dataclass
class Reply:
    status: int
    body: Any
    """The decoded JSON body, or the text."""
    headers: dict[str, str]
    seconds: float


def honest(
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
    source: str = HONEST_ADDRESS,
) -> Reply:
    """One honest request from ``source``, and how long it took."""
    start = time.monotonic()
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout, source_address=(source, 0))
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        data = response.read()
    finally:
        conn.close()
    try:
        decoded: Any = json.loads(data)
    except ValueError:
        decoded = data.decode(errors="replace")
    return Reply(response.status, decoded, dict(response.getheaders()), time.monotonic() - start)
