"""The same server on a real PostgreSQL: a throwaway cluster in a temp dir (``pg_cluster`` in conftest.py; skipped
without the binaries)."""

from __future__ import annotations

import threading

import pytest

from leaderboard.server.worker import Verifier
from tests.support.leaderboard import body, named


def test_postgres_submit_verify_and_reject(pg_app, expert_bundle, random_bundle) -> None:  # type: ignore[no-untyped-def]
    store, client = pg_app.extensions["sapo_gym"]["store"], pg_app.test_client()
    assert store.engine.dialect.name == "postgresql"
    _, token = store.create_token("pg")
    auth = {"Authorization": f"Bearer {token}"}
    first = client.post("/api/v1/submissions", data=body(expert_bundle), headers=auth)
    assert first.status_code == 201
    assert client.post("/api/v1/submissions", data=body(expert_bundle), headers=auth).json["duplicate"] is True
    random_bundle["aggregates"]["all"]["success"] = 0.99
    forged = client.post("/api/v1/submissions", data=body(random_bundle), headers=auth)
    assert forged.status_code == 422 and "forged" in forged.json["message"]
    assert client.post("/api/v1/submissions", data=body(expert_bundle)).status_code == 401
    assert store.counts() == {"submissions": 1, "tokens": 1}
    assert Verifier(store).drain() == 1
    assert client.get(f"/api/v1/submissions/{first.json['id']}").json["status"] == "verified"
    assert "expert agent" in client.get("/", follow_redirects=True).text


def test_postgres_concurrent_submissions_stored_exactly_once(pg_app, random_bundle) -> None:  # type: ignore[no-untyped-def]
    store = pg_app.extensions["sapo_gym"]["store"]
    _, token = store.create_token("pg")
    auth = {"Authorization": f"Bearer {token}"}
    bundles = [body(named(random_bundle, f"pg agent {i}")) for i in range(24)]
    codes: list[int] = []

    def worker(part: list[bytes]) -> None:
        client = pg_app.test_client()
        for data in part + part[:1]:  # the first one twice: a retry
            codes.append(client.post("/api/v1/submissions", data=data, headers=auth).status_code)

    threads = [threading.Thread(target=worker, args=(bundles[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [200] * 8 + [201] * 24
    names = sorted(r.agent_name for r in store.submissions(limit=1000))
    assert names == sorted(f"pg agent {i}" for i in range(24))


@pytest.mark.parametrize("pool, kept, overflow", [(30, 10, 20), (4, 4, 0), (1, 1, 0)])
def test_serve_db_pool_bounds_the_connections_a_process_holds(
    pg_cluster: str, pool: int, kept: int, overflow: int
) -> None:
    """``serve --db-pool P`` reaches the engine: at most P connections per process, so N workers hold at most N·P."""
    from leaderboard.server.store import Store
    from sapo_cli import build_parser
    from sapo_cli.leaderboard_serve import server_config

    args = build_parser().parse_args(
        ["leaderboard", "--db", pg_cluster.format(db="postgres"), "serve", "--db-pool", str(pool)]
    )
    config = server_config(args, 8000)
    assert config.db_pool == pool
    engine = Store(config.db_url, config.db_pool).engine
    try:
        assert (engine.pool.size(), engine.pool._max_overflow) == (kept, overflow)  # type: ignore[attr-defined]
    finally:
        engine.dispose()


def test_the_cli_default_pool_is_the_engines() -> None:
    from leaderboard.server.db import DEFAULT_POOL
    from sapo_cli import build_parser

    assert build_parser().parse_args(["leaderboard", "serve"]).db_pool == DEFAULT_POOL
    with pytest.raises(SystemExit):
        build_parser().parse_args(["leaderboard", "serve", "--db-pool", "0"])
