"""Live runs with several episodes in progress at once (``parallel``), and the client's pool that plays them."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sapo_gym.core import ACTION_MAX_LENGTH
from tests.support.fake_openai import vault_reply
from tests.support.live_protocol import open_runs

START = {"env_id": "sapo/Vault-v0", "split": "test", "agent": {"name": "x"}}


def _app(tmp_path: Path, **config: Any):  # type: ignore[no-untyped-def]
    from leaderboard.server.app import ServerConfig, create_app
    from tests.support.leaderboard import VAULT

    return create_app(
        ServerConfig(db_url=f"sqlite:///{tmp_path / 'lb.db'}", boards=(VAULT,), **{"verify": False, **config})
    )


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[Any, dict[str, str], Any]]:
    app = _app(tmp_path)
    store = app.extensions["sapo_gym"]["store"]
    yield (
        app.test_client(),
        {"Authorization": f"Bearer {store.create_token('a')[1]}"},
        app.extensions["sapo_gym"]["live"],
    )
    store.engine.dispose()


class SeededVaultAgent:
    """Deterministic in (observation, turn_seed) only: the right button, or a wrong one when the seed says so; it
    counts the requests in flight at once."""

    name = "seeded vault"

    def __init__(self, delay: float = 0.0):
        self.delay, self.lock = delay, threading.Lock()
        self.in_flight = self.most = 0

    def respond(self, observation: str, info: dict[str, Any], turn_seed: int | None = None) -> dict[str, Any]:
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        time.sleep(self.delay)
        with self.lock:
            self.in_flight -= 1
        reply = vault_reply(observation)
        return {"output": reply if (turn_seed or 0) % 3 == 0 else "<think>guess</think><action>press nothing</action>"}


def _steps(manager: Any, run_id: int) -> dict[int, tuple[int, bool]]:
    """Each dealt episode's recorded turns and whether it ended, as the database holds them."""
    from sqlalchemy import select

    from leaderboard.server.db import LiveEpisode

    with manager.store.session() as s:
        return {
            e.episode: (e.steps, e.ended) for e in s.scalars(select(LiveEpisode).where(LiveEpisode.run_id == run_id))
        }


def _record_builds(manager: Any) -> list[Any]:
    """Every env the manager's cache builds from now on, in the order it builds them (its factory wrapped)."""
    built: list[Any] = []
    make = manager.envs.factory
    manager.envs.factory = lambda board: (built.append(make(board)), built[-1])[1]
    return built


def _count_steps(envs: dict[int, Any]) -> list[int]:
    """Wraps each env's ``step``; the returned list gets an episode's index each time its env is stepped."""
    calls: list[int] = []
    for i, env in envs.items():
        real = env.step
        env.step = lambda output, real=real, i=i: (calls.append(i), real(output))[1]
    return calls


def _serve(app: Any) -> tuple[str, Any]:
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}", server


@pytest.mark.slow
def test_a_parallel_run_is_verified_and_its_bundle_is_the_sequential_runs(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import requests

    from leaderboard.client import wait_for_verification
    from leaderboard.live_client import play_live
    from leaderboard.server import live as live_module
    from sapo_gym.bundle import AgentInfo

    app = _app(tmp_path, verify=True)
    store = app.extensions["sapo_gym"]["store"]
    token = store.create_token("a")[1]
    url, server = _serve(app)
    bundles, agents = [], []
    try:
        for concurrency in (4, 1):
            monkeypatch.setattr(live_module, "_rng", random.Random(7))  # the same draw: seeds and order
            agent = SeededVaultAgent(delay=0.01)
            result = play_live(
                agent, url, token, "sapo/Vault-v0", "test", AgentInfo(name="pooled"), seeds=2, concurrency=concurrency
            )
            assert result.episodes == 32 and result.parallel == concurrency and result.submission["id"] is not None
            record = wait_for_verification(f"{url}/api/v1/submissions/{result.submission['id']}", timeout=120, poll=0.2)
            assert record["status"] == "verified" and record["marks"]["live"], record
            bundles.append(
                requests.get(f"{url}/api/v1/submissions/{result.submission['id']}/bundle", timeout=10).json()
            )
            agents.append(agent)
    finally:
        server.shutdown()
        store.engine.dispose()
    assert agents[0].most > 1 and agents[1].most == 1  # the pool overlapped episodes; the sequential run did not
    parallel, sequential = bundles
    assert parallel["evaluation"].pop("command") != sequential["evaluation"].pop("command")  # "live run <id>"
    parallel.pop("created"), sequential.pop("created")
    assert parallel["episodes"] == sequential["episodes"] and parallel == sequential  # everything else is the same
    assert 0 < sum(e["success"] for e in parallel["episodes"]) < 32  # the seeds chose some wrong buttons: not trivial


def test_a_reset_past_parallel_and_a_step_without_its_episode_are_refused(live) -> None:  # type: ignore[no-untyped-def]
    client, auth, _manager = live
    run = client.post("/api/v1/live/runs", json={**START, "parallel": 2}, headers=auth)
    assert run.status_code == 201 and run.json["parallel"] == 2, run.json
    base = f"/api/v1/live/runs/{run.json['run_id']}"
    dealt = [client.post(f"{base}/reset", headers=auth).json for _ in range(2)]
    assert [d["episode"] for d in dealt] == [0, 1] and len({(d["task_id"], d["seed"]) for d in dealt}) == 2
    third = client.post(f"{base}/reset", headers=auth)
    assert third.status_code == 409 and "in progress" in third.json["message"] and "2 at once" in third.json["message"]
    unnamed = client.post(f"{base}/step", json={"output": "x", "turn": 0}, headers=auth)
    assert unnamed.status_code == 409 and '"episode"' in unnamed.json["message"]
    assert client.get(base, headers=auth).json["in_progress_episodes"] == [0, 1]
    assert client.post(f"{base}/step", json={"output": "x", "turn": 0, "episode": 5}, headers=auth).status_code == 409
    bad = client.post(f"{base}/step", json={"output": "x", "turn": 0, "episode": True}, headers=auth)
    assert bad.status_code == 400
    # play episode 1 to its end: a slot is free again, and the next reset deals episode 2
    turn, answer = 0, {}
    while not (answer.get("terminated") or answer.get("truncated")):
        answer = client.post(
            f"{base}/step", json={"output": "<action>press red</action>", "turn": turn, "episode": 1}, headers=auth
        ).json
        turn += 1
    assert client.post(f"{base}/reset", headers=auth).json["episode"] == 2


def test_a_retried_step_is_answered_again_per_episode_and_steps_no_env_twice(live) -> None:  # type: ignore[no-untyped-def]
    client, auth, manager = live
    built = _record_builds(manager)  # the start builds the first one (its spec is checked), the deals the others
    run_id = client.post("/api/v1/live/runs", json={**START, "parallel": 3}, headers=auth).json["run_id"]
    base = f"/api/v1/live/runs/{run_id}"
    for _ in range(3):
        assert client.post(f"{base}/reset", headers=auth).status_code == 200
    first = {
        i: client.post(
            f"{base}/step", json={"output": f"<action>look {i}</action>", "turn": 0, "episode": i}, headers=auth
        ).json
        for i in (0, 1, 2)
    }
    steps = _steps(manager, run_id)
    assert len(built) == 3  # one env per dealt episode, in the order dealt, none rebuilt
    stepped = _count_steps(dict(enumerate(built)))
    for i in (2, 0, 1):  # retried out of order, with other outputs: each episode's own answer, no env stepped
        again = client.post(
            f"{base}/step", json={"output": "<action>press red</action>", "turn": 0, "episode": i}, headers=auth
        ).json
        assert again == first[i] and again["episode"] == i
    assert _steps(manager, run_id) == steps == {0: (1, False), 1: (1, False), 2: (1, False)} and not stepped
    assert client.get(base, headers=auth).json["output_bytes"] == sum(
        len(f"<action>look {i}</action>") for i in range(3)
    )
    # an ended episode's last step is still answered while the others play on
    turn, answer = 1, first[0]
    while not (answer["terminated"] or answer["truncated"]):
        answer = client.post(
            f"{base}/step", json={"output": "<action>look</action>", "turn": turn, "episode": 0}, headers=auth
        ).json
        turn += 1
    retried = client.post(f"{base}/step", json={"output": "other", "turn": answer["turn"], "episode": 0}, headers=auth)
    assert (
        retried.status_code == 200
        and retried.json == answer
        and _steps(manager, run_id)[0] == (answer["turn"] + 1, True)
    )


@pytest.mark.parametrize("parallel", [0, 9, True, 1.5, "2", None, -1])
def test_a_bad_parallel_is_400(live, parallel: Any) -> None:  # type: ignore[no-untyped-def]
    client, auth, _manager = live
    refused = client.post("/api/v1/live/runs", json={**START, "parallel": parallel}, headers=auth)
    assert refused.status_code == 400 and "parallel" in refused.json["message"], refused.json
    assert client.get("/api/v1/live/limits").json["max_parallel"] == 8
    assert (
        client.post("/api/v1/live/runs", json={**START, "parallel": 8}, headers=auth).status_code == 201
    )  # nothing opened


def test_the_output_budget_is_the_runs_across_its_parallel_episodes(tmp_path: Path) -> None:
    app = _app(tmp_path, max_upload_mb=1)
    store = app.extensions["sapo_gym"]["store"]
    client, auth = app.test_client(), {"Authorization": f"Bearer {store.create_token('a')[1]}"}
    base = f"/api/v1/live/runs/{client.post('/api/v1/live/runs', json={**START, 'seeds': 4, 'parallel': 4}, headers=auth).json['run_id']}"
    output = "\u00e9" * (ACTION_MAX_LENGTH // 2)  # 65,536 UTF-8 bytes, an unparseable output: a no-op turn each
    turns: dict[int, int] = {}
    recorded, refused = 0, None
    for _ in range(4 * 16 * 4 + 1):
        for _ in range(4 - len(turns)):  # keep 4 episodes in progress
            dealt = client.post(f"{base}/reset", headers=auth).json
            turns[dealt["episode"]] = 0
        episode = sorted(turns)[recorded % len(turns)]  # round robin over the episodes in progress
        answer = client.post(
            f"{base}/step", json={"output": output, "turn": turns[episode], "episode": episode}, headers=auth
        )
        if answer.status_code == 413:
            refused = answer.json
            break
        assert answer.status_code == 200, answer.json
        recorded += 1
        turns[episode] += 1
        if answer.json["terminated"] or answer.json["truncated"]:
            del turns[episode]
    assert refused is not None and "limit of 1048576" in refused["message"], refused
    assert recorded == 16 and client.get(base, headers=auth).json["output_bytes"] == 1 << 20
    store.engine.dispose()


@pytest.mark.slow
def test_a_parallel_run_expires_when_no_episode_progresses_and_closes_its_envs(tmp_path: Path) -> None:
    idle = 3.0  # a step every idle / 3 keeps the run open with 2 s to spare on a loaded machine
    app = _app(tmp_path, live_idle_seconds=idle)
    store, manager = app.extensions["sapo_gym"]["store"], app.extensions["sapo_gym"]["live"]
    client, auth = app.test_client(), {"Authorization": f"Bearer {store.create_token('a')[1]}"}
    built = _record_builds(manager)  # the start builds the first one (its spec is checked), the deals the others
    run_id = client.post("/api/v1/live/runs", json={**START, "parallel": 3}, headers=auth).json["run_id"]
    base = f"/api/v1/live/runs/{run_id}"
    for _ in range(2):
        assert client.post(f"{base}/reset", headers=auth).status_code == 200
    assert len(built) == 2  # built as episodes were dealt, not all at start
    closed: list[int] = []
    for i, env in enumerate(built):
        real = env.close
        env.close = lambda real=real, i=i: (closed.append(i), real())
    for turn in range(3):  # progress on episode 1 alone keeps the run open past the idle time; episode 0 waits
        time.sleep(idle / 3)
        answer = client.post(
            f"{base}/step", json={"output": "<action>look</action>", "turn": turn, "episode": 1}, headers=auth
        )
        assert answer.status_code == 200, answer.json
    time.sleep(idle + 0.3)  # no progress for longer than idle: the next request's sweep expires the run
    gone = client.post(f"{base}/step", json={"output": "<action>look</action>", "turn": 0, "episode": 0}, headers=auth)
    assert gone.status_code == 404 and "expired" in gone.json["message"]
    assert sorted(closed) == [0, 1] and run_id not in open_runs(manager)
    assert manager.envs.drop_run(run_id) == 0  # none of its envs is left in the cache
    store.engine.dispose()


def test_submit_live_plays_an_openai_agent_with_concurrency_episodes_at_once(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from sapo_cli import main
    from tests.support.fake_openai import FakeOpenAI, lognormal_latency

    app = _app(tmp_path)
    store = app.extensions["sapo_gym"]["store"]
    token = store.create_token("a")[1]
    url, server = _serve(app)
    try:
        with FakeOpenAI(latency=lognormal_latency(0.01, 0.5, 0)) as model:
            rc = main(
                [
                    "submit",
                    "--live",
                    "--agent",
                    f"openai:{model.url}#m",
                    "--env",
                    "sapo/Vault-v0",
                    "--server",
                    url,
                    "--token",
                    token,
                    "--agent-name",
                    "pooled cli",
                    "--concurrency",
                    "4",
                ]
            )
            out, err = capsys.readouterr()
            assert rc == 0 and "16 episodes played (4 at once)" in out, out + err
            assert "live run 1: 16/16 episodes, 32 turns" in err  # the evaluate progress line, per turn
            assert len(model.requests) == 32 and all("seed" in r["body"] for r in model.requests)
    finally:
        server.shutdown()
        store.engine.dispose()


def test_a_failing_worker_stops_the_pool_and_leaves_the_run_to_expire(tmp_path: Path) -> None:
    from leaderboard.client import SubmitError
    from leaderboard.live_client import play_live
    from sapo_gym.bundle import AgentInfo

    class FailsOnce(SeededVaultAgent):
        def respond(self, observation: str, info: dict[str, Any], turn_seed: int | None = None) -> dict[str, Any]:
            with self.lock:
                self.calls = getattr(self, "calls", 0) + 1
                if self.calls == 6:
                    raise RuntimeError("the model server went away")
            return super().respond(observation, info, turn_seed)

    app = _app(tmp_path)
    store, manager = app.extensions["sapo_gym"]["store"], app.extensions["sapo_gym"]["live"]
    token = store.create_token("a")[1]
    url, server = _serve(app)
    agent = FailsOnce(delay=0.01)
    try:
        with pytest.raises(SubmitError, match="RuntimeError: the model server went away; the run is left to expire"):
            play_live(agent, url, token, "sapo/Vault-v0", "test", AgentInfo(name="fails"), concurrency=3)
        calls = agent.calls
        time.sleep(0.3)
        assert agent.calls == calls <= 6 + 2  # the others stopped after their request in flight
        (run_id,) = open_runs(manager)  # still open on the server, until its idle time passes
        status = manager.status(run_id, store.authenticate(token))
        assert status["parallel"] == 3 and status["played"] >= 3 and status["done"] < 16
    finally:
        server.shutdown()
        store.engine.dispose()


def test_a_retried_reset_gets_its_episode_back_not_a_second_deal(live) -> None:  # type: ignore[no-untyped-def]
    """A reset whose answer was lost is retried with the same request_id: the same episode, nothing dealt twice,
    so a parallel run never strands an episode nobody plays; another key deals the next one; a bad key is a 400."""
    client, auth, _manager = live
    base = f"/api/v1/live/runs/{client.post('/api/v1/live/runs', json={**START, 'parallel': 2}, headers=auth).json['run_id']}"
    first = client.post(f"{base}/reset", json={"request_id": "k-1"}, headers=auth).json
    again = client.post(f"{base}/reset", json={"request_id": "k-1"}, headers=auth).json
    assert again == first and client.get(base, headers=auth).json["in_progress_episodes"] == [first["episode"]]
    second = client.post(f"{base}/reset", json={"request_id": "k-2"}, headers=auth).json
    assert second["episode"] == first["episode"] + 1
    assert client.post(f"{base}/reset", json={"request_id": "k-2"}, headers=auth).json == second
    for bad in ("", "x" * 65, "a b", 7, True):
        r = client.post(f"{base}/reset", json={"request_id": bad}, headers=auth)
        assert r.status_code == 400 and "request_id" in r.json["message"], (bad, r.json)
