"""Fixtures of the leaderboard tests: Vault bundles, an in-process app, a server subprocess, a PostgreSQL cluster."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from leaderboard.boards import BoardRegistry
from tests.support.deploy import nginx_or_skip
from tests.support.leaderboard import VAULT, ServerProcess, free_port
from tests.support.postgres import PostgresUnavailable, throwaway_cluster


@pytest.fixture(scope="session")
def boards() -> BoardRegistry:
    return BoardRegistry([VAULT])


@pytest.fixture(scope="session")
def vault_board(boards: BoardRegistry):  # type: ignore[no-untyped-def]
    return next(iter(boards))


@pytest.fixture(scope="session")
def _bundles(vault_board) -> dict[str, dict[str, Any]]:  # type: ignore[no-untyped-def]
    from leaderboard.seed import baseline_bundle

    # as a user would submit them: the baselines' own display names are reserved for the seeded entries
    bundles = {spec: baseline_bundle(vault_board, spec) for spec in ("expert", "random")}
    for spec, bundle in bundles.items():
        bundle["agent"]["name"] = f"{spec} agent"
    return bundles


@pytest.fixture
def expert_bundle(_bundles: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return copy.deepcopy(_bundles["expert"])


@pytest.fixture
def random_bundle(_bundles: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return copy.deepcopy(_bundles["random"])


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Any]:
    """``make_server(db_url, *serve_args)``: a :class:`ServerProcess` (skips the test when nginx or gunicorn is missing)."""
    pytest.importorskip("gunicorn")
    nginx_or_skip()
    servers: list[ServerProcess] = []

    def _make(db_url: str, *extra: str, port: int | None = None) -> ServerProcess:
        server = ServerProcess(db_url, tmp_path / "server.log", *extra, port=port)
        servers.append(server)
        return server

    yield _make
    for s in servers:
        s.stop()


@pytest.fixture
def token_for(tmp_path: Path):  # type: ignore[no-untyped-def]
    def _token(db_url: str, name: str = "tester") -> str:
        from leaderboard.server.store import Store

        store = Store(db_url)
        _, token = store.create_token(name)
        store.engine.dispose()
        return token

    return _token


@pytest.fixture
def app(tmp_path: Path):  # type: ignore[no-untyped-def]
    """An in-process app on a fresh SQLite file (1 MiB upload limit, verifier not started)."""
    from leaderboard.server.app import ServerConfig, create_app

    app = create_app(
        ServerConfig(db_url=f"sqlite:///{tmp_path / 'lb.db'}", boards=(VAULT,), verify=False, max_upload_mb=1)
    )
    yield app
    app.extensions["sapo_gym"]["store"].engine.dispose()


@pytest.fixture
def store(app):  # type: ignore[no-untyped-def]
    return app.extensions["sapo_gym"]["store"]


@pytest.fixture
def client(app):  # type: ignore[no-untyped-def]
    return app.test_client()


@pytest.fixture
def auth(store) -> dict[str, str]:  # type: ignore[no-untyped-def]
    _, token = store.create_token("alice")
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def pg_cluster() -> Iterator[str]:
    """A PostgreSQL server on a unix socket in a temp dir; yields a URL prefix (append a database name)."""
    try:
        with throwaway_cluster(free_port()) as cluster:
            yield cluster.url
    except PostgresUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def pg_app(pg_cluster: str):  # type: ignore[no-untyped-def]
    """An in-process app on a fresh database of :func:`pg_cluster` (dropped afterwards)."""
    import psycopg2

    from leaderboard.server.app import ServerConfig, create_app

    name = f"lb_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(pg_cluster.format(db="postgres").replace("postgresql+psycopg2", "postgresql"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name}")
    app = create_app(ServerConfig(db_url=pg_cluster.format(db=name), boards=(VAULT,), verify=False, max_upload_mb=1))
    yield app
    app.extensions["sapo_gym"]["store"].engine.dispose()
    admin.cursor().execute(f"DROP DATABASE {name}")
    admin.close()
