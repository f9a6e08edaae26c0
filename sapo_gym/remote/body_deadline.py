"""A deadline on every HTTP request body of the env server, whole, not per read.

uvicorn times out neither a request body nor a read of one, so a client that sends one byte every few
seconds holds its connection (and the coroutine behind it) for as long as it likes. :class:`BodyDeadline`
is an ASGI middleware in front of every HTTP route, OpenEnv's included: it reads the body itself, at most
:data:`~sapo_gym.remote.websocket.FRAME_READ_LIMIT` bytes, and

* answers ``408`` (``body_timeout``) when the body has not arrived in full within ``seconds`` of the
  request's headers;
* answers ``413`` (``too_large``) past the read limit without reading further;
* otherwise hands the route the body it read, so routes see the request unchanged (their own limits,
  such as :data:`~sapo_gym.remote.models.MAX_BODY_BYTES`, still answer first for a smaller body).

WebSocket and lifespan traffic pass through untouched (the socket guard bounds frames and idleness).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyDeadline", "DEFAULT_BODY_TIMEOUT_S"]

DEFAULT_BODY_TIMEOUT_S = 30.0
"""The largest body the server reads (``FRAME_READ_LIMIT``, 3.25 MiB) at 128 KiB/s takes 26 s: a slow honest
link fits, a client dripping bytes is cut off within half a minute."""


class _TooLarge(Exception):
    pass


class BodyDeadline:
    """ASGI middleware: an HTTP request body must arrive within ``seconds`` of its headers, and be at most
    ``limit`` bytes (see the module docstring); ``seconds`` None or 0 turns the deadline off."""

    def __init__(self, app: ASGIApp, seconds: float | None, limit: int):
        self.app, self.seconds, self.limit = app, seconds or None, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            messages = await asyncio.wait_for(self._body(receive), self.seconds)
        except asyncio.TimeoutError:
            await _answer(send, 408, "body_timeout", f"the request body did not arrive within {self.seconds:g} s")
            return
        except _TooLarge:
            await _answer(send, 413, "too_large", f"request body over the {self.limit} bytes this server reads")
            return
        if messages is None:  # the client went away before its body ended
            return
        await self.app(scope, _replay(messages, receive), send)

    async def _body(self, receive: Receive) -> list[Message] | None:
        """The request's body messages, up to the end of the body (None: the client disconnected)."""
        messages, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            size += len(message.get("body", b""))
            if size > self.limit:
                raise _TooLarge
            messages.append(message)
            if not message.get("more_body", False):
                return messages


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that gives the body read already, then what the client sends next (its disconnect)."""
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


async def _answer(send: Send, status: int, error: str, message: str) -> None:
    body = json.dumps({"error": error, "message": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
