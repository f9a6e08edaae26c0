"""``sapo-gym leaderboard serve``'s HTTP server: werkzeug's threaded server, bounded.

werkzeug's ``ThreadedWSGIServer`` starts a thread for every connection, without limit: connections that
each cost little (an idle keep-alive, headers sent slowly until ``--header-timeout``) could still add up
to any number of threads. :class:`BoundedServer` serves at most ``max_connections`` connections at once;
one more is answered ``503`` with ``Retry-After: 1`` at once and closed, before any thread starts for it.
Its handler (:func:`leaderboard.server.limits.request_handler`) bounds each connection in time.
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

from werkzeug.serving import ThreadedWSGIServer

from leaderboard.server.limits import request_handler

__all__ = ["BoundedServer", "listen", "serve"]

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
            self._slots.release()


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one the system picks; ``getsockname()`` says which).
    Bound before the app is built, so the address the server announces is one it already holds."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=128)


def serve(app: Any, listener: socket.socket, request_timeout: float, header_timeout: float | None,
          max_connections: int) -> None:
    """Serve ``app`` on ``listener`` (:func:`listen`) until interrupted."""
    host, port = listener.getsockname()[:2]
    server = BoundedServer(host, port, app, request_handler(request_timeout, header_timeout), max_connections,
                           fd=listener.fileno())
    listener.close()  # the server holds its own duplicate of the descriptor
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
