"""Live runs survive their server: ``kill -9`` mid-run, a restarted server continues from the last
acknowledged step, retries get their recorded answers, and the finished bundle is the uninterrupted run's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.leaderboard import VAULT, pg_database
from tests.support.live_protocol import START, Client, agent, open_runs, stored_bundle, uninterrupted


def _survives_kill_9(db_url: str, make_server: Callable[..., Any], token_for: Callable[..., str]) -> None:
    token = token_for(db_url)
    first = make_server(db_url, "--no-verify").start()
    client = Client(first.url, token)
    client.start()
    assert client.play(7) is None
    acknowledged = dict(client.last)  # type: ignore[arg-type]
    first.kill()  # SIGKILL: nothing is flushed or closed
    second = make_server(db_url, "--no-verify").start()
    client.url = second.url
    status = requests.get(f"{second.url}/api/v1/live/runs/{client.run_id}", headers=client.headers, timeout=30).json()
    assert status["played"] == client.episode + 1 and status["in_progress"] != (
        acknowledged["answer"]["terminated"] or acknowledged["answer"]["truncated"]
    )
    retried = client.post(f"/{client.run_id}/step", {**acknowledged["body"], "output": "<action>press red</action>"})
    assert retried.status_code == 200 and retried.json() == acknowledged["answer"]  # the recorded answer, no new turn
    submission = None
    for _ in range(200):  # Vault's horizon bounds an episode; 16 episodes end well within 200 steps
        submission = client.play(1)
        if submission is not None:
            break
    assert submission is not None and submission["status"] == "pending", submission
    stored = stored_bundle(db_url, submission["id"])
    assert (
        len(stored["episodes"]) == status["episodes"]
        and sum(len(e["turns"]) for e in stored["episodes"]) == client.steps
    )
    assert stored == uninterrupted(stored)
    last = client.post(f"/{client.run_id}/step", client.last["body"])  # type: ignore[index]
    assert last.status_code == 200 and last.json()["submission"] == submission  # the last step, retried after the end


def test_a_live_run_survives_kill_9_of_its_server_on_sqlite(tmp_path: Path, make_server, token_for) -> None:  # type: ignore[no-untyped-def]
    _survives_kill_9(f"sqlite:///{tmp_path / 'live.db'}", make_server, token_for)


def test_a_live_run_survives_kill_9_of_its_server_on_postgres(pg_cluster: str, make_server, token_for) -> None:  # type: ignore[no-untyped-def]
    with pg_database(pg_cluster) as db:
        _survives_kill_9(db, make_server, token_for)


def test_a_second_process_continues_a_run_and_rebuilds_its_env_by_replay(tmp_path: Path) -> None:
    """Two apps on one database (two server processes): each request may land on either; every turn is played once,
    and the process that lacks an episode's current env rebuilds it from the recorded outputs."""
    from leaderboard.server.app import ServerConfig, create_app

    db = f"sqlite:///{tmp_path / 'two.db'}"
    apps = [create_app(ServerConfig(db_url=db, boards=(VAULT,), verify=False)) for _ in range(2)]
    store = apps[0].extensions["sapo_gym"]["store"]
    headers = {"Authorization": f"Bearer {store.create_token('a')[1]}"}
    clients = [app.test_client() for app in apps]
    run_id = clients[0].post("/api/v1/live/runs", json=START, headers=headers).json["run_id"]
    base, turn, observation, steps, answer = f"/api/v1/live/runs/{run_id}", 0, "", 0, {"terminated": True}
    while "submission" not in answer:
        client = clients[steps % 2]  # alternate processes on every request
        if answer.get("terminated") or answer.get("truncated"):
            dealt = client.post(f"{base}/reset", headers=headers).json
            observation, turn = dealt["observation"], 0
        answer = client.post(f"{base}/step", json={"output": agent(observation), "turn": turn}, headers=headers).json
        assert "error" not in answer, answer
        observation, turn, steps = answer["observation"], turn + 1, steps + 1
    rebuilt = sum(app.extensions["sapo_gym"]["live"].envs.rebuilt for app in apps)
    assert rebuilt >= 1  # at least one episode's env came from a replay; every step was answered in order
    stored = apps[0].extensions["sapo_gym"]["store"]
    bundle = stored.bundle_of(stored.get(answer["submission"]["id"]))
    assert sum(len(e["turns"]) for e in bundle["episodes"]) == steps and bundle == uninterrupted(bundle)
    for app in apps:
        app.extensions["sapo_gym"]["store"].engine.dispose()


def test_live_slots_and_the_waiting_line_are_shared_by_the_processes(tmp_path: Path) -> None:
    """Two apps on one database with room for 2 open runs: the third token is refused on either and holds its place
    in the one line; when a run on one process expires, the slot goes to the waiting token on the other process,
    not to a token that did not wait."""
    import time

    from leaderboard.server.app import ServerConfig, create_app

    idle = 3.0  # run 0 is touched 1.6 s before the check (1.4 s to spare for a loaded machine); run 1 is idle 3.2 s
    db = f"sqlite:///{tmp_path / 'slots.db'}"
    apps = [
        create_app(
            ServerConfig(
                db_url=db, boards=(VAULT,), verify=False, live_max_open=2, rate_per_minute=0, live_idle_seconds=idle
            )
        )
        for _ in range(2)
    ]
    store = apps[0].extensions["sapo_gym"]["store"]
    auth = [{"Authorization": f"Bearer {store.create_token(f't{k}')[1]}"} for k in range(4)]
    a, b = (app.test_client() for app in apps)
    run0 = a.post("/api/v1/live/runs", json=START, headers=auth[0]).json["run_id"]
    assert b.post("/api/v1/live/runs", json=START, headers=auth[1]).status_code == 201
    assert b.post("/api/v1/live/runs", json=START, headers=auth[0]).status_code == 429  # one per token, on any process
    for client in (a, b):
        refused = client.post("/api/v1/live/runs", json=START, headers=auth[2])
        assert refused.status_code == 429 and "number 1 in line" in refused.json["message"], refused.json
    time.sleep(1.6)
    assert (
        b.post(f"/api/v1/live/runs/{run0}/reset", headers=auth[0]).status_code == 200
    )  # progress, on the other process
    assert b.post("/api/v1/live/runs", json=START, headers=auth[2]).status_code == 429  # keeps its place
    time.sleep(1.6)  # run 1 is idle past 3 s now; run 0 is not
    late = a.post("/api/v1/live/runs", json=START, headers=auth[3])
    assert late.status_code == 429 and "refused before you" in late.json["message"], late.json
    assert b.post("/api/v1/live/runs", json=START, headers=auth[2]).status_code == 201
    assert open_runs(apps[0].extensions["sapo_gym"]["live"]) == open_runs(apps[1].extensions["sapo_gym"]["live"])
    assert len(open_runs(apps[0].extensions["sapo_gym"]["live"])) == 2
    for app in apps:
        app.extensions["sapo_gym"]["store"].engine.dispose()


def test_concurrent_retries_through_two_processes_on_postgres_play_each_turn_once(pg_cluster: str) -> None:
    """The same reset and the same step sent 8 times at once, half to each of two apps on one PostgreSQL database
    (a client's retries that land on different server processes): one episode dealt, each turn played once, and
    every copy gets the same answer."""
    with pg_database(pg_cluster) as db:
        _concurrent_retries(db)


def _concurrent_retries(db: str) -> None:
    import threading

    from sqlalchemy import func, select

    from leaderboard.server.app import ServerConfig, create_app
    from leaderboard.server.db import LiveEpisode, LiveTurn

    apps = [create_app(ServerConfig(db_url=db, boards=(VAULT,), verify=False, rate_per_minute=0)) for _ in range(2)]
    try:
        store = apps[0].extensions["sapo_gym"]["store"]
        headers = {"Authorization": f"Bearer {store.create_token('a')[1]}"}
        run_id = apps[0].test_client().post("/api/v1/live/runs", json=START, headers=headers).json["run_id"]
        base = f"/api/v1/live/runs/{run_id}"

        def at_once(path: str, body: dict[str, Any]) -> list[Any]:
            answers: list[Any] = [None] * 8
            gate = threading.Barrier(8)

            def send(i: int) -> None:
                client = apps[i % 2].test_client()
                gate.wait()
                r = client.post(path, json=body, headers=headers)
                answers[i] = (r.status_code, r.json)

            threads = [threading.Thread(target=send, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            return answers

        dealt = at_once(f"{base}/reset", {"request_id": "same-key"})
        assert all(a == dealt[0] for a in dealt) and dealt[0][0] == 200, dealt
        turn = 0
        for _ in range(3):  # Vault allows a few presses; each turn is sent 8 times at once
            answers = at_once(f"{base}/step", {"output": "<action>press nothing</action>", "turn": turn, "episode": 0})
            assert all(a == answers[0] for a in answers) and answers[0][0] == 200, answers
            turn += 1
            if answers[0][1]["terminated"] or answers[0][1]["truncated"]:
                break
        with store.session() as s:
            assert s.scalar(select(func.count()).select_from(LiveEpisode).where(LiveEpisode.run_id == run_id)) == 1
            turns = list(s.scalars(select(LiveTurn.turn).where(LiveTurn.run_id == run_id).order_by(LiveTurn.turn)))
        assert turns == list(range(turn)), turns
    finally:
        for app in apps:
            app.extensions["sapo_gym"]["store"].engine.dispose()


@pytest.mark.slow
def test_live_runs_on_four_server_processes_continue_when_one_is_killed(
    pg_cluster: str, make_server, token_for
) -> None:  # type: ignore[no-untyped-def]
    """``serve --workers 4`` on PostgreSQL: three live runs at once, every request landing on any of the four
    processes; one process is killed (``kill -9``) mid-run. The runs go on (the supervisor replaces the process;
    clients retry through the reset connections), every turn is recorded once, and each bundle is the
    uninterrupted run's."""
    import os
    import signal

    with pg_database(pg_cluster) as db:
        server = make_server(db, "--no-verify", "--workers", "4", "--rate-per-minute", "0").start()
        clients = [Client(server.url, token_for(db, f"player {k}"), who=f"player {k}: ") for k in range(3)]
        for client in clients:
            client.retry_seconds = 60.0  # a replacement process starts in a few seconds
            client.start()
        results: dict[int, Any] = {}
        killed = threading.Event()

        def play(k: int) -> None:
            for _ in range(300):  # 16 Vault episodes end well within 300 steps
                if clients[k].steps == 5:
                    killed.wait(60)  # every run is mid-way when the worker dies, however the threads are scheduled
                submission = clients[k].play(1)
                if submission is not None:
                    results[k] = submission
                    return

        threads = [threading.Thread(target=play, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while any(c.steps < 5 for c in clients):
            assert time.monotonic() < deadline and all(t.is_alive() for t in threads), [c.steps for c in clients]
            time.sleep(0.01)
        victims = server.worker_pids()
        assert len(victims) == 4, victims
        os.kill(victims[0], signal.SIGKILL)
        killed.set()
        for t in threads:
            t.join(240)
        assert sorted(results) == [0, 1, 2], results
        for k, submission in results.items():
            assert submission["status"] == "pending" and submission["id"] is not None, (
                submission
            )  # admitted, not refused
            stored = stored_bundle(db, submission["id"])
            assert sum(len(e["turns"]) for e in stored["episodes"]) == clients[k].steps
            assert stored == uninterrupted(stored, clients[k].who)
        deadline = time.monotonic() + 30
        while victims[0] in server.worker_pids() or len(server.worker_pids()) < 4:
            assert time.monotonic() < deadline, server.worker_pids()
            time.sleep(0.1)


def test_a_retried_start_gets_its_run_back_on_any_process(tmp_path: Path) -> None:
    """A start whose answer was lost (a killed worker) is retried with the same request_id, maybe on another process:
    the same open run, not a 429 for the token's one open run; another key is refused; a bad key is a 400."""
    from leaderboard.server.app import ServerConfig, create_app

    db = f"sqlite:///{tmp_path / 'start.db'}"
    apps = [create_app(ServerConfig(db_url=db, boards=(VAULT,), verify=False, rate_per_minute=0)) for _ in range(2)]
    store = apps[0].extensions["sapo_gym"]["store"]
    headers = {"Authorization": f"Bearer {store.create_token('a')[1]}"}
    a, b = (app.test_client() for app in apps)
    first = a.post("/api/v1/live/runs", json={**START, "request_id": "start-1"}, headers=headers)
    again = b.post("/api/v1/live/runs", json={**START, "request_id": "start-1"}, headers=headers)
    assert first.status_code == again.status_code == 201 and again.json == first.json
    assert b.post("/api/v1/live/runs", json={**START, "request_id": "start-2"}, headers=headers).status_code == 429
    assert b.post("/api/v1/live/runs", json={**START, "request_id": "no spaces"}, headers=headers).status_code == 400
    assert open_runs(apps[1].extensions["sapo_gym"]["live"]) == [first.json["run_id"]]
    for app in apps:
        app.extensions["sapo_gym"]["store"].engine.dispose()
