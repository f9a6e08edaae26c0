"""The env server's deadline per request body (issue #25: a deadline per request, not per read), on 127.0.0.1.

A client that drips its body a byte at a time is answered 408 once ``--body-timeout`` has passed since its
headers, on every HTTP route (ours and OpenEnv's), for a Content-Length body and a chunked one; a body past
the read limit is a 413; an honest request is served as before.
"""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urlsplit

import pytest

pytest.importorskip("openenv.core.env_server")

from sapo_gym.remote.body_deadline import BodyDeadline  # noqa: E402
from sapo_gym.remote.websocket import FRAME_READ_LIMIT  # noqa: E402
from tests.support.remote import http, served  # noqa: E402

DEADLINE_S = 1.0
DRIP_EVERY_S = 0.2
ANSWER_BY_S = DEADLINE_S + 15.0
"""Latest an answer may come (a lost answer fails, never hangs); the old server never answered at all."""


def _drip(url: str, path: str, chunked: bool, out: dict[str, tuple[float, bytes]]) -> None:
    """Send headers, then one body byte every DRIP_EVERY_S; record (seconds to the answer, its status line)."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=ANSWER_BY_S) as sock:
        framing = b"Transfer-Encoding: chunked\r\n" if chunked else b"Content-Length: 1000\r\n"
        sock.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + framing + b"\r\n")
        start = time.monotonic()
        sock.settimeout(DRIP_EVERY_S)
        answer = b""
        while time.monotonic() - start < ANSWER_BY_S and not answer:
            try:
                sock.sendall(b"1\r\n{\r\n" if chunked else b"{")
                answer = sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:  # the server closed the connection after answering
                break
        out[f"{path} {'chunked' if chunked else 'length'}"] = (time.monotonic() - start, answer.split(b"\r\n", 1)[0])


@pytest.mark.slow
def test_a_dripping_body_is_408_after_the_deadline_on_every_route_and_honest_requests_pass() -> None:
    with served("sapo/Vault-v0", "--body-timeout", str(DEADLINE_S), "--max-sessions", "4") as url:
        results: dict[str, tuple[float, bytes]] = {}
        threads = [threading.Thread(target=_drip, args=(url, path, chunked, results))
                   for path in ("/sessions", "/reset", "/step") for chunked in (False, True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(ANSWER_BY_S + 5)
        assert len(results) == 6, results
        for what, (seconds, status) in results.items():
            assert status.endswith(b"408 Request Timeout"), (what, status)
            assert DEADLINE_S <= seconds < ANSWER_BY_S, (what, seconds)
        status, body = http("POST", url + "/sessions", "{}")
        assert status == 201, body
        sid = body["session_id"]
        assert http("POST", f"{url}/sessions/{sid}/reset", '{"seed": 0}')[0] == 200
        status, body = http("POST", url + "/sessions", b"x" * (FRAME_READ_LIMIT + 1))
        assert status == 413 and body["error"] == "too_large", body


def test_the_middleware_hands_the_route_the_body_it_read() -> None:
    import asyncio

    seen: list[bytes] = []

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def run() -> list[dict]:  # type: ignore[type-arg]
        incoming = [{"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.request", "body": b"c"}]
        sent: list[dict] = []  # type: ignore[type-arg]

        async def receive():  # type: ignore[no-untyped-def]
            return incoming.pop(0)

        async def send(message):  # type: ignore[no-untyped-def]
            sent.append(message)

        await BodyDeadline(app, 5.0, 10)({"type": "http"}, receive, send)
        return sent

    sent = asyncio.run(run())
    assert seen == [b"abc"] and sent[0]["status"] == 200


def _status(url: str) -> int:
    """The status of a GET (uvicorn's own 503 has a plain-text body)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


@pytest.mark.slow
def test_connections_past_max_connections_are_503_and_served_again_after() -> None:
    """Each connection costs the server; past ``--max-connections`` held at once a request is answered 503."""
    with served("sapo/Vault-v0", "--max-sessions", "2", "--max-connections", "2", "--body-timeout", "60") as url:
        parts = urlsplit(url)
        held = [socket.create_connection((parts.hostname, parts.port), timeout=30) for _ in range(2)]
        try:
            for sock in held:  # headers in, body still to come: each holds its connection
                sock.sendall(b"POST /sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
            deadline = time.monotonic() + 30
            status = 0
            while time.monotonic() < deadline and status != 503:  # bounded
                status = _status(url + "/health")
                time.sleep(0.1)
            assert status == 503
        finally:
            for sock in held:
                sock.close()
        deadline = time.monotonic() + 30
        while (status := _status(url + "/health")) != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status == 200
