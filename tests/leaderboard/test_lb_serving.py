"""Stopping ``sapo-gym leaderboard serve``: the requests in service finish and answer, nothing new is taken.

werkzeug's server cut every connection thread at exit, and a single-process ``serve`` died on SIGTERM at once: a
bundle upload in progress got a reset instead of its answer."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import pytest

from tests.support.leaderboard import alive

BODY = 4000


def _upload_started(port: int, token: str) -> socket.socket:
    """A submission whose headers and half its body are in: the server is reading the body when the signal comes."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=20)
    conn.sendall((f"POST /api/v1/submissions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {BODY}\r\n\r\n").encode() + b"{" * (BODY // 2))
    return conn


def _answer(conn: socket.socket) -> bytes:
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    return data


@pytest.mark.parametrize("extra", [(), ("--workers", "2")], ids=["one-process", "workers"])
def test_a_stopped_server_answers_the_requests_in_service_and_refuses_new_ones(
        tmp_path: Path, make_server, token_for, extra: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'lb.db'}"
    token = token_for(db)
    server = make_server(db, "--no-verify", "--drain-seconds", "20", *extra).start()
    uploads = [_upload_started(server.port, token) for _ in range(2)]
    idle = socket.create_connection(("127.0.0.1", server.port), timeout=20)  # connected, never sends a request
    time.sleep(0.5)  # the server has read the headers and waits in the bodies
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    if extra:  # a group's signal reaches each worker a second time: it must not cut the drain
        for pid in server.worker_pids():
            if alive(pid):
                os.kill(pid, signal.SIGTERM)
    else:
        server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    with pytest.raises(OSError):  # refused (nothing listens any more), or reset at once
        probe = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        probe.sendall(b"GET /api/v1/boards HTTP/1.1\r\nHost: x\r\n\r\n")
        if not probe.recv(1):
            raise ConnectionResetError("closed without an answer")
    started = time.monotonic()
    assert _answer(idle) == b"" and time.monotonic() - started < 5  # closed, not kept until the drain's end
    for conn in uploads:
        conn.sendall(b"{" * (BODY - BODY // 2))  # the rest of the body, after the signal
        answer = _answer(conn)
        assert answer.startswith(b"HTTP/1.1 400 ") and b"invalid_submission" in answer, answer[:300]
    assert server.proc.wait(15) == 0
