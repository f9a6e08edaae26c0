"""Live evaluation: the agent plays through the server, which deals the (task, seed) pairs once each."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import requests

from agents import ExpertAgent, RandomAgent
from leaderboard.client import SubmitError, wait_for_verification
from leaderboard.live_client import LiveSession, play_live
from sapo_gym.bundle import AgentInfo


def _row(page: str, sid: int) -> str:
    rows = dict(re.findall(r'<tr data-id="(\d+)">(.*?)</tr>', page, flags=re.S))
    return rows[str(sid)]


def test_a_live_vault_run_end_to_end(tmp_path: Path, make_server, token_for) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'lb.db'}"
    token = token_for(db)
    server = make_server(db).start()
    session = LiveSession(server.url, token, timeout=30)
    run = session.start("sapo/Vault-v0", "test", {"name": "live random", "algorithm": "uniform random"})
    assert run["episodes"] == 16 and run["seeds"] == 1
    agent, played, answer = RandomAgent(seed=5), [], {}
    for episode in range(run["episodes"]):
        agent.reset(1)
        obs, info, dealt = session.reset()
        assert dealt["episode"] == episode and "expert_action" not in info and info["action_mask"].dtype == bool
        with pytest.raises(SubmitError, match="in progress") as exc:  # no restart of an episode that goes badly
            session.reset()
        assert exc.value.status == 409
        for turn in range(10):
            answer = session.step(agent.act([obs], [info])[0], turn)
            if answer["terminated"] or answer["truncated"]:
                break
            obs, info = answer["observation"], answer["info"]
        played.append((dealt["task_id"], dealt["seed"]))
        if episode == 0:  # replaying a (task, seed) of this run is refused
            with pytest.raises(SubmitError, match="already played in this run") as exc:
                session.reset(task_id=played[0][0], seed=played[0][1])
            assert exc.value.status == 409
    assert (
        sorted(t for t, _ in played) == [f"vault-test-{i:03d}" for i in range(16)] and len({s for _, s in played}) == 1
    )
    submission = answer["submission"]
    assert submission["status"] == "pending" and isinstance(submission["id"], int)
    again = session.step("a retried last request", answer["turn"])  # answered again, not stepped again
    assert again["submission"] == submission and again["observation"] == answer["observation"]
    with pytest.raises(SubmitError, match="no open live run") as exc:
        session.step("one step too many", answer["turn"] + 1)
    assert exc.value.status == 404
    record = wait_for_verification(f"{server.url}/api/v1/submissions/{submission['id']}", timeout=60, poll=0.2)
    assert record["status"] == "verified" and record["marks"] == {
        "baseline": False,
        "privileged": False,
        "live": True,
    }, record
    bundle = requests.get(f"{server.url}/api/v1/submissions/{submission['id']}/bundle", timeout=10).json()
    assert (
        bundle["evaluation"]["seeds"] == [played[0][1]] and bundle["evaluation"]["harness"]["privileged_agent"] is False
    )
    board = requests.get(f"{server.url}/board/{bundle['env']['spec_hash']}", timeout=10).text
    row = _row(board, submission["id"])
    assert 'class="badge live"' in row and "&#10003; verified" in row
    assert row.index('class="badge live"') < row.index("&#10003; verified")  # live first, above replay-verified
    page = requests.get(f"{server.url}/submission/{submission['id']}", timeout=10).text
    assert 'class="badge live"' in page and "live runs on this board: 1 finished, 0 abandoned" in page
    # the same episodes sent as an offline bundle are replay-verified at best: 'live' is the server's mark, not the bundle's
    bundle["agent"]["name"] = "offline copy"
    copy_id = requests.post(
        f"{server.url}/api/v1/submissions", json=bundle, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ).json()["id"]
    # the board lists only what the verifier has finished: wait for it (reading the board right away raced
    # the background replay, and lost on a loaded machine)
    copy = wait_for_verification(f"{server.url}/api/v1/submissions/{copy_id}", timeout=60, poll=0.2)
    assert copy["status"] == "verified" and not copy["marks"]["live"], copy
    board = requests.get(f"{server.url}/board/{bundle['env']['spec_hash']}", timeout=10).text
    assert 'class="badge live"' not in _row(board, copy_id)


def test_play_live_passes_no_privileged_info_and_the_cli_drives_it(
    tmp_path: Path, make_server, token_for, capsys
) -> None:  # type: ignore[no-untyped-def]
    from sapo_cli import main

    db = f"sqlite:///{tmp_path / 'lb.db'}"
    token = token_for(db)
    server = make_server(db).start()
    result = play_live(
        ExpertAgent(seed=1), server.url, token, "sapo/Vault-v0", "test", AgentInfo(name="would-be oracle")
    )
    assert (
        result.episodes == 16
        and result.submission["status"] == "pending"
        and result.url.endswith(f"/submission/{result.submission['id']}")
    )
    detail = wait_for_verification(f"{server.url}/api/v1/submissions/{result.submission['id']}", timeout=60, poll=0.2)
    assert (
        detail["status"] == "verified" and detail["success"] < 1.0
    )  # the oracle's key never reached it: it played at random
    rc = main(
        [
            "submit",
            "--live",
            "--agent",
            "random",
            "--env",
            "sapo/Vault-v0",
            "--server",
            server.url,
            "--token",
            token,
            "--agent-name",
            "cli live",
            "--seeds",
            "2",
            "--wait",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "32 episodes played" in out and "replay verification: verified" in out, out


def test_live_runs_are_bounded_and_expire_when_idle(tmp_path: Path) -> None:
    from leaderboard.server.app import ServerConfig, create_app
    from leaderboard.server.db import LiveRun
    from tests.support.leaderboard import VAULT

    app = create_app(
        ServerConfig(
            db_url=f"sqlite:///{tmp_path / 'lb.db'}",
            boards=(VAULT,),
            verify=False,
            live_idle_seconds=2.0,
            live_max_open=2,
        )
    )
    store, client = app.extensions["sapo_gym"]["store"], app.test_client()
    auth = [{"Authorization": f"Bearer {store.create_token(n)[1]}"} for n in ("a", "b", "c")]
    start = {"env_id": "sapo/Vault-v0", "split": "test", "agent": {"name": "x"}}
    assert client.post("/api/v1/live/runs", json=start).status_code == 401
    first = client.post("/api/v1/live/runs", json=start, headers=auth[0])
    assert first.status_code == 201, first.json
    assert client.post("/api/v1/live/runs", json=start, headers=auth[0]).status_code == 429  # one open run per token
    assert client.post("/api/v1/live/runs", json=start, headers=auth[1]).status_code == 201
    assert client.post("/api/v1/live/runs", json=start, headers=auth[2]).status_code == 429  # the server's limit
    bad = {
        "reserved name": ({**start, "agent": {"name": "expert (oracle)"}}, 403),
        "markup": ({**start, "agent": {"name": "<b>"}}, 422),
        "too many seeds": ({**start, "seeds": 99}, 400),
        "no such board": ({**start, "split": "train"}, 404),
    }
    for what, (payload, status) in bad.items():
        assert client.post("/api/v1/live/runs", json=payload, headers=auth[2]).status_code in (status, 429), what
    run_id = first.json["run_id"]
    assert (
        client.post(f"/api/v1/live/runs/{run_id}/step", json={"output": "x"}, headers=auth[0]).status_code == 409
    )  # no episode yet
    assert client.post(f"/api/v1/live/runs/{run_id}/reset", headers=auth[1]).status_code == 404  # not b's run
    # idle for 2 s: the ~12 requests above must all fit before the run expires (a few ms each, so a loaded
    # machine has 20x headroom; at 0.5 s it had 5x), and 2.4 s of sleep is surely past it
    time.sleep(2.4)
    gone = client.post(f"/api/v1/live/runs/{run_id}/reset", headers=auth[0])
    assert gone.status_code == 404 and "expired" in gone.json["message"]
    with store.session() as s:
        rows = {r.id: (r.status, r.status_message) for r in s.query(LiveRun)}
    assert rows[run_id][0] == "expired" and "abandoned after 0 of 16 episodes (idle)" in rows[run_id][1]
    for payload, status in bad.values():  # now there is room: each bad request gets its own status
        assert client.post("/api/v1/live/runs", json=payload, headers=auth[2]).status_code == status
    app.extensions["sapo_gym"]["store"].engine.dispose()


def test_opening_live_runs_counts_against_the_tokens_rate_limit(tmp_path: Path) -> None:
    from leaderboard.server.app import ServerConfig, create_app
    from tests.support.leaderboard import VAULT

    app = create_app(
        ServerConfig(
            db_url=f"sqlite:///{tmp_path / 'lb.db'}", boards=(VAULT,), verify=False, rate_per_minute=0.01, rate_burst=1
        )
    )
    store, client = app.extensions["sapo_gym"]["store"], app.test_client()
    auth = {"Authorization": f"Bearer {store.create_token('a')[1]}"}
    start = {"env_id": "sapo/Vault-v0", "split": "test", "agent": {"name": "x"}}
    assert client.post("/api/v1/live/runs", json=start, headers=auth).status_code == 201
    again = client.post("/api/v1/live/runs", json=start, headers=auth)
    assert again.status_code == 429 and "rate limit exceeded" in again.json["message"]
    store.engine.dispose()


@pytest.mark.parametrize("keep", [0.0, 3600.0])
def test_a_closed_runs_turns_are_pruned_after_the_keep_time_and_open_runs_keep_theirs(
    tmp_path: Path, keep: float
) -> None:
    """Every played turn was kept forever: the turn tables grew with every run ever played. A run closed ``keep``
    seconds ago loses its episodes and turns (a retried step is then a 404); an open run keeps everything."""
    from sqlalchemy import func, select, update

    from leaderboard.server.app import ServerConfig, create_app
    from leaderboard.server.db import LiveEpisode, LivePlan, LiveRun, LiveTurn
    from tests.support.leaderboard import VAULT

    app = create_app(
        ServerConfig(
            db_url=f"sqlite:///{tmp_path / 'lb.db'}", boards=(VAULT,), verify=False, live_keep_closed_seconds=keep
        )
    )
    store, client, live = app.extensions["sapo_gym"]["store"], app.test_client(), app.extensions["sapo_gym"]["live"]
    auth = {n: {"Authorization": f"Bearer {store.create_token(n)[1]}"} for n in ("a", "b")}
    start = {"env_id": "sapo/Vault-v0", "split": "test", "agent": {"name": "x"}}
    runs = {}
    for name, turns in (("a", 3), ("b", 2)):
        runs[name] = client.post("/api/v1/live/runs", json=start, headers=auth[name]).json["run_id"]
        assert client.post(f"/api/v1/live/runs/{runs[name]}/reset", headers=auth[name]).status_code == 200
        for turn in range(turns):
            answer = client.post(
                f"/api/v1/live/runs/{runs[name]}/step",
                json={"output": "<action>look</action>", "turn": turn},
                headers=auth[name],
            )
            assert answer.status_code == 200, answer.json

    def turns(run_id: int) -> tuple[int, int]:
        with store.session() as s:
            return (
                s.scalar(select(func.count()).select_from(LiveTurn).where(LiveTurn.run_id == run_id)),
                s.scalar(select(func.count()).select_from(LiveEpisode).where(LiveEpisode.run_id == run_id)),
            )

    assert turns(runs["a"]) == (3, 1) and turns(runs["b"]) == (2, 1)
    with store.session.begin() as s:  # a's run went idle long ago; b's is in play
        s.execute(update(LivePlan).where(LivePlan.run_id == runs["a"]).values(touched_at=0.0))
    assert live.sweep() == 1 and live.prune() == (3 if keep == 0 else 0)
    with store.session() as s:
        assert s.get(LiveRun, runs["a"]).status == "expired" and s.get(LivePlan, runs["a"]) is not None
    assert turns(runs["a"]) == ((0, 0) if keep == 0 else (3, 1)) and turns(runs["b"]) == (2, 1)
    retried = client.post(
        f"/api/v1/live/runs/{runs['a']}/step", json={"output": "<action>look</action>", "turn": 2}, headers=auth["a"]
    )
    assert retried.status_code == (404 if keep == 0 else 200)  # kept: the recorded answer, as before
    nxt = client.post(
        f"/api/v1/live/runs/{runs['b']}/step", json={"output": "<action>look</action>", "turn": 2}, headers=auth["b"]
    )
    assert nxt.status_code == 200 and nxt.json["turn"] == 2  # the open run plays on
    store.engine.dispose()
