"""``--db postgresql://...`` (the documented form) and ``postgres://...`` reach the installed PostgreSQL driver."""

from __future__ import annotations

import uuid

import pytest

from leaderboard.server.db import driver_url


@pytest.mark.parametrize(
    "url, expected",
    [
        ("postgresql://board@dbhost/board", "postgresql+psycopg2://board@dbhost/board"),
        ("postgres://u:pw@h:5433/db?sslmode=require", "postgresql+psycopg2://u:pw@h:5433/db?sslmode=require"),
        ("POSTGRESQL://u@h/db", "postgresql+psycopg2://u@h/db"),
        ("postgresql+psycopg2://u@h/db", "postgresql+psycopg2://u@h/db"),
        ("sqlite:///x.db", "sqlite:///x.db"),
    ],
)
def test_a_bare_postgres_url_names_psycopg2(url: str, expected: str) -> None:
    pytest.importorskip("psycopg2")
    assert driver_url(url) == expected


def test_the_documented_url_opens_a_store_and_the_cli_uses_it(
    pg_cluster: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg2

    from leaderboard.server.store import Store
    from sapo_cli import main

    name = f"lb_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(pg_cluster.format(db="postgres").replace("postgresql+psycopg2", "postgresql"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name}")
    try:
        for scheme in ("postgresql", "postgres"):
            url = pg_cluster.format(db=name).replace("postgresql+psycopg2", scheme)
            store = Store(url)
            assert store.engine.dialect.name == "postgresql" and store.engine.dialect.driver == "psycopg2"
            store.engine.dispose()
            assert main(["leaderboard", "--db", url, "token", "create", f"via {scheme}"]) == 0
            assert f"for via {scheme}" in capsys.readouterr().out
    finally:
        admin.cursor().execute(f"DROP DATABASE {name} WITH (FORCE)")
        admin.close()
