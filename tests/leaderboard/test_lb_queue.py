"""The replay queue: claims are leases a live worker renews, a dead worker's lease expires, and the
verifier takes turns across submitters (a small submission does not wait behind a big bundle)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any

import leaderboard.server.worker as worker_module
from leaderboard.server import queue
from leaderboard.server.worker import Verifier
from tests.support.leaderboard import ROOT, VAULT, body, many_seeds, named


def _status(client, sid: int) -> str:  # type: ignore[no-untyped-def]
    return client.get(f"/api/v1/submissions/{sid}").json["status"]


def test_a_second_verifier_does_not_take_over_a_live_claim(client, auth, store, random_bundle) -> None:  # type: ignore[no-untyped-def]
    sid = client.post("/api/v1/submissions", data=body(random_bundle), headers=auth).json["id"]
    live = queue.claim(store, "worker-A", lease_seconds=60)
    assert live is not None and live.submission_id == sid
    second = Verifier(store)
    assert store.requeue_stale() == 0  # what a starting worker does: a live lease is not stale
    assert second.run_once() is None and second.drain() == 0
    assert _status(client, sid) == "verifying"
    assert queue.finish(store, sid, "worker-A", True, "all 16 episodes reproduced exactly")
    assert _status(client, sid) == "verified"


def test_a_dead_workers_lease_expires_and_its_late_verdict_is_ignored(client, auth, store, random_bundle) -> None:  # type: ignore[no-untyped-def]
    sid = client.post("/api/v1/submissions", data=body(random_bundle), headers=auth).json["id"]
    assert queue.claim(store, "worker-A", lease_seconds=0.2) is not None
    assert Verifier(store).run_once() is None  # still leased
    time.sleep(0.4)  # worker A died: nobody renews
    assert Verifier(store).run_once() == sid
    assert _status(client, sid) == "verified"
    assert not queue.finish(store, sid, "worker-A", False, "late")  # A's lease is gone: nothing written
    assert not queue.renew(store, sid, "worker-A", 60)
    assert _status(client, sid) == "verified"


def test_a_live_worker_renews_its_lease_during_a_long_replay(client, auth, store, random_bundle, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    sid = client.post("/api/v1/submissions", data=body(random_bundle), headers=auth).json["id"]
    real = worker_module.replay_episode

    def slow(env: Any, ep: Any) -> Any:
        time.sleep(0.2)
        return real(env, ep)

    # 16 episodes: 3.2 s, well past the 1.2 s lease, which the heartbeat renews every 0.4 s: a thread stalled
    # by a loaded machine has 0.8 s before the lease lapses (with a 0.3 s lease it had 0.2 s)
    monkeypatch.setattr(worker_module, "replay_episode", slow)
    first = Verifier(store, lease_seconds=1.2, slice_seconds=60)
    thread = threading.Thread(target=first.run_once)
    thread.start()
    try:
        time.sleep(0.2)
        takeovers = []
        while thread.is_alive():
            takeovers.append(Verifier(store, lease_seconds=0.3).run_once())
            time.sleep(0.1)
    finally:
        thread.join()
    assert takeovers and takeovers == [None] * len(takeovers)
    assert _status(client, sid) == "verified"


def test_leaderboard_verify_leaves_a_live_claim_alone(tmp_path, token_for, random_bundle) -> None:  # type: ignore[no-untyped-def]
    from leaderboard.boards import BoardRegistry
    from leaderboard.checks import admit
    from leaderboard.server.store import Store
    from sapo_gym.bundle import parse_bundle

    db = f"sqlite:///{tmp_path / 'verify.db'}"
    store, boards = Store(db), BoardRegistry([VAULT])
    bundle = parse_bundle(body(random_bundle))
    sid = store.add(bundle, admit(bundle, boards), submitter="alice", token_id=None).id
    assert queue.claim(store, "live-worker", lease_seconds=120) is not None
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "sapo_cli", "leaderboard", "--db", db, "--board", VAULT, "verify"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "verified 0 submission(s)" in run.stdout
    assert store.get(sid).status == "verifying"  # still the live worker's
    assert queue.finish(store, sid, "live-worker", True, "done")
    store.engine.dispose()


def test_a_small_submission_does_not_wait_behind_a_big_bundle(client, store, expert_bundle, random_bundle) -> None:  # type: ignore[no-untyped-def]
    _, big_token = store.create_token("big")
    _, small_token = store.create_token("small")
    big = client.post(
        "/api/v1/submissions",
        data=body(many_seeds(expert_bundle, "big one", 64)),
        headers={"Authorization": f"Bearer {big_token}"},
    ).json["id"]
    small = client.post(
        "/api/v1/submissions", data=body(random_bundle), headers={"Authorization": f"Bearer {small_token}"}
    ).json["id"]
    verifier = Verifier(store, slice_episodes=100)
    order = []
    while (sid := verifier.run_once()) is not None:
        order.append(sid)
    assert order[:2] == [big, small]  # one slice of the big bundle (100 of its 1024 episodes), then the small one whole
    assert order[2:] == [big] * 10 and _status(client, small) == "verified" and _status(client, big) == "verified"


def test_turns_are_shared_across_submitters(client, store, random_bundle, expert_bundle) -> None:  # type: ignore[no-untyped-def]
    _, busy = store.create_token("busy")
    _, other = store.create_token("other")
    busy_ids = [
        client.post(
            "/api/v1/submissions",
            data=body(named(random_bundle, f"busy {i}")),
            headers={"Authorization": f"Bearer {busy}"},
        ).json["id"]
        for i in range(3)
    ]
    other_id = client.post(
        "/api/v1/submissions", data=body(expert_bundle), headers={"Authorization": f"Bearer {other}"}
    ).json["id"]
    verifier = Verifier(store)
    order = []
    while (sid := verifier.run_once()) is not None:
        order.append(sid)
    assert order == [busy_ids[0], other_id, busy_ids[1], busy_ids[2]]


def test_a_hung_slice_stops_renewing_and_another_worker_takes_over(
    client, auth, store, random_bundle, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    sid = client.post("/api/v1/submissions", data=body(random_bundle), headers=auth).json["id"]
    release = threading.Event()
    real = worker_module.replay_episode

    def hangs_once(env: Any, ep: Any) -> Any:
        if threading.current_thread().name == "stuck":
            release.wait(20)  # an env that hangs (until the test lets it go)
        return real(env, ep)

    monkeypatch.setattr(worker_module, "replay_episode", hangs_once)
    stuck = Verifier(store, lease_seconds=0.3, stall_seconds=0.5)
    thread = threading.Thread(target=stuck.run_once, name="stuck")
    thread.start()
    try:
        deadline, took = time.monotonic() + 15, None
        while took is None and time.monotonic() < deadline:
            time.sleep(0.1)
            took = Verifier(store, lease_seconds=30).run_once()
        assert took == sid and _status(client, sid) == "verified"  # verified by the second worker
    finally:
        release.set()
        thread.join()
    assert _status(client, sid) == "verified"  # the stuck worker's late verdict is not recorded over it


def test_the_verifier_reads_episode_chunks_not_the_whole_bundle(
    client, auth, store, expert_bundle, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    from leaderboard.server.store import Store

    sid = client.post("/api/v1/submissions", data=body(many_seeds(expert_bundle, "chunked", 8)), headers=auth).json[
        "id"
    ]
    monkeypatch.setattr(
        Store, "bundle_of", staticmethod(lambda _row: (_ for _ in ()).throw(AssertionError("parsed the bundle")))
    )
    assert Verifier(store).drain() == 1
    assert _status(client, sid) == "verified"
    assert client.get(f"/api/v1/submissions/{sid}").json["status_message"] == "all 128 episodes reproduced exactly"
