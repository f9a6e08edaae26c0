"""The same server on a real PostgreSQL: a throwaway cluster in a temp dir (skipped without the binaries)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import threading
import uuid
from typing import Iterator

import pytest

from leaderboard.server.app import ServerConfig, create_app
from leaderboard.server.worker import Verifier
from lb_support import VAULT, body, free_port, named


def _pg_bin() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


@pytest.fixture(scope="module")
def pg_cluster() -> Iterator[str]:
    """A PostgreSQL server on a unix socket in a temp dir; yields a URL prefix (append a database name)."""
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) not installed")
    run_as: list[str] = []
    root = tempfile.mkdtemp(prefix="sapo-pg-")
    if os.geteuid() == 0:  # postgres refuses to run as root
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the server as")
        os.chown(root, user.pw_uid, user.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    data, port = os.path.join(root, "data"), free_port()
    subprocess.run([*run_as, f"{bindir}/initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"],
                   check=True, capture_output=True)
    options = f"-k {root} -p {port} -c listen_addresses='' -c fsync=off -c max_connections=100"
    subprocess.run([*run_as, f"{bindir}/pg_ctl", "-D", data, "-l", os.path.join(root, "log"), "-o", options, "-w", "start"],
                   check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg2://postgres@/{{db}}?host={root}&port={port}"
    finally:
        subprocess.run([*run_as, f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_app(pg_cluster: str):  # type: ignore[no-untyped-def]
    import psycopg2

    name = f"lb_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(pg_cluster.format(db="postgres").replace("postgresql+psycopg2", "postgresql"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name}")
    app = create_app(ServerConfig(db_url=pg_cluster.format(db=name), boards=(VAULT,), verify=False, max_upload_mb=1))
    yield app
    app.extensions["sapo_gym"]["store"].engine.dispose()
    admin.cursor().execute(f"DROP DATABASE {name}")
    admin.close()


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
