"""``sapo-gym leaderboard serve``'s HTTP server: werkzeug's threaded server, bounded.

werkzeug's ``ThreadedWSGIServer`` starts a thread for every connection, without limit: connections that
each cost little (an idle keep-alive, headers sent slowly until ``--header-timeout``) could still add up
to any number of threads. :class:`BoundedServer` serves at most ``max_connections`` connections at once;
one more is answered ``503`` with ``Retry-After: 1`` at once and closed, before any thread starts for it.
Its handler (:func:`leaderboard.server.limits.request_handler`) bounds each connection in time.

**Stopping drains.** On SIGTERM or SIGINT the server stops accepting, closes the connections that have not sent a
whole request yet (werkzeug answers each connection's one request with ``Connection: close``), lets every request in
service finish and answer, and exits once they have, or after ``drain_seconds``, whichever is first
(:meth:`BoundedServer.drain`). A SIGINT during the drain ends it at once; a repeated SIGTERM does not (a signal to
the process group reaches a worker twice, once from its supervisor). werkzeug's own server cut every
connection thread at exit: a bundle upload in progress got a reset instead of its answer.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import threading
import time
from typing import Any

from werkzeug.serving import ThreadedWSGIServer

from leaderboard.server.limits import request_handler

__all__ = ["BoundedServer", "listen", "serve"]

log = logging.getLogger(__name__)

_BUSY = json.dumps({"error": "busy", "status": 503,
                    "message": "the server serves its limit of connections at once; try again in a second"}).encode()
_BUSY_RESPONSE = (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(_BUSY)).encode() + b"\r\nConnection: close\r\n\r\n" + _BUSY)


class BoundedServer(ThreadedWSGIServer):
    """werkzeug's threaded server with at most ``max_connections`` connections in service at once."""

    def __init__(self, host: str, port: int, app: Any, handler: type, max_connections: int, fd: int | None = None):
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        super().__init__(host, port, app, handler=handler, fd=fd)
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._waiting: dict[socket.socket, bool] = {}
        """Each connection in service -> whether it waits for its next request (its line and headers not all in)."""
        self.draining = False

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            try:
                request.settimeout(1.0)
                request.sendall(_BUSY_RESPONSE)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)  # starts the connection's thread
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: socket.socket, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._waiting.pop(request, None)
            self._slots.release()

    def mark_waiting(self, connection: socket.socket, waiting: bool) -> bool:
        """The handler's report: ``connection`` now waits for a request (True) or serves one (False). Returns whether it
        may go on: a connection about to wait for another request while the server drains is closed instead."""
        with self._lock:
            if waiting and self.draining:
                return False
            self._waiting[connection] = waiting
            return True

    def drain(self, seconds: float) -> int:
        """Stop taking requests: close the connections waiting for one, and wait up to ``seconds`` for the requests in
        service to finish. Returns how many connections were still open."""
        with self._lock:
            self.draining = True
            idle = [conn for conn, waiting in self._waiting.items() if waiting]
        for conn in idle:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # its thread's pending read ends: no request, so nothing is lost
            except OSError:
                pass
        deadline, taken = time.monotonic() + seconds, 0
        while taken < self.max_connections:
            left = deadline - time.monotonic()
            if left <= 0 or not self._slots.acquire(timeout=left):
                break
            taken += 1
        return self.max_connections - taken


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one the system picks; ``getsockname()`` says which).
    Bound before the app is built, so the address the server announces is one it already holds."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=128)


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM as SIGINT: serve_forever ends, the drain begins


def serve(app: Any, listener: socket.socket, request_timeout: float, header_timeout: float | None,
          max_connections: int, drain_seconds: float = 10.0) -> None:
    """Serve ``app`` on ``listener`` (:func:`listen`) until interrupted; then drain for at most ``drain_seconds``."""
    host, port = listener.getsockname()[:2]
    server = BoundedServer(host, port, app, request_handler(request_timeout, header_timeout), max_connections,
                           fd=listener.fileno())
    listener.close()  # the server holds its own duplicate of the descriptor
    main = threading.current_thread() is threading.main_thread()  # signal handlers can only be set there
    if main:
        signal.signal(signal.SIGTERM, _stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()  # no new connection from here on
        if main:  # a repeated SIGTERM (the process group's, then the supervisor's) does not cut the drain; SIGINT does
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            cut = server.drain(drain_seconds)
            if cut:
                log.warning("stopped with %d connection(s) still in service after %g s of draining", cut, drain_seconds)
        except KeyboardInterrupt:  # a second signal: stop now
            log.warning("stopped during the drain: connections in service were cut")
