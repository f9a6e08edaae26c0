"""Helpers shared by the leaderboard tests (their fixtures live in tests/leaderboard/conftest.py)."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sapo_gym.bundle import aggregate

VAULT = "sapo/Vault-v0:test"
ROOT = Path(__file__).resolve().parents[2]


def refresh(bundle: dict[str, Any]) -> dict[str, Any]:
    """Recompute a tampered bundle's aggregates (so only the tampering itself can be caught)."""
    bundle["aggregates"] = aggregate(bundle["episodes"])
    return bundle


def named(bundle: dict[str, Any], name: str) -> dict[str, Any]:
    out = copy.deepcopy(bundle)
    out["agent"]["name"] = name
    return out


def snapshot(store) -> tuple[Any, ...]:  # type: ignore[no-untyped-def]
    """Everything a rejected request must leave as it was."""
    rows = store.submissions(limit=10_000)
    return (
        store.counts(),
        sorted((r.id, r.digest, r.status, r.status_message) for r in rows),
        [(t.id, t.token_hash, t.revoked) for t in store.tokens()],
    )


def many_seeds(bundle: dict[str, Any], name: str, seeds: int) -> dict[str, Any]:
    """``bundle`` renamed and replayed over ``seeds`` seeds: a big submission, aggregates consistent."""
    big = named(bundle, name)
    big["evaluation"]["seeds"] = list(range(seeds))
    big["episodes"] = [{**copy.deepcopy(ep), "seed": s} for s in range(seeds) for ep in bundle["episodes"]]
    return refresh(big)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``sapo-gym leaderboard serve`` (gunicorn behind nginx) in a subprocess on 127.0.0.1: on ``--port 0`` (the server
    binds a free port and announces it once its workers answer) unless ``port`` asks for one. The readiness check
    reads this process's own announcement before asking it anything, so a request can never reach another test's
    server on a reused port. ``--workers 1`` unless the test names its own count."""

    ANNOUNCEMENT = re.compile(r"sapo-gym leaderboard on http://127\.0\.0\.1:(\d+)/")

    def __init__(self, db_url: str, log: Path, *extra: str, port: int | None = None):
        self.db_url, self.log, self.extra = db_url, log, extra
        self.port = port or 0
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> ServerProcess:
        import requests

        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        workers = () if "--workers" in self.extra else ("--workers", "1")
        cmd = [
            sys.executable,
            "-m",
            "sapo_cli",
            "leaderboard",
            "--db",
            self.db_url,
            "--board",
            VAULT,
            "serve",
            "--port",
            str(self.port),
            *workers,
            *self.extra,
        ]
        before = self.log.stat().st_size if self.log.exists() else 0  # a restart appends to the same log
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self.log.open("a"), stderr=subprocess.STDOUT)
        deadline, announced = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            if announced is None:
                with self.log.open("rb") as f:
                    f.seek(before)
                    announced = self.ANNOUNCEMENT.search(f.read().decode(errors="replace"))
                if announced is None:
                    time.sleep(0.1)
                    continue
                self.port = int(announced.group(1))
                self.url = f"http://127.0.0.1:{self.port}"
            try:
                if requests.get(self.url + "/api/v1/boards", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                time.sleep(0.1)
        raise RuntimeError(f"server did not come up: {self.log.read_text()[-2000:]}")

    def worker_pids(self) -> list[int]:
        """The gunicorn workers of the server ([] once it has exited): the children of its gunicorn child."""
        masters = [pid for pid in children(self.proc.pid) if b"gunicorn" in _cmdline(pid)] if self.proc else []
        return children(masters[0]) if masters else []

    def kill(self) -> None:
        """``kill -9`` of the whole server, as a crash of its machine would: every process of it at once (then its
        run directory, which the killed command could not remove, is)."""
        if self.proc is not None and self.proc.poll() is None:
            processes = [self.proc.pid, *descendants(self.proc.pid)]
            left = run_dirs(processes)
            for pid in processes:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.wait(10)
            for path in left:
                shutil.rmtree(path, ignore_errors=True)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)  # nginx, then gunicorn, each within its drain
            except subprocess.TimeoutExpired:
                self.kill()


def children(pid: int) -> list[int]:
    """The children of process ``pid`` (Linux ``/proc``; [] once it has exited)."""
    try:
        return sorted(int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
    except FileNotFoundError:  # exited, or a kernel without CONFIG_PROC_CHILDREN: each process's parent instead
        return sorted(int(stat.parent.name) for stat in Path("/proc").glob("[0-9]*/stat") if _parent(stat) == pid)


def descendants(pid: int) -> list[int]:
    """Every process under ``pid``: its children, theirs, and so on."""
    found = children(pid)
    return [*found, *(d for child in found for d in descendants(child))]


def run_dirs(pids: list[int]) -> list[Path]:
    """The run directories (nginx's ``-p`` prefix) of the serve commands among ``pids``: what a ``kill -9`` leaves."""
    found = []
    for pid in pids:  # nginx's master names itself "nginx: master process /usr/sbin/nginx -p DIR/ -c ..."
        match = re.match(rb"nginx: master process \S+ -p (\S+) ", _cmdline(pid).replace(b"\0", b" "))
        if match:
            found.append(Path(os.fsdecode(match.group(1))))
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _parent(stat: Path) -> int | None:
    try:
        return int(stat.read_text().rsplit(")", 1)[1].split()[1])  # the field after the state; the name may hold ")"
    except (OSError, IndexError, ValueError):
        return None


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (exists and is not a zombie; Linux ``/proc``)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@contextmanager
def pg_database(cluster: str) -> Iterator[str]:
    """A fresh database on the ``pg_cluster`` fixture's server (its URL prefix): its SQLAlchemy URL; dropped afterwards,
    with ``FORCE``, since a killed server's connections may linger."""
    import psycopg2

    name = f"lb_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(cluster.format(db="postgres").replace("postgresql+psycopg2", "postgresql"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name}")
    try:
        yield cluster.format(db=name)
    finally:
        admin.cursor().execute(f"DROP DATABASE {name} WITH (FORCE)")
        admin.close()


def body(bundle: dict[str, Any]) -> bytes:
    return json.dumps(bundle).encode()


def bulk_verified(store, template_row_id: int, n: int) -> None:  # type: ignore[no-untyped-def]
    """``n`` verified rows copied from one stored row, success rising with the name's number (the template fails)."""
    from sqlalchemy import update

    from leaderboard.server.db import Submission

    with store.session.begin() as s:
        base = s.get(Submission, template_row_id)
        for i in range(n):
            s.add(
                Submission(
                    digest=f"{i:064x}",
                    token_id=base.token_id,
                    submitter=base.submitter,
                    env_id=base.env_id,
                    split=base.split,
                    spec_hash=base.spec_hash,
                    agent_name=f"agent {i:03d}",
                    agent_json=json.dumps({"name": f"agent {i:03d}"}),
                    episodes=base.episodes,
                    success=i / n,
                    score=i / n,
                    aggregates_json=base.aggregates_json,
                    status="verified",
                    status_message="ok",
                    bundle_gz=base.bundle_gz,
                )
            )
        s.execute(update(Submission).where(Submission.id == template_row_id).values(status="failed"))
