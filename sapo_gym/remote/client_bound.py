"""A bound on the sessions one client holds open on the env server (``--max-sessions-per-client``).

``--max-sessions`` bounds the server as a whole; without a per-client bound one client that keeps each
of its sessions alive (a frame or a request inside every idle timeout) holds all of them. Here:

* a client is its peer address: the IPv4 address, or the /64 network of an IPv6 one (one host usually
  holds a whole /64); an IPv4-mapped IPv6 address counts as the IPv4 one. The server has no
  authentication, so nothing a client sends (a header, a token) splits it into several clients;
* :class:`PeerMiddleware` (pure ASGI, in front of every route, ``/ws`` and ``/mcp`` included) names the
  client of the request being served in :data:`requesting_client`;
* :class:`SessionOwners` counts each client's sessions, those still being built included, and refuses
  one past the bound with :class:`ClientSessionLimit`, a ``SessionCapacityError``: a WebSocket gets
  OpenEnv's ``CAPACITY_REACHED`` error frame carrying this message, ``POST /sessions`` a 429.

``sapo-gym env serve`` runs uvicorn behind nginx, which names each client's address in ``X-Forwarded-For``
(replacing whatever the client sent) and uvicorn puts it in the ASGI scope: each client keeps its own bound.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from contextvars import ContextVar

from openenv.core.env_server.exceptions import SessionCapacityError
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "ClientSessionLimit",
    "PeerMiddleware",
    "SessionOwners",
    "client_key",
    "default_per_client",
    "requesting_client",
    "UNKNOWN_CLIENT",
]

UNKNOWN_CLIENT = "unknown"
"""The key of a request whose transport names no peer (a Unix socket): all such requests share one bound."""

requesting_client: ContextVar[str | None] = ContextVar("requesting_client", default=None)
"""The client (:func:`client_key`) of the request or socket the current task serves."""


def client_key(host: str | None) -> str:
    """The client a peer address belongs to (see the module docstring)."""
    if not host:
        return UNKNOWN_CLIENT
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine only (``localhost`` or a loopback address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def default_per_client(max_sessions: int, host: str) -> int:
    """A quarter of ``max_sessions`` (at least 1); all of them on a loopback-only server, where every client
    has the same address and a per-address bound would only shrink the total."""
    return max_sessions if is_loopback(host) else max(1, max_sessions // 4)


class ClientSessionLimit(SessionCapacityError):
    """A new session refused because its client already holds its bound of open sessions."""

    def __init__(self, client: str, held: int, limit: int):
        super().__init__(
            held,
            limit,
            f"client {client} already holds {held} open sessions, the most one client may "
            f"hold (--max-sessions-per-client {limit}); close one to open another",
        )
        self.client = client


class PeerMiddleware:
    """ASGI middleware: sets :data:`requesting_client` from the connection's peer for the route it serves."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        peer = scope.get("client")
        token = requesting_client.set(client_key(peer[0] if peer else None))
        try:
            await self.app(scope, receive, send)
        finally:
            requesting_client.reset(token)


class SessionOwners:
    """Which client opened each session, and the sessions each client has being built.

    Called from the server's event loop only, with no ``await`` between a count and its claim. A bound of
    ``total`` (the server's ``max_sessions``) or more never refuses: a client holding that many holds the whole
    server, and the server-wide refusal (503) says so."""

    def __init__(self, limit: int, total: int):
        if limit < 1:
            raise ValueError(f"max_sessions_per_client must be >= 1, got {limit}")
        self.limit, self.total = limit, total
        self.owner: dict[str, str] = {}
        self.pending: dict[str, int] = {}

    def held(self, client: str, live: Iterable[str]) -> int:
        """Sessions ``client`` holds: open (among ``live``, the server's session ids) or being built."""
        live = set(live)
        for sid in [s for s in self.owner if s not in live]:  # closed by a path that did not say so
            del self.owner[sid]
        return self.pending.get(client, 0) + sum(1 for c in self.owner.values() if c == client)

    def claim(self, client: str, live: Iterable[str]) -> None:
        """Reserve a slot for a session ``client`` is opening, or raise :class:`ClientSessionLimit`."""
        held = self.held(client, live)
        if self.limit < self.total and held >= self.limit:
            raise ClientSessionLimit(client, held, self.limit)
        self.pending[client] = self.pending.get(client, 0) + 1

    def settle(self, client: str, session_id: str | None) -> None:
        """The session claimed for ``client`` is open as ``session_id`` (None: it failed to open)."""
        left = self.pending.get(client, 0) - 1
        if left > 0:
            self.pending[client] = left
        else:
            self.pending.pop(client, None)
        if session_id is not None:
            self.owner[session_id] = client

    def forget(self, session_id: str) -> None:
        self.owner.pop(session_id, None)
