"""One bundle sent by two tokens: the second token gets a 409 however the two requests interleave, never
``200 {"duplicate": true}`` with the first token's id."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from leaderboard.server import names, provenance
from tests.support.leaderboard import body

_BOTH_LATE = ((provenance, "check_owner"), (names, "check"))
_OWNER_LATE = ((provenance, "check_owner"),)


def _late_check(monkeypatch: pytest.MonkeyPatch, late_checks: tuple = _BOTH_LATE) -> None:
    """The non-owner's first ``late_checks`` run before the owner's commit (they find no owner), as in a race;
    ``_OWNER_LATE``: the owner commits between the non-owner's ownership check and its name check."""
    for module, name in late_checks:
        real, calls = getattr(module, name), []

        def late(*args: Any, real: Any = real, calls: list[int] = calls) -> None:
            calls.append(1)
            if len(calls) > 1:
                real(*args)

        monkeypatch.setattr(module, name, late)


def _race(app: Any, bundle: dict[str, Any], monkeypatch: pytest.MonkeyPatch, late_checks: tuple = _BOTH_LATE) -> None:
    store, client = app.extensions["sapo_gym"]["store"], app.test_client()
    owner = {"Authorization": f"Bearer {store.create_token('owner')[1]}"}
    other = {"Authorization": f"Bearer {store.create_token('other')[1]}"}
    first = client.post("/api/v1/submissions", data=body(bundle), headers=owner)
    assert first.status_code == 201
    sequential = client.post("/api/v1/submissions", data=body(bundle), headers=other)
    assert sequential.status_code == 409 and sequential.json["error"] == "duplicate_episodes"
    with monkeypatch.context() as mp:
        _late_check(mp, late_checks)
        raced = client.post("/api/v1/submissions", data=body(bundle), headers=other)
    assert raced.status_code == 409 and raced.json["error"] == "duplicate_episodes", raced.json
    again = client.post("/api/v1/submissions", data=body(bundle), headers=owner)  # the owner's retry stays a duplicate
    assert again.status_code == 200 and again.json == {**again.json, "duplicate": True, "id": first.json["id"]}
    assert store.counts()["submissions"] == 1


@pytest.mark.parametrize("late_checks", [_BOTH_LATE, _OWNER_LATE], ids=["both-checks-late", "owner-check-late"])
def test_the_non_owner_of_a_raced_bundle_gets_409_on_sqlite(app, expert_bundle, monkeypatch, late_checks) -> None:  # type: ignore[no-untyped-def]
    _race(app, expert_bundle, monkeypatch, late_checks)


@pytest.mark.parametrize("late_checks", [_BOTH_LATE, _OWNER_LATE], ids=["both-checks-late", "owner-check-late"])
def test_the_non_owner_of_a_raced_bundle_gets_409_on_postgres(pg_app, expert_bundle, monkeypatch, late_checks) -> None:  # type: ignore[no-untyped-def]
    _race(pg_app, expert_bundle, monkeypatch, late_checks)


def test_two_tokens_sending_one_bundle_at_once_on_postgres(pg_app, expert_bundle) -> None:  # type: ignore[no-untyped-def]
    """Real threads released together, a few rounds: one token's 201, the other's 409, whoever wins."""
    store = pg_app.extensions["sapo_gym"]["store"]
    tokens = [{"Authorization": f"Bearer {store.create_token(f't{i}')[1]}"} for i in range(2)]
    for round_ in range(4):  # each round a new bundle (another command line) of the same work
        data = body({**expert_bundle, "evaluation": {**expert_bundle["evaluation"], "command": f"round {round_}"}})
        barrier, answers = threading.Barrier(2), []

        def send(auth: dict[str, str], data: bytes, barrier: threading.Barrier, answers: list) -> None:
            client = pg_app.test_client()
            barrier.wait(30)
            response = client.post("/api/v1/submissions", data=data, headers=auth)
            answers.append((response.status_code, (response.json or {}).get("error")))

        threads = [threading.Thread(target=send, args=(auth, data, barrier, answers)) for auth in tokens]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(answers, key=str) == [(201, None), (409, "duplicate_episodes")], answers
    assert store.counts()["submissions"] == 4
