"""Every dealing of a private board's tasks is on record under every token, and the *live · private* mark claims an
unseen split only when no other run (of any token) had been dealt its tasks before it ended."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from leaderboard import private
from leaderboard.server.db import LivePlan
from tests.support.private_live import SEED, TASKS, WEBSHOP, deal, play, start


@pytest.fixture
def private_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from leaderboard.server.app import ServerConfig, create_app

    monkeypatch.setattr(private, "ACTIVE", None)  # the app activates the seed; the next test starts without it

    app = create_app(
        ServerConfig(
            db_url=f"sqlite:///{tmp_path / 'lb.db'}",
            boards=("sapo/Vault-v0:test",),
            verify=False,
            private_seed=SEED,
            private_envs=(WEBSHOP,),
            private_tasks=TASKS,
        )
    )
    yield app
    app.extensions["sapo_gym"]["store"].engine.dispose()


def _auth(app: Any, name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {app.extensions['sapo_gym']['store'].create_token(name)[1]}"}


def _expire(app: Any, run_id: int) -> None:
    """The run goes idle past its limit (its clock set back, no waiting) and the sweep abandons it."""
    store, live = app.extensions["sapo_gym"]["store"], app.extensions["sapo_gym"]["live"]
    with store.session.begin() as s:
        s.execute(
            update(LivePlan)
            .where(LivePlan.run_id == run_id)
            .values(touched_at=time.time() - 10 * live.limits.idle_seconds)
        )
    assert live.sweep(run_id) == 1


def test_a_second_tokens_run_after_a_harvest_is_not_marked_unseen(private_app) -> None:  # type: ignore[no-untyped-def]
    client = private_app.test_client()
    harvester, second = _auth(private_app, "harvester"), _auth(private_app, "second")
    run = start(client, harvester, name="harvest", parallel=TASKS)
    for _ in range(run["episodes"]):  # every goal of the split seen at once, then the run left to expire
        deal(client, harvester, run["run_id"])
    _expire(private_app, run["run_id"])
    sid = play(client, second, SEED, name="second agent")["id"]
    marks = client.get(f"/api/v1/submissions/{sid}").json["marks"]
    assert marks["live"] and marks["private"] and marks["private_unseen"] is False, marks
    exposure = marks["private_exposure"]
    assert exposure["tasks_seen_before"] == TASKS == exposure["tasks"] and exposure["runs_before"] == 1
    assert exposure["tokens_before"] == 1
    page = client.get(f"/submission/{sid}").get_data(as_text=True)
    assert "live · private" not in page and f"{TASKS} of {TASKS} tasks dealt before" in page
    assert 'id="board-live-runs"' in page and "1 abandoned" in page
    # the harvest is on record on the board page and in the API, under its token
    spec_hash = client.get(f"/api/v1/submissions/{sid}").json["spec_hash"]
    board = client.get(f"/board/{spec_hash}").get_data(as_text=True)
    assert f'data-run="{run["run_id"]}"' in board and "harvester" in board and "expired" in board
    assert "live · private" not in board
    listed = client.get(f"/api/v1/live/runs?spec_hash={spec_hash}").json
    assert listed["runs"] == {"expired": 1, "finished": 1} and listed["tokens"] == 2
    assert {r["run_id"]: r["dealt"] for r in listed["listed"]}[run["run_id"]] == TASKS
    boards = {b["spec_hash"]: b for b in client.get("/api/v1/boards").json["boards"]}
    assert boards[spec_hash]["private"]["live_runs"]["runs"]["expired"] == 1


def test_the_first_run_on_a_fresh_split_is_live_private_and_undealt_runs_do_not_count(private_app) -> None:  # type: ignore[no-untyped-def]
    client = private_app.test_client()
    idle, first = _auth(private_app, "idle"), _auth(private_app, "first")
    run = start(client, idle, name="opened only")
    _expire(private_app, run["run_id"])  # opened, never dealt a task: it saw nothing
    sid = play(client, first, SEED, name="first agent")["id"]
    marks = client.get(f"/api/v1/submissions/{sid}").json["marks"]
    assert marks["private_unseen"] is True and marks["private_exposure"]["tasks_seen_before"] == 0, marks
    assert "live · private" in client.get(f"/submission/{sid}").get_data(as_text=True)
    # a later run of the same token: its tasks were dealt by the first run, so it is not unseen either
    later = play(client, first, SEED, name="first agent v2")["id"]
    marks = client.get(f"/api/v1/submissions/{later}").json["marks"]
    assert marks["private_unseen"] is False and marks["private_exposure"]["runs_before"] == 1
    # the first run keeps its mark: the later run was opened after it ended
    assert client.get(f"/api/v1/submissions/{sid}").json["marks"]["private_unseen"] is True
