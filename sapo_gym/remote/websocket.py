"""The ``/ws`` endpoint: OpenEnv's WebSocket handler behind a guard that screens frames and closes idle sockets.

OpenEnv 0.10's handler answers a frame that is not JSON with an ``INVALID_JSON`` frame, but drops the
connection (and its session) on any other frame its own code cannot take: JSON that is not an object
(``[1]``, ``null``), a binary frame, an integer literal Python refuses to convert, nesting past the
parser's recursion, a lone surrogate that its answer cannot encode. And its idle reaper exempts sockets
attached to HTTP sessions, so idle attached sockets hold their slots forever.

The guard wraps the handler without changing it, so every valid frame is answered byte for byte as
OpenEnv answers it. Its :class:`GuardedWebSocket` is what the handler reads frames from:

* every frame is screened first (:func:`screen`): the size (:data:`~sapo_gym.remote.wire_types.MAX_BODY_BYTES`),
  a text frame, JSON by :mod:`sapo_gym.remote.strict_json`'s rules, an object at the top. A frame that
  fails is answered with an error frame of OpenEnv's shape (``TOO_LARGE`` or ``INVALID_JSON``) and never
  reaches the handler; the connection and its session play on;
* every frame counts as activity of its session, and a socket that receives no frame for the idle timeout
  is closed (1001, the reason says why) and its session freed, whether the socket opened it or attached to
  an HTTP session. Sessions held by a socket are left to this timer, not to the server's reaper.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from openenv.core.env_server.types import WSErrorCode, WSErrorResponse
from starlette.routing import WebSocketRoute
from starlette.types import Message, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from sapo_gym.remote import strict_json
from sapo_gym.remote.wire_types import MAX_BODY_BYTES

__all__ = [
    "TOO_LARGE",
    "IDLE_CLOSE_CODE",
    "FRAME_READ_LIMIT",
    "GuardedWebSocket",
    "screen",
    "guard_websocket_route",
    "serving_socket",
]

TOO_LARGE = "TOO_LARGE"
"""Error code of a frame over :data:`~sapo_gym.remote.wire_types.MAX_BODY_BYTES` (OpenEnv has none for it)."""

IDLE_CLOSE_CODE = 1001
"""WebSocket close code of a socket closed for idleness ("going away")."""

FRAME_READ_LIMIT = 4 * MAX_BODY_BYTES
"""uvicorn's ``ws_max_size``: a frame up to this size is read and answered ``TOO_LARGE``; a larger one
makes the server drop the connection (1009), as it must stop reading somewhere."""

serving_socket: ContextVar[GuardedWebSocket | None] = ContextVar("serving_socket", default=None)
"""The socket the current task serves (set by the guarded endpoint): the server's ``_create_session``
names the session it opens for that socket here."""


def error_frame(code: str, message: str) -> str:
    """An error frame of OpenEnv's shape, ``{"type": "error", "data": {"message", "code"}}``."""
    return WSErrorResponse(data={"message": message, "code": code}).model_dump_json()


_JSON_KINDS = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def screen(message: Message, limit: int = MAX_BODY_BYTES) -> tuple[str | None, str | None]:
    """``(text, None)`` for a received frame to hand to OpenEnv's handler, ``(None, error frame)`` for one to refuse."""
    text, data = message.get("text"), message.get("bytes")
    size = len(data or b"") if text is None else _utf8_size(text)
    if size > limit:
        return None, error_frame(TOO_LARGE, f"a frame of {size} bytes is over the limit of {limit} bytes")
    if text is None:
        return None, error_frame(
            WSErrorCode.INVALID_JSON.value,
            "Invalid JSON: a binary frame; every message is one JSON object in a text frame",
        )
    try:
        value = strict_json.loads(text)
    except strict_json.NotJSON as exc:
        return None, error_frame(WSErrorCode.INVALID_JSON.value, f"Invalid JSON: {exc}")
    if not isinstance(value, dict):
        kind = _JSON_KINDS.get(type(value), type(value).__name__)
        return None, error_frame(
            WSErrorCode.INVALID_JSON.value, f"Invalid JSON: a frame must be a JSON object, got {kind}"
        )
    return text, None


class GuardedWebSocket(WebSocket):
    """The socket OpenEnv's handler serves: it only ever receives screened text frames (module docstring)."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, server: Any, idle_timeout_s: float | None):
        super().__init__(scope, receive, send)
        self.server = server
        self.idle_timeout_s = idle_timeout_s
        self.session_id: str | None = None
        """The session this socket holds, known from its first frame on (its own, or the HTTP one it attached to)."""
        self.held = False
        """The session is known and exempt from the server's reaper (this socket's timer expires it)."""
        self.expired = False
        """Closed for idleness: its session is to be freed too."""

    async def receive_text(self) -> str:
        """The next frame that passes :func:`screen`; every other frame is answered here with its error frame."""
        if not self.held:  # the handler reads frames only once its session is set up: own or attached
            self.session_id = self.session_id or self.query_params.get("session_id")
            self.held = self.session_id is not None
            if self.held:
                self.server.hold_for_socket(self.session_id)
        while True:
            message = await self._next_frame()
            if message["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(message["code"], message.get("reason"))
            if self.session_id is not None:
                self.server._update_session_activity(self.session_id)
            text, refusal = screen(message)
            if refusal is None:
                return text  # type: ignore[return-value]  (screen passes text frames only)
            await self.send_text(refusal)

    async def _next_frame(self) -> Message:
        """The next ASGI message; after the idle timeout without one, close the socket and report a disconnect.
        (``asyncio.timeout``, not ``wait_for``: no task of its own and no extra wake-up a frame.)"""
        if self.idle_timeout_s is None:
            return await self.receive()
        try:
            async with asyncio.timeout(self.idle_timeout_s):
                return await self.receive()
        except TimeoutError:
            self.expired = True
            reason = f"idle for {self.idle_timeout_s:g} s: session closed"
            await self.close(code=IDLE_CLOSE_CODE, reason=reason)
            return {"type": "websocket.disconnect", "code": IDLE_CLOSE_CODE, "reason": reason}


class GuardedEndpoint:
    """The ``/ws`` ASGI app: OpenEnv's handler run on a :class:`GuardedWebSocket`."""

    def __init__(self, handler: Callable[[WebSocket], Awaitable[None]], server: Any, idle_timeout_s: float | None):
        self.handler, self.server, self.idle_timeout_s = handler, server, idle_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ws = GuardedWebSocket(scope, receive, send, self.server, self.idle_timeout_s)
        token = serving_socket.set(ws)
        try:
            await self.handler(ws)
        finally:
            serving_socket.reset(token)
            if ws.held:
                self.server.release_from_socket(ws.session_id)
                if ws.expired:  # OpenEnv frees a socket's own session, not an attached HTTP one
                    await asyncio.shield(self.server._destroy_session(ws.session_id))


def guard_websocket_route(app: Any, server: Any, idle_timeout_s: float | None) -> None:
    """Put OpenEnv's ``/ws`` handler (registered by ``server.register_routes``) behind the guard."""
    for index, route in enumerate(app.router.routes):
        if isinstance(route, WebSocketRoute) and route.path == "/ws":
            guarded = GuardedEndpoint(route.endpoint, server, idle_timeout_s)
            app.router.routes[index] = WebSocketRoute("/ws", guarded, name=route.name)
            return
    raise RuntimeError("OpenEnv registered no /ws route: this server needs openenv 0.10's HTTPEnvServer")
