"""The env server's load generator, against ``sapo-gym env serve`` on 127.0.0.1 (nginx in front): both clients play
expert episodes to the step bound and report the row; a refused session is counted as an error, not lost."""

from __future__ import annotations

import asyncio
import platform
import sys
import time

import pytest

pytest.importorskip("openenv.core.env_server")
picows = pytest.importorskip("picows")

from openenv.core.utils import convert_to_ws_url  # noqa: E402

from benchmarks import env_server_load  # noqa: E402
from benchmarks.env_workers import interpreter  # noqa: E402
from benchmarks.picows_sessions import MAX_ANSWER_BYTES, Session, open_sessions  # noqa: E402
from tests.support.remote import served  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("client", sorted(env_server_load.CLIENTS))
def test_each_client_plays_to_the_step_bound_without_errors(client: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--envs", "alfworld-mini", "--sessions", "3", "--steps", "60", "--seconds", "60", "--client", client]
    assert env_server_load.main(argv) == 0
    row = capsys.readouterr().out.strip().splitlines()[-1].strip("| ").split(" | ")
    columns = dict(zip(env_server_load.COLUMNS, row, strict=True))
    assert columns["sessions"] == "3" and columns["errors"] == "0", row
    # every session stops at the first answer after the bound: at most one step a session past it
    assert 60 <= int(columns["steps"]) <= 60 + 3, row
    # the kernel's part is part of the server's CPU (both read from the same /proc counters, rounded to 0.01 / 0.001)
    total = float(columns["server CPU ms / step (uvicorn + nginx)"].split()[0])
    assert 0 <= float(columns["of it, the kernel's"]) <= total + 0.005, row


def test_each_server_python_gets_its_row_named_by_its_build(capsys: pytest.CaptureFixture[str]) -> None:
    """``--server-python`` twice the same and ``--scheduling`` both policies: four servers, one after the other, each
    row naming its interpreter and policy."""
    version, linked, path = interpreter()
    assert (version, path) == (platform.python_version(), sys.executable) and linked in ("shared", "static")
    argv = ["--envs", "alfworld-mini", "--sessions", "2", "--steps", "20", "--seconds", "60"]
    pythons = f"{sys.executable},{sys.executable}"
    assert env_server_load.main([*argv, "--server-python", pythons, "--scheduling", "batch,other"]) == 0
    out = capsys.readouterr().out
    assert out.count(f"server: Python {version} (libpython {linked}): {path}") == 2
    rows = [line.strip("| ").split(" | ") for line in out.strip().splitlines()[-4:]]
    columns = [dict(zip(env_server_load.COLUMNS, row, strict=True)) for row in rows]
    assert [c["scheduling"] for c in columns] == ["batch", "other", "batch", "other"], rows
    for c in columns:
        assert c["server Python"] == f"{version} ({linked})" and c["errors"] == "0", c


class _Load:
    def __init__(self, steps: int, seconds: float):
        self.target, self.deadline = steps, time.monotonic() + seconds
        self.steps = self.resets = 0
        self.latencies: list[float] = []
        self.errors: list[str] = []

    def over(self) -> bool:
        return self.steps >= self.target or time.monotonic() >= self.deadline


async def _play(url: str, sessions: int, load: _Load) -> list[int]:
    connected: list[int] = []
    start, pending = await open_sessions(url, sessions, load, connected, env_server_load.action_text, 60.0)
    deadline = time.monotonic() + 60.0
    while len(connected) + len(load.errors) < sessions and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    start()
    await asyncio.wait_for(asyncio.gather(*pending), 60.0)
    return connected


def test_a_refused_session_is_an_error_and_the_others_play_on() -> None:
    with served("sapo/ALFWorld-Mini-v0", "--max-sessions", "1") as url:
        load = _Load(steps=30, seconds=60.0)
        connected = asyncio.run(_play(convert_to_ws_url(url) + "/ws", 2, load))
    assert len(connected) == 1 and len(load.errors) == 1, load.errors
    assert "CAPACITY_REACHED" in load.errors[0]
    assert load.steps == len(load.latencies) == 30 and load.resets >= 1
    assert all(0.0 < s < 60.0 for s in load.latencies)


class _Frame:
    def __init__(self, payload: bytes, fin: bool = True, continuation: bool = False):
        self.payload, self.fin = payload, fin
        self.msg_type = picows.WSMsgType.CONTINUATION if continuation else picows.WSMsgType.TEXT

    def get_payload_as_bytes(self) -> bytes:
        return self.payload


class _Transport:
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.disconnected = False

    def send(self, msg_type: object, message: bytes) -> None:
        self.sent.append(message)

    def disconnect(self) -> None:
        self.disconnected = True


def _session() -> tuple[Session, _Transport, _Load, list[int]]:
    load, connected, transport = _Load(steps=10, seconds=60.0), [], _Transport()
    session = Session(0, load, connected, env_server_load.action_text)
    session.on_ws_connected(transport)  # sends its reset
    return session, transport, load, connected


def test_a_session_reads_a_fragmented_answer_and_refuses_malformed_or_endless_ones() -> None:
    session, transport, load, connected = _session()
    answer = b'{"type": "observation", "data": {"done": false, "observation": {"expert_action": "look"}}}'
    session.on_ws_frame(transport, _Frame(answer[:20], fin=False))
    session.on_ws_frame(transport, _Frame(answer[20:], continuation=True))
    assert connected == [0] and not load.errors and len(transport.sent) == 1  # the reset only: it waits for the start

    session, transport, load, _ = _session()
    session.on_ws_frame(transport, _Frame(b'{"type": "observation"'))  # not JSON
    assert transport.disconnected and "malformed" in load.errors[0]

    session, transport, load, _ = _session()
    session.playing = True
    session.on_ws_frame(transport, _Frame(b'{"type": "observation", "data": []}'))  # JSON, not an observation's shape
    assert transport.disconnected and "malformed" in load.errors[0]

    session, transport, load, _ = _session()
    chunk = b"x" * (1 << 20)
    for _ in range(MAX_ANSWER_BYTES // len(chunk) + 1):  # one frame past the bound, never a final one
        session.on_ws_frame(transport, _Frame(chunk, fin=False, continuation=True))
    assert transport.disconnected and "over" in load.errors[0] and session.size <= MAX_ANSWER_BYTES
