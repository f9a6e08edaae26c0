"""The env server's load as picows sessions: OpenEnv's WebSocket protocol spoken frame by frame.

picows is a WebSocket client in Cython; each session here is a listener whose frame callback reads the answer and
sends the next message (no task, future or coroutine a step; JSON by pydantic-core's Rust parser and encoder), so
that a load generator sharing the machine's cores with the server takes as little of them as it can (~0.04-0.06 ms
of CPU a step, against ~0.15 for OpenEnv's asyncio client). What a session does: a reset on connecting; once
started, the expert's action (the observation's privileged ``expert_action``) after each observation and a reset
after each episode, until the load is over; then it closes its socket. Any answer that is not an observation fails
the session (counted in ``load.errors``).

The ``load`` it is given counts for it: ``over()``, ``steps``, ``resets``, ``latencies`` (seconds from a step's
send to its parsed answer) and ``errors``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import time
from collections.abc import Callable
from typing import Any

import pydantic_core
from picows import WSFrame, WSListener, WSMsgType, WSTransport, ws_connect

__all__ = ["Session", "open_sessions", "MAX_ANSWER_BYTES"]

MAX_ANSWER_BYTES = 1 << 22
"""Longest answer a session reads (4 MiB; an observation is a few KB): a longer one fails the session."""


class Session(WSListener):
    """One session of the load (module docstring)."""

    def __init__(self, index: int, load: Any, connected: list[int], action_text: Callable[[str], str]):
        self.index, self.load, self.connected, self.action_text = index, load, connected, action_text
        self.rng = random.Random(index)
        self.parts: list[bytes] = []
        self.size = 0
        """Bytes of the answer being assembled (its frames so far)."""
        self.sent_at = 0.0
        self.stepping = False
        self.playing = False
        self.first: dict[str, Any] = {}
        """The first reset's answer, kept until the load starts."""

    def on_ws_connected(self, transport: WSTransport) -> None:
        self.transport = transport
        self.reset()

    def reset(self) -> None:
        self.stepping = False
        options = {"task_index": self.rng.randrange(1 << 16)}
        self.send({"type": "reset", "data": {"seed": self.index, "options": options}})

    def send(self, message: dict[str, Any]) -> None:
        self.transport.send(WSMsgType.TEXT, pydantic_core.to_json(message))

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        if frame.msg_type not in (WSMsgType.TEXT, WSMsgType.CONTINUATION):
            if frame.msg_type is not WSMsgType.CLOSE:  # picows answers pings itself
                self.fail(f"an unexpected {frame.msg_type.name} frame")
            return
        self.parts.append(frame.get_payload_as_bytes())
        self.size += len(self.parts[-1])
        if self.size > MAX_ANSWER_BYTES:  # a server's word is bounded too: no answer grows without end
            self.fail(f"an answer of over {MAX_ANSWER_BYTES} bytes")
        elif frame.fin:
            raw, self.parts, self.size = b"".join(self.parts), [], 0
            try:
                self.answered(pydantic_core.from_json(raw))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:  # not JSON, or not an observation's shape
                self.fail(f"a malformed answer ({type(exc).__name__}: {exc})")

    def answered(self, answer: dict[str, Any]) -> None:
        if answer.get("type") != "observation":
            self.fail(f"answered {json.dumps(answer)[:200]}")
        elif not self.playing:  # connected: wait for the start
            self.first = answer
            self.connected.append(self.index)
        else:
            if self.stepping:
                self.load.latencies.append(time.perf_counter() - self.sent_at)
                self.load.steps += 1
            else:
                self.load.resets += 1
            self.advance(answer)

    def start(self) -> None:
        """Play from the first reset's answer on (a session that got none, refused or failed, stays closed)."""
        if self.first:
            self.playing, self.load.resets = True, self.load.resets + 1
            self.advance(self.first)

    def advance(self, answer: dict[str, Any]) -> None:
        if self.load.over():
            self.transport.disconnect()
            return
        data = answer["data"]
        if data["done"]:
            self.reset()
            return
        self.stepping, self.sent_at = True, time.perf_counter()
        self.send({"type": "step", "data": {"text": self.action_text(data["observation"]["expert_action"])}})

    def fail(self, why: str) -> None:
        self.load.errors.append(f"session {self.index}: {why}"[:300])
        self.parts, self.size = [], 0
        self.transport.disconnect()


async def open_sessions(
    url: str,
    sessions: int,
    load: Any,
    connected: list[int],
    action_text: Callable[[str], str],
    connect_timeout_s: float,
) -> tuple[Callable[[], None], list[asyncio.Future]]:
    """Connect ``sessions`` sessions to the WebSocket ``url`` at once (each resets and waits; a failed connection is
    counted in ``load.errors``): (start them all, one future a session that is done when its socket is closed)."""
    opened = await asyncio.gather(
        *(
            asyncio.wait_for(
                ws_connect(functools.partial(Session, i, load, connected, action_text), url), connect_timeout_s
            )
            for i in range(sessions)
        ),
        return_exceptions=True,
    )
    pairs: list[tuple[WSTransport, Session]] = []
    for i, result in enumerate(opened):
        if isinstance(result, BaseException):
            load.errors.append(f"session {i}: {type(result).__name__}: {result}"[:300])
        else:
            pairs.append(result)

    def start() -> None:
        for _, session in pairs:
            session.start()

    return start, [asyncio.ensure_future(transport.wait_disconnected()) for transport, _ in pairs]
