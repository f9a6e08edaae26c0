"""``sapo-gym env serve`` as deployed (uvicorn behind the shipped nginx config) on 127.0.0.1: honest requests are
answered while slow headers, slow bodies, held sockets, huge bodies and a connection flood run at once; uvicorn's
own bound on the connections it serves; and each client's own address reaching the app through nginx."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import pytest

pytest.importorskip("openenv.core.env_server")

from sapo_gym.remote.websocket import FRAME_READ_LIMIT  # noqa: E402
from tests.support.hostile_clients import HOST, Attack, honest  # noqa: E402
from tests.support.remote import served  # noqa: E402

HEADER_TIMEOUT = 3.0
LATE = 15.0
"""How late past its deadline a connection may be closed, or an honest answer come, on a loaded 2-core machine."""


def _port(url: str) -> int:
    return int(urlsplit(url).port or 0)


@pytest.mark.timeout(180)
def test_honest_requests_are_answered_while_every_attack_runs() -> None:
    with served(
        "sapo/Vault-v0", "--max-sessions", "4", "--header-timeout", str(HEADER_TIMEOUT), "--client-timeout", "5"
    ) as url:
        port = _port(url)
        attack = Attack(
            port, "/sessions", slow_headers=8, slow_bodies=8, held=100, huge=2, flood=200, every=0.5, seconds=60
        ).start()
        try:
            time.sleep(1.0)
            created = honest(port, "POST", "/sessions", b"{}")
            sid = created.body["session_id"]
            answers = [
                created,
                *(honest(port, "POST", f"/sessions/{sid}/reset", b'{"seed": 0}') for _ in range(5)),
                *(honest(port, "GET", "/health", source=HOST) for _ in range(5)),
            ]
            too_large = honest(port, "POST", "/sessions", b"x" * (FRAME_READ_LIMIT + 1))
            bodies_ended = [o for o in attack.outcomes if o.kind == "slow body"]  # an outcome is recorded when it ends
            attack.ended(("held", "slow headers"), 108, HEADER_TIMEOUT + LATE)
        finally:
            outcomes = attack.stop()
    assert [a.status for a in answers] == [201] + [200] * 10, [a.body for a in answers]
    assert max(a.seconds for a in answers) < LATE
    assert too_large.status == 413 and too_large.body["error"] == "too_large", too_large
    assert not bodies_ended  # held by nginx the whole time, never by uvicorn
    for o in outcomes:
        if o.kind in ("held", "slow headers"):  # cut at the header deadline, however the bytes trickle
            assert o.closed and HEADER_TIMEOUT - 0.1 <= o.seconds < HEADER_TIMEOUT + LATE, o
        elif o.kind.startswith("huge"):
            assert o.answer.startswith(b"HTTP/1.1 413"), o


def _websocket(port: int) -> socket.socket:
    """An open WebSocket to ``/ws`` (a session): one connection uvicorn serves for as long as it lasts."""
    sock = socket.create_connection((HOST, port), timeout=30)
    sock.sendall(
        b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    assert sock.recv(4096).startswith(b"HTTP/1.1 101"), "the WebSocket handshake passes through nginx"
    return sock


@pytest.mark.timeout(120)
def test_connections_past_max_connections_are_503_and_served_again_after() -> None:
    """``--max-connections``: what uvicorn serves at once (requests in progress and WebSockets); past it, 503."""
    with served("sapo/Vault-v0", "--max-sessions", "2", "--max-connections", "2") as url:
        port = _port(url)
        held = [_websocket(port) for _ in range(2)]
        try:
            busy = honest(port, "GET", "/health")
        finally:
            for sock in held:
                sock.close()
        deadline = time.monotonic() + 30
        while (again := honest(port, "GET", "/health")).status != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
    assert busy.status == 503
    assert again.status == 200


@pytest.mark.timeout(120)
def test_each_client_address_reaches_the_app_through_nginx() -> None:
    """The per-client session bound counts each address on its own (nginx's X-Forwarded-For, read by uvicorn), and a
    client cannot name another address for itself."""
    with served("sapo/Vault-v0", "--max-sessions", "4", "--max-sessions-per-client", "1") as url:
        port = _port(url)
        first = honest(port, "POST", "/sessions", b"{}", source="127.0.0.1")
        refused = honest(port, "POST", "/sessions", b"{}", source="127.0.0.1")
        spoofed = honest(port, "POST", "/sessions", b"{}", {"X-Forwarded-For": "203.0.113.9"}, source="127.0.0.1")
        other = honest(port, "POST", "/sessions", b"{}", source="127.0.0.2")
    assert first.status == 201 and other.status == 201, (first, other)
    for answer in (refused, spoofed):  # nginx replaces what a client says its address is
        assert answer.status == 429 and "client 127.0.0.1 already holds 1" in answer.body["message"], answer
