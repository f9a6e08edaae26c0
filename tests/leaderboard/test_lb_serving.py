"""Stopping ``sapo-gym leaderboard serve``: the requests in service finish and answer, nothing new is taken.

On SIGTERM the command stops nginx gracefully (it closes its port and idle connections, finishes the requests in
progress) and only then gunicorn, so a bundle still uploading gets its answer from the app."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

import pytest

from tests.support.leaderboard import alive, descendants

BODY = 4000
HEADER_TIMEOUT = 3.0


def _upload_started(port: int, token: str) -> socket.socket:
    """A submission whose headers and half its body are in: the server is reading the body when the signal comes."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=20)
    conn.sendall(
        (
            f"POST /api/v1/submissions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {BODY}\r\n\r\n"
        ).encode()
        + b"{" * (BODY // 2)
    )
    return conn


def _answer(conn: socket.socket) -> bytes:
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    return data


def test_a_stopped_server_answers_the_requests_in_service_and_refuses_new_ones(
    tmp_path: Path, make_server, token_for
) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'lb.db'}"
    token = token_for(db)
    server = make_server(db, "--no-verify", "--drain-seconds", "20", "--header-timeout", str(HEADER_TIMEOUT)).start()
    processes = [server.proc.pid, *descendants(server.proc.pid)]
    uploads = [_upload_started(server.port, token) for _ in range(2)]
    idle = socket.create_connection(("127.0.0.1", server.port), timeout=20)  # connected, never sends a request
    connected = time.monotonic()
    time.sleep(0.5)  # the server has read the headers and waits in the bodies
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    server.proc.send_signal(signal.SIGTERM)  # a repeated signal does not cut the drain
    time.sleep(0.5)
    with pytest.raises(OSError):  # refused (nothing listens any more), or reset at once
        probe = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        probe.sendall(b"GET /api/v1/boards HTTP/1.1\r\nHost: x\r\n\r\n")
        if not probe.recv(1):
            raise ConnectionResetError("closed without an answer")
    # closed unanswered at its header deadline (nginx keeps a connection that has not sent a request until then), not
    # kept until the drain's end; the margin only bounds a late close on a loaded machine
    assert _answer(idle) == b"" and time.monotonic() - connected < HEADER_TIMEOUT + 5
    for conn in uploads:
        conn.sendall(b"{" * (BODY - BODY // 2))  # the rest of the body, after the signal
        answer = _answer(conn)
        assert answer.startswith(b"HTTP/1.1 400 ") and b"invalid_submission" in answer, answer[:300]
    assert server.proc.wait(30) == 0
    assert not [pid for pid in processes if alive(pid)]
