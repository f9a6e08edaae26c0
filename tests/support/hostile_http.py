"""A misbehaving chat-completions server on 127.0.0.1 (stdlib only), bounded in what it sends and for how long.

``HostileServer(behaviour, **options)`` answers every POST as ``behaviour`` says:

* ``redirect``: ``status`` (302, 307...) with ``Location: location``;
* ``stream``: a 200 whose chunked body never ends, ``chunk`` bytes at a time, up to ``limit`` bytes in all;
* ``bomb``: a 200 ``Content-Encoding: gzip`` body that inflates to ``size`` bytes of spaces;
* ``members``: a 200 ``Content-Encoding: gzip`` body of ``count`` gzip members, the good answer cut among them
  (``count`` 2) or empty ones (``empty=True``: about 20 bytes each on the wire, nothing decoded);
* ``drip``: a 200 whose body comes one byte every ``every`` seconds (at most ``limit`` bytes);
* ``drip-headers``: the status line, then the headers one byte every ``every`` seconds (at most ``limit``);
* ``retry-after``: 429 with ``Retry-After: value`` (at most ``limit`` times, then a good answer);
* ``usage``: a good answer whose ``usage`` is the raw JSON text ``usage`` (numbers no Python float holds).

Every request's path and headers are kept in ``requests``; ``sent`` counts the body bytes a drip got out.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = {
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "<action>press red</action>"}, "finish_reason": "stop"}
    ]
}


class HostileServer:
    """``with HostileServer("drip", every=0.2) as server:`` → ``server.url`` (``http://127.0.0.1:PORT/v1``)."""

    def __init__(self, behaviour: str, **options: Any):
        self.behaviour, self.options = behaviour, options
        self.requests: list[dict[str, Any]] = []
        self.sent = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with server.lock:
                    server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                    number = len(server.requests)
                try:
                    getattr(server, "_" + server.behaviour.replace("-", "_"))(self, number)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _send(self, handler: Any, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        handler.send_response(status)
        for key, value in {
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
            **(headers or {}),
        }.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(body)

    def _redirect(self, handler: Any, number: int) -> None:
        self._send(handler, self.options.get("status", 307), b'{"moved": true}', {"Location": self.options["location"]})

    def _stream(self, handler: Any, number: int) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        chunk, left = b" " * self.options.get("chunk", 1 << 20), self.options.get("limit", 64 << 20)
        while left > 0:
            piece = chunk[:left]
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            left -= len(piece)
            with self.lock:
                self.sent += len(piece)
        handler.wfile.write(b"0\r\n\r\n")

    def _bomb(self, handler: Any, number: int) -> None:
        body = gzip.compress(b" " * self.options.get("size", 16 << 20), compresslevel=9)
        self._send(handler, 200, body, {"Content-Encoding": "gzip"})

    def _members(self, handler: Any, number: int) -> None:
        count = self.options.get("count", 2)
        if self.options.get("empty"):
            body = gzip.compress(b"", mtime=0) * count
        else:
            text = json.dumps(ANSWER).encode()
            cut = len(text) // count
            body = b"".join(
                gzip.compress(text[i * cut : (i + 1) * cut if i < count - 1 else None], mtime=0) for i in range(count)
            )
        self._send(handler, 200, body, {"Content-Encoding": "gzip"})

    def _drip(self, handler: Any, number: int) -> None:
        body = json.dumps(ANSWER).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.flush()
        self._trickle(handler, body)

    def _drip_headers(self, handler: Any, number: int) -> None:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\n")
        handler.wfile.flush()
        self._trickle(handler, b"X-Slow: " + b"a" * 4096 + b"\r\n\r\n")

    def _trickle(self, handler: Any, data: bytes) -> None:
        for i in range(min(len(data), self.options.get("limit", 100))):
            time.sleep(self.options.get("every", 0.2))
            handler.wfile.write(data[i : i + 1])
            handler.wfile.flush()
            with self.lock:
                self.sent += 1
        handler.close_connection = True

    def _retry_after(self, handler: Any, number: int) -> None:
        if number <= self.options.get("limit", 500):
            self._send(handler, 429, b'{"error": "slow down"}', {"Retry-After": self.options["value"]})
        else:
            self._send(handler, 200, json.dumps(ANSWER).encode())

    def _usage(self, handler: Any, number: int) -> None:
        text = json.dumps(ANSWER)[:-1] + ', "usage": ' + self.options["usage"] + "}"
        self._send(handler, 200, text.encode())

    def __enter__(self) -> HostileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
