"""A throwaway PostgreSQL cluster on a unix socket in a temp dir: the leaderboard tests' ``pg_cluster`` fixture
and the load benchmark (benchmarks/leaderboard_load.py) both start theirs here.

postgres refuses to run as root: as root the cluster is started as the ``postgres`` user (``runuser``)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["PostgresUnavailable", "Cluster", "pg_bindir", "throwaway_cluster", "create_database", "plain_dsn"]


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL binaries, or root without a ``postgres`` user to run the server as."""


@dataclass(frozen=True)
class Cluster:
    url: str
    """A SQLAlchemy URL with a ``{db}`` placeholder for the database name."""
    root: str
    """The temp dir: the socket's directory; ``data`` below it holds the cluster."""
    data: str

    def postmaster_pid(self) -> int:
        """The server's pid (first line of ``postmaster.pid``)."""
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            return int(f.readline())


def pg_bindir() -> str | None:
    """The newest ``/usr/lib/postgresql/*/bin``, else the directory of ``initdb`` on PATH, else None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _run_as(root: str) -> list[str]:
    """The prefix that runs the server's commands: ``runuser -u postgres --`` as root (``root`` handed over)."""
    if os.geteuid() != 0:
        return []
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresUnavailable("running as root and there is no 'postgres' user to run the server as") from None
    os.chown(root, user.pw_uid, user.pw_gid)
    return ["runuser", "-u", "postgres", "--"]


@contextmanager
def throwaway_cluster(port: int, max_connections: int = 100) -> Iterator[Cluster]:
    """initdb + start (trust auth, fsync off, no TCP), yield the :class:`Cluster`, then stop it and delete it."""
    bindir = pg_bindir()
    if bindir is None:
        raise PostgresUnavailable("PostgreSQL binaries (initdb, pg_ctl) not installed")
    root = tempfile.mkdtemp(prefix="sapo-pg-")
    try:
        run_as = _run_as(root)
    except PostgresUnavailable:
        shutil.rmtree(root, ignore_errors=True)
        raise
    data = os.path.join(root, "data")
    subprocess.run(
        [*run_as, f"{bindir}/initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"],
        check=True,
        capture_output=True,
    )
    options = f"-k {root} -p {port} -c listen_addresses='' -c fsync=off -c max_connections={max_connections}"
    subprocess.run(
        [*run_as, f"{bindir}/pg_ctl", "-D", data, "-l", os.path.join(root, "log"), "-o", options, "-w", "start"],
        check=True,
        capture_output=True,
    )
    try:
        yield Cluster(f"postgresql+psycopg2://postgres@/{{db}}?host={root}&port={port}", root, data)
    finally:
        subprocess.run([*run_as, f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def plain_dsn(url: str) -> str:
    """A SQLAlchemy ``postgresql+psycopg2://`` URL as psycopg2 takes it."""
    return url.replace("postgresql+psycopg2", "postgresql")


def create_database(cluster_url: str, name: str) -> str:
    """``CREATE DATABASE name`` in the cluster (``cluster_url`` has the ``{db}`` placeholder); the database's URL."""
    import psycopg2

    admin = psycopg2.connect(plain_dsn(cluster_url.format(db="postgres")))
    try:
        admin.autocommit = True
        admin.cursor().execute(f"CREATE DATABASE {name}")
    finally:
        admin.close()
    return cluster_url.format(db=name)
