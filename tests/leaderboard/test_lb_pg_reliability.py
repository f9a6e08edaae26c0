"""Large inputs on PostgreSQL: leases, fair turns, global ranks, summaries and the bad-id routes
(the window functions, savepoints and BIGINT bounds behave as on SQLite)."""

from __future__ import annotations

import threading

from leaderboard.server import queue
from leaderboard.server.worker import Verifier
from tests.support.leaderboard import body, many_seeds, named


def test_postgres_leases_turns_ranks_and_summaries(pg_app, expert_bundle, random_bundle) -> None:  # type: ignore[no-untyped-def]
    store, client = pg_app.extensions["sapo_gym"]["store"], pg_app.test_client()
    tokens = {n: {"Authorization": f"Bearer {store.create_token(n)[1]}"} for n in ("big", "small")}
    big = client.post(
        "/api/v1/submissions", data=body(many_seeds(expert_bundle, "big one", 8)), headers=tokens["big"]
    ).json["id"]
    small = client.post("/api/v1/submissions", data=body(random_bundle), headers=tokens["small"]).json["id"]
    live = queue.claim(store, "worker-A", lease_seconds=60)
    assert live is not None and live.submission_id == big
    assert store.requeue_stale() == 0 and Verifier(store).run_once() == small  # A's claim is left alone
    assert queue.release(store, big, "worker-A", 0)
    verifiers = [Verifier(store, slice_episodes=16), Verifier(store, slice_episodes=16)]
    threads = [threading.Thread(target=v.drain) for v in verifiers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {client.get(f"/api/v1/submissions/{i}").json["status"] for i in (big, small)} == {"verified"}
    listing = client.get("/api/v1/submissions?sort=agent&order=asc").json["submissions"]
    assert [(s["agent"]["name"], s["rank"]) for s in listing] == [("big one", 1), ("random agent", 2)]
    page = client.get(f"/submission/{big}?page=2").text
    assert "page 2 / 2" in page and client.get(f"/submission/{big}/episode/127").status_code == 200
    assert client.get(f"/api/v1/compare?a={big}&b={small}").json["test"]["pairs"] == 16
    for url in (f"/api/v1/submissions/{2**63}", f"/api/v1/compare?a={2**63}&b=1", f"/api/v1/submissions/{2**40}"):
        assert client.get(url).status_code == 404, url
    again = client.post("/api/v1/submissions", data=body(named(random_bundle, "second small")), headers=tokens["small"])
    assert again.status_code == 201


def test_postgres_statements_time_out(pg_app) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import text

    with pg_app.extensions["sapo_gym"]["store"].engine.connect() as conn:
        assert conn.execute(text("SHOW statement_timeout")).scalar() == "30s"
        assert conn.execute(text("SHOW lock_timeout")).scalar() == "30s"
