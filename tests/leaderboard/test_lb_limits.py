"""Cost limits on the served board (gunicorn behind nginx): chunked uploads past the limit, malformed chunking,
stalled clients, the per-token rate limit (and the limiter's arithmetic, in memory and in the database, shared by
two apps)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
import requests

from leaderboard.server.limits import RateLimited, RateLimiter
from tests.support.leaderboard import VAULT, body, named, pg_database


def _chunked_post(port: int, token: str, payload: bytes, chunk: int = 1 << 16, timeout: float = 30.0) -> bytes:
    """POST ``payload`` with ``Transfer-Encoding: chunked`` over a raw socket; the response bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(
            (
                f"POST /api/v1/submissions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            ).encode()
        )
        try:
            for start in range(0, len(payload), chunk):
                piece = payload[start : start + chunk]
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before the whole body is sent
        response = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                data = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not data:
                break
            response += data
        return response


@pytest.fixture
def limited_server(tmp_path: Path, make_server, token_for):  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'limits.db'}"
    token = token_for(db)
    server = make_server(
        db,
        "--no-verify",
        "--max-upload-mb",
        "1",
        "--client-timeout",
        "1",
        "--rate-per-minute",
        "1",
        "--rate-burst",
        "4",
    ).start()
    return server, token


def test_a_chunked_upload_over_the_limit_is_413_and_under_it_is_accepted(limited_server, random_bundle) -> None:  # type: ignore[no-untyped-def]
    server, token = limited_server
    small = body(named(random_bundle, "chunked small"))
    assert len(small) < (1 << 20)
    ok = _chunked_post(server.port, token, small)
    assert ok.startswith(b"HTTP/1.1 201"), ok[:300]
    big = body(named(random_bundle, "chunked big")).replace(
        b'"agent": {', b'"agent": {"pad": "' + b"x" * (3 << 19) + b'", '
    )
    answer = _chunked_post(server.port, token, big)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert b"too large" in answer
    names = [
        s["agent"]["name"] for s in requests.get(server.url + "/api/v1/submissions", timeout=10).json()["submissions"]
    ]
    assert names == ["chunked small"]


def _raw_chunked_post(port: int, token: str, raw_body: bytes, path: str = "/api/v1/submissions") -> bytes:
    """POST ``raw_body`` as it is (chunk framing included, well-formed or not), then half-close; the response."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            (
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            ).encode()
            + raw_body
        )
        sock.shutdown(socket.SHUT_WR)  # a truncated body ends here: the server reads end of stream mid-chunk
        response = b""
        while chunk := sock.recv(65536):
            response += chunk
        return response


@pytest.mark.parametrize(
    "raw_body, status",
    [
        (b"zz\r\nabc\r\n0\r\n\r\n", b"400"),
        (b"5\r\nab", b""),
        (b"ffffffffffffffffffff\r\nx", b"400"),
        (b"3\r\nabcde0\r\n\r\n", b"400"),
    ],
    ids=["bad size", "truncated", "huge size", "chunk longer than its size"],
)
def test_malformed_chunking_is_refused_before_the_app_on_every_endpoint(
    limited_server, raw_body: bytes, status: bytes
) -> None:  # type: ignore[no-untyped-def]
    """nginx de-chunks: bad framing is its 400; a body the client cut off (end of stream mid-chunk) is dropped
    unanswered. Neither reaches the app."""
    server, token = limited_server
    for path in ("/api/v1/submissions", "/api/v1/live/runs"):
        answer = _raw_chunked_post(server.port, token, raw_body, path)
        assert answer.split(b"\r\n", 1)[0].split(b" ")[1:2] == ([status] if status else []), (path, answer[:300])
    assert requests.get(server.url + "/api/v1/submissions", timeout=10).json()["submissions"] == []


def test_a_stalled_body_is_disconnected_after_the_client_timeout(limited_server) -> None:  # type: ignore[no-untyped-def]
    server, _ = limited_server
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"POST /api/v1/submissions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{")
        start = time.monotonic()
        try:
            while sock.recv(65536):
                pass
        except ConnectionResetError:  # reset_timedout_connection: a timed-out connection is reset, not closed
            pass
        waited = time.monotonic() - start
    # closed by the server at --client-timeout 1 (not before: the timer's granularity is a millisecond), long
    # before our 10 s socket timeout
    assert 0.99 <= waited < 8, waited
    assert requests.get(server.url + "/api/v1/boards", timeout=10).status_code == 200  # and it still serves


def test_the_rate_limit_answers_429_with_retry_after(limited_server, random_bundle) -> None:  # type: ignore[no-untyped-def]
    server, token = limited_server
    headers = {"Authorization": f"Bearer {token}"}
    answers = [
        requests.post(
            server.url + "/api/v1/submissions",
            data=body(named(random_bundle, f"rate {i}")),
            headers=headers,
            timeout=30,
        )
        for i in range(5)
    ]
    # a burst of 4 units: three small bundles (1.02 each) pass; the fourth needs 0.08 more units, which the
    # bucket refills (1 a minute) only 4.8 s after the first request, so a slow machine cannot let it through
    # (at 6 a minute it took 0.8 s: five uploads on a loaded machine can take that long)
    assert [r.status_code for r in answers[:3]] == [201] * 3
    assert answers[3].status_code == 429 and answers[4].status_code == 429
    assert "rate limit" in answers[3].json()["message"] and 1 <= int(answers[3].headers["Retry-After"]) <= 20
    names = [
        s["agent"]["name"] for s in requests.get(server.url + "/api/v1/submissions", timeout=10).json()["submissions"]
    ]
    assert sorted(names) == ["rate 0", "rate 1", "rate 2"]


@pytest.fixture(params=["memory", "sqlite"])
def limiter_store(request, tmp_path: Path):  # type: ignore[no-untyped-def]
    """None (buckets in memory) or a store on a fresh SQLite file: the limiter's two paths."""
    if request.param == "memory":
        yield None
        return
    from leaderboard.server.store import Store

    store = Store(f"sqlite:///{tmp_path / 'buckets.db'}")
    yield store
    store.engine.dispose()


def test_rate_limiter_arithmetic(limiter_store) -> None:  # type: ignore[no-untyped-def]
    limiter = RateLimiter(per_minute=60.0, burst=5.0, store=limiter_store)
    for _ in range(5):
        limiter.charge(1, 1.0, now=100.0)
    with pytest.raises(RateLimited) as info:
        limiter.charge(1, 1.0, now=100.0)
    assert info.value.retry_after == 1  # 1 unit a second
    limiter.charge(2, 1.0, now=100.0)  # another token has its own bucket
    limiter.charge(1, 1.0, now=101.0)  # refilled
    with pytest.raises(RateLimited):
        limiter.charge(1, 2.0, now=101.5)
    limiter.charge(1, 2.0, now=103.0)  # the refusal took nothing and kept the refill: 2 units at 103 s
    with pytest.raises(RateLimited):
        limiter.charge(1, 1.0, now=90.0)  # a clock that went back refills nothing
    limiter.charge(1, 1.0, now=91.0)  # and refilling resumes from where it went
    assert RateLimiter.cost(64 << 20) == 65.0
    RateLimiter(per_minute=0, store=limiter_store).charge(1, 1e9)  # disabled


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_db(request, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A database URL two apps (two server processes) can share: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
        return
    with pg_database(request.getfixturevalue("pg_cluster")) as url:
        yield url


def test_two_apps_on_one_database_share_a_token_bucket(shared_db: str, random_bundle) -> None:  # type: ignore[no-untyped-def]
    from leaderboard.server.app import ServerConfig, create_app

    # 2.5 units: two small bundles (1.02 units each) pass, a third does not; 0.01 units a minute refills 0.005 units
    # in 30 s, far from the 0.54 the third one lacks
    config = ServerConfig(db_url=shared_db, boards=(VAULT,), verify=False, rate_per_minute=0.01, rate_burst=2.5)
    apps = [create_app(config), create_app(config)]
    try:
        _, token = apps[0].extensions["sapo_gym"]["store"].create_token("shared")
        headers = {"Authorization": f"Bearer {token}"}
        first, second = (app.test_client() for app in apps)
        spent = [
            first.post("/api/v1/submissions", data=body(named(random_bundle, f"a {i}")), headers=headers).status_code
            for i in range(2)
        ]
        refused = second.post("/api/v1/submissions", data=body(named(random_bundle, "b 0")), headers=headers)
        assert spent == [201, 201]
        assert refused.status_code == 429, refused.get_json()  # in memory, app B had a full bucket of its own
        assert int(refused.headers["Retry-After"]) > 60
    finally:
        for app in apps:
            app.extensions["sapo_gym"]["store"].engine.dispose()


def test_concurrent_charges_from_two_limiters_on_postgresql_pass_exactly_the_burst(pg_cluster: str) -> None:
    from leaderboard.server.store import Store

    threads, tries, burst = 8, 10, 20
    with pg_database(pg_cluster) as url:
        stores = [Store(url), Store(url)]  # two engines: two server processes' connection pools
        # 0.001 units a minute: the whole test (seconds) refills under 0.001 units, so exactly `burst` charges of 1 pass
        limiters = [RateLimiter(per_minute=0.001, burst=float(burst), store=s) for s in stores]
        accepted, refused, failed = [], [], []
        start = threading.Barrier(threads)

        def charge(limiter: RateLimiter) -> None:
            start.wait(timeout=30)
            for _ in range(tries):
                try:
                    limiter.charge(7, 1.0)
                    accepted.append(1)
                except RateLimited:
                    refused.append(1)
                except Exception as exc:  # noqa: BLE001 - a database error fails the test, below
                    failed.append(repr(exc))

        workers = [threading.Thread(target=charge, args=(limiters[i % 2],)) for i in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join(timeout=120)  # 80 one-row transactions: seconds; the bound only keeps a hang from hanging the suite
        for s in stores:
            s.engine.dispose()
    assert not failed, failed[:3]
    assert not any(t.is_alive() for t in workers)
    assert (len(accepted), len(refused)) == (burst, threads * tries - burst)


def test_the_submit_client_waits_out_a_429(tmp_path: Path, make_server, token_for, random_bundle) -> None:  # type: ignore[no-untyped-def]
    from leaderboard.client import SubmitError, submit_bundle

    db = f"sqlite:///{tmp_path / 'retry.db'}"
    token = token_for(db)
    server = make_server(db, "--no-verify", "--rate-per-minute", "60", "--rate-burst", "2").start()
    receipts = [
        submit_bundle(body(named(random_bundle, f"retry {i}")), server.url, token) for i in range(3)
    ]  # the third waits ~1 s
    assert [r.duplicate for r in receipts] == [False] * 3
    with pytest.raises(SubmitError, match="HTTP 429"):
        for i in range(3, 8):
            submit_bundle(body(named(random_bundle, f"retry {i}")), server.url, token, retries=0)
