"""The board as deployed (``sapo-gym leaderboard serve``: gunicorn behind the shipped nginx config) under the hostile
classes: slow headers, slow bodies, hundreds of held sockets, huge and chunked bodies past the limit and a connection
flood, all at once, while honest requests keep being answered; and a client past its connection bound.

The server has one gunicorn worker with one thread: a single slow client reaching the app would stall every
request behind it, so every honest answer shows that nginx kept the attackers away from the app."""

from __future__ import annotations

import time
from pathlib import Path

from tests.support.hostile_clients import HOST, Attack, honest
from tests.support.leaderboard import body, named

HEADER_TIMEOUT = 3.0
CLIENT_TIMEOUT = 5.0
DRIP_EVERY = 0.5
"""A byte every half second: inside every per-read timeout (the slow body is never cut for stalling)."""
LATE = 15.0
"""How late past its deadline a connection may be closed, or an honest answer come, on a loaded 2-core machine
(the server's deadlines have millisecond timers; this only bounds the wait)."""


def test_honest_requests_are_answered_while_every_attack_runs(
    tmp_path: Path, make_server, token_for, random_bundle
) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'hostile.db'}"
    token = token_for(db)
    server = make_server(
        db,
        "--no-verify",
        "--workers",
        "1",
        "--threads",
        "1",
        "--max-upload-mb",
        "1",
        "--header-timeout",
        str(HEADER_TIMEOUT),
        "--client-timeout",
        str(CLIENT_TIMEOUT),
        "--rate-per-minute",
        "0",
    ).start()
    attack = Attack(
        server.port, "/api/v1/submissions", f"Authorization: Bearer {token}\r\n", every=DRIP_EVERY, seconds=60
    ).start()
    answers = []
    try:
        time.sleep(1.0)  # every attacker is connected and at work
        for i in range(25):  # the issue's 25, from the attackers' own address and from another one
            source = HOST if i % 2 else "127.0.0.2"
            if i % 5 == 0:
                answers.append(
                    honest(
                        server.port,
                        "POST",
                        "/api/v1/submissions",
                        body(named(random_bundle, f"honest {i}")),
                        {"Authorization": f"Bearer {token}"},
                        source=source,
                    )
                )
            else:
                answers.append(honest(server.port, "GET", "/api/v1/boards", source=source))
        bodies_ended = [o for o in attack.outcomes if o.kind == "slow body"]  # an outcome is recorded when it ends
        attack.ended(("held", "slow headers"), 216, HEADER_TIMEOUT + LATE)  # bounded: the assertions below say why not
    finally:
        outcomes = attack.stop()
    assert [a.status for a in answers] == [201 if i % 5 == 0 else 200 for i in range(25)], [a.body for a in answers]
    assert max(a.seconds for a in answers) < LATE, [round(a.seconds, 2) for a in answers]
    by_kind: dict[str, list] = {}
    for o in outcomes:
        by_kind.setdefault(o.kind, []).append(o)
    assert {k: len(v) for k, v in by_kind.items()} == {
        "slow headers": 16,
        "slow body": 16,
        "held": 200,
        "huge length": 4,
        "huge chunked": 4,
        "flood": 1,
    }
    for o in by_kind["held"] + by_kind["slow headers"]:  # cut at the header deadline, however the bytes trickle
        assert (
            o.closed
            and not o.answer.startswith(b"HTTP/1.1 2")
            and HEADER_TIMEOUT - 0.1 <= o.seconds < HEADER_TIMEOUT + LATE
        ), o
    for o in by_kind["huge length"] + by_kind["huge chunked"]:  # refused at the limit, with a JSON reason
        assert o.answer.startswith(b"HTTP/1.1 413") and b'"too_large"' in o.answer, o
    assert not bodies_ended  # every slow body was still being held (by nginx) while the honest requests ran
    assert by_kind["flood"][0].answer == b"300"
    # nothing the attackers sent reached the app: the honest submissions are all it stored
    listed = honest(server.port, "GET", "/api/v1/submissions").body["submissions"]
    assert sorted(s["agent"]["name"] for s in listed) == sorted(f"honest {i}" for i in range(0, 25, 5))


def test_a_client_past_its_connection_bound_is_503_at_once_and_other_clients_are_served(
    tmp_path: Path, make_server
) -> None:  # type: ignore[no-untyped-def]
    """``--max-connections-per-client``: connections of one address with a request in progress (here slow bodies);
    one more is a 503 with ``Retry-After`` at once, another address is served, and the address is served again
    once its connections end."""
    server = make_server(
        f"sqlite:///{tmp_path / 'conn.db'}",
        "--no-verify",
        "--max-connections-per-client",
        "4",
        "--client-timeout",
        "60",
    ).start()
    attack = Attack(
        server.port,
        "/api/v1/submissions",
        slow_headers=0,
        slow_bodies=6,
        held=0,
        huge=0,
        flood=0,
        every=DRIP_EVERY,
        seconds=60,
    ).start()
    try:
        deadline = time.monotonic() + 30
        while len(attack.outcomes) < 2 and time.monotonic() < deadline:  # bounded: two of the six are refused
            time.sleep(0.1)
        busy = honest(server.port, "GET", "/api/v1/boards", source=HOST)
        other = honest(server.port, "GET", "/api/v1/boards")
    finally:
        outcomes = attack.stop()
    refused = [o for o in outcomes if o.answer.startswith(b"HTTP/1.1 503")]
    assert len(refused) == 2 and all(o.seconds < LATE for o in refused), outcomes
    assert busy.status == 503 and busy.headers["Retry-After"] == "1" and busy.body["error"] == "busy", busy
    assert other.status == 200
    deadline = time.monotonic() + 30
    while (
        again := honest(server.port, "GET", "/api/v1/boards", source=HOST)
    ).status != 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert again.status == 200 and again.body["boards"]  # the board's own answer, not the proxy's
