"""The guard in front of OpenEnv's ``/ws`` handler, against ``sapo-gym env serve`` on 127.0.0.1:
hostile frames and idle sockets.

Every malformed or hostile frame gets an error frame of the documented shape and the connection, with its session
and episode, plays on; an idle socket is closed and its session freed, whether it opened the session or attached to
an HTTP one, so idle sockets cannot hold ``--max-sessions`` forever; a frame counts as activity.
"""

from __future__ import annotations

import json
import time
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("openenv.core.env_server")
pytest.importorskip("websockets.sync.client")

from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.sync.client import ClientConnection, connect  # noqa: E402

import sapo_gym  # noqa: E402,F401  (registers the ids)
from sapo_gym.core import ACTION_MAX_LENGTH  # noqa: E402
from sapo_gym.remote.server import reap_interval  # noqa: E402
from sapo_gym.remote.websocket import FRAME_READ_LIMIT, IDLE_CLOSE_CODE  # noqa: E402
from sapo_gym.remote.wire_types import MAX_BODY_BYTES  # noqa: E402
from tests.support.remote import http, served  # noqa: E402

ANSWER_TIMEOUT_S = 30.0
"""Longest wait for one answer frame (bounded: a lost answer fails, never hangs)."""
LOOK = {"text": "<think>t</think><action>look</action>"}

HOSTILE: list[tuple[str | bytes, str]] = [
    ("[1]", "INVALID_JSON"),  # JSON, not an object
    ("null", "INVALID_JSON"),
    ('"x"', "INVALID_JSON"),
    ("{not json", "INVALID_JSON"),
    ('{"type": "reset", "data": {"seed": ' + "9" * 5000 + "}}", "INVALID_JSON"),  # past Python's int() limit
    ('{"type": "reset", "data": {"seed": ' + "9" * 65 + "}}", "INVALID_JSON"),  # past the 64-digit bound
    ("[" * 100_000 + "]" * 100_000, "INVALID_JSON"),  # past the parser's recursion
    (
        '{"type": "step", "data": {"text": "x", "metadata": ' + '{"a": ' * 10_000 + "1" + "}" * 10_000 + "}}",
        "INVALID_JSON",
    ),
    (
        '{"type": "step", "data": {"action": ' + "[" * 300 + "]" * 300 + "}}",  # parses, but its error frame
        "INVALID_JSON",
    ),  # would echo it past pydantic's depth
    (b'{"type": "state"}', "INVALID_JSON"),  # a binary frame
    ('{"type": "step", "data": {"text": "\\ud800"}}', "INVALID_JSON"),  # a lone surrogate
    ('{"type": "reset", "data": {"seed": NaN}}', "INVALID_JSON"),
    ('{"type": "reset", "data": {"seed": -Infinity}}', "INVALID_JSON"),
    ('{"type": "reset", "data": {"seed": 1e999}}', "INVALID_JSON"),
    ('{"type": "step", "data": {"text": "' + "x" * (ACTION_MAX_LENGTH + 1) + '"}}', "VALIDATION_ERROR"),
    ("x" * (MAX_BODY_BYTES + 1), "TOO_LARGE"),
]


def ws_url(url: str, session_id: str | None = None) -> str:
    return "ws" + url[len("http") :] + "/ws" + (f"?session_id={session_id}" if session_id else "")


def call(ws: ClientConnection, frame: dict[str, Any]) -> dict[str, Any]:
    ws.send(json.dumps(frame))
    return json.loads(ws.recv(timeout=ANSWER_TIMEOUT_S))


def local_first_step() -> str:
    env = gym.make("sapo/Vault-v0")
    try:
        env.reset(seed=0, options={"task_index": 3})
        return env.step(LOOK["text"])[0]
    finally:
        env.close()


@pytest.mark.timeout(180)
def test_every_hostile_frame_gets_an_error_frame_and_the_session_plays_on() -> None:
    with served("sapo/Vault-v0", "--max-sessions", "2") as url:
        with connect(ws_url(url), max_size=None, open_timeout=ANSWER_TIMEOUT_S) as ws:
            assert (
                call(ws, {"type": "reset", "data": {"seed": 0, "options": {"task_index": 3}}})["type"] == "observation"
            )
            for frame, code in HOSTILE:
                ws.send(frame)
                answer = json.loads(ws.recv(timeout=ANSWER_TIMEOUT_S))
                assert answer["type"] == "error" and set(answer) == {"type", "data"}, (frame[:60], answer)
                assert answer["data"]["code"] == code and answer["data"]["message"], (frame[:60], answer)
            assert call(ws, {"type": "state"})["data"]["step_count"] == 0  # nothing above took a turn
            step = call(ws, {"type": "step", "data": LOOK})
            assert step["type"] == "observation" and step["data"]["observation"]["prompt"] == local_first_step()
            assert call(ws, {"type": "state"})["data"]["step_count"] == 1
            assert http("GET", f"{url}/sessions")[1]["active_sessions"] == 1  # the one session, all along
        # a frame over what the server reads at all drops that connection (1009), and only that one. Frames travel
        # uncompressed (the server offers no permessage-deflate), so the server refuses the frame at its header while
        # most of its bytes are still in flight; its close then races them, and a TCP reset may discard the close
        # frame before the client reads it: the connection is dropped either way, with 1009 when the frame arrives
        rcvd = None
        with connect(ws_url(url), max_size=None, open_timeout=ANSWER_TIMEOUT_S) as ws:
            with pytest.raises(ConnectionClosed) as dropped:
                ws.send("x" * (FRAME_READ_LIMIT + 1))
                ws.recv(timeout=ANSWER_TIMEOUT_S)
            rcvd = dropped.value.rcvd
        assert rcvd is None or rcvd.code == 1009, rcvd
        with connect(ws_url(url), open_timeout=ANSWER_TIMEOUT_S) as ws:
            assert call(ws, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"


@pytest.mark.timeout(120)
def test_an_http_body_with_a_lone_surrogate_is_400_and_the_session_lives_on() -> None:
    with served("sapo/Vault-v0") as url:
        sid = http("POST", f"{url}/sessions")[1]["session_id"]
        assert http("POST", f"{url}/sessions/{sid}/reset", '{"seed": 0}')[0] == 200
        status, body = http("POST", f"{url}/sessions/{sid}/step", '{"action": {"text": "\\ud800 look"}}')
        assert status == 400 and body["error"] == "not_json" and "surrogate" in body["message"]
        assert http("POST", f"{url}/sessions/{sid}/step", json.dumps({"action": LOOK}))[0] == 200


def wait_closed(ws: ClientConnection, bound_s: float, keep_alive: ClientConnection | None = None) -> Any | None:
    """Wait until the server closes ``ws``, at most ``bound_s``; its close frame, or None. Meanwhile ``keep_alive``
    sends a ``state`` frame at every poll (``bound_s / 40``)."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        try:
            frame = ws.recv(timeout=bound_s / 40)
            raise AssertionError(f"an idle socket got a frame: {frame[:200]!r}")
        except TimeoutError:
            if keep_alive is not None:
                assert call(keep_alive, {"type": "state"})["type"] == "state"
        except ConnectionClosed as closed:
            return closed.rcvd
    return None


SLACK_BEFORE_S = 0.25
"""The server's idle timer starts once it has sent its answer, a loopback transit before the client notes the time."""
LATE_BY_S = 10.0
"""Only says the close came (a loaded 2-core machine may deliver it late); the old server never closed the socket."""


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_idle_sockets_are_closed_and_free_their_sessions_so_max_sessions_is_not_held() -> None:
    timeout_s = 2.0
    expiry_s = timeout_s + reap_interval(timeout_s)  # the documented bound: 1.25x the timeout
    with served("sapo/Vault-v0", "--max-sessions", "2", "--idle-timeout", str(timeout_s)) as url:
        sid = http("POST", f"{url}/sessions")[1]["session_id"]
        with (
            connect(ws_url(url), open_timeout=ANSWER_TIMEOUT_S) as own,
            connect(ws_url(url, sid), open_timeout=ANSWER_TIMEOUT_S) as attached,
        ):
            assert http("POST", f"{url}/sessions")[0] == 503  # full: one socket's own session, one HTTP session
            own_start = time.monotonic()
            assert call(own, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"
            idle_since = time.monotonic()  # from the last frame sent: the server's timer starts after it arrives
            assert call(attached, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"
            # the attached socket idles while the other one sends a frame every poll
            closed = wait_closed(attached, 4 * expiry_s, keep_alive=own)
            idle_s = time.monotonic() - idle_since
            assert closed is not None, f"the idle attached socket is still open after {idle_s:.1f} s"
            assert closed.code == IDLE_CLOSE_CODE and "idle" in closed.reason
            assert timeout_s - SLACK_BEFORE_S <= idle_s < timeout_s + LATE_BY_S, idle_s
            # its HTTP session went with it: the slot is free again
            assert http("POST", f"{url}/sessions/{sid}/reset", "{}")[0] == 404
            status, body = http("POST", f"{url}/sessions")
            assert status == 201, body
            # frames are activity: the busy socket plays on, long past the timeout since its reset
            while time.monotonic() < own_start + 2 * expiry_s:
                assert call(own, {"type": "state"})["type"] == "state"
                time.sleep(reap_interval(timeout_s) / 4)
            idle_since = time.monotonic()
            assert call(own, {"type": "step", "data": LOOK})["type"] == "observation"
            closed = wait_closed(own, 4 * expiry_s)
            idle_s = time.monotonic() - idle_since
            assert closed is not None and closed.code == IDLE_CLOSE_CODE, f"still open after {idle_s:.1f} s"
            assert timeout_s - SLACK_BEFORE_S <= idle_s < timeout_s + LATE_BY_S, idle_s
        deadline = time.monotonic() + 4 * expiry_s  # the new HTTP session expires too (no socket): nothing is held
        while http("GET", f"{url}/sessions")[1]["active_sessions"] and time.monotonic() < deadline:
            time.sleep(reap_interval(timeout_s) / 4)
        assert http("GET", f"{url}/sessions")[1]["active_sessions"] == 0
