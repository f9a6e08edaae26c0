"""``sapo-gym leaderboard serve --workers N``: the prefork supervisor (restarts bounded, no orphans), and 4 workers on
PostgreSQL under load with one of them killed -9 (no acknowledged submission lost or duplicated)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import requests

from tests.support.submitters import CLIENTS, PER_CLIENT, run_clients, stored_submissions
from tests.support.leaderboard import ROOT, ServerProcess, alive, body, named, pg_database

SERVING = re.compile(r"^worker (\d+) pid (\d+) serving$", re.M)
SUBMITTED = re.compile(r"\[(\d+)\] werkzeug .*POST /api/v1/submissions HTTP/1\.1\S*\" 20[01] ")
"""A submission acknowledged, in the server's log: the pid of the worker that served it (werkzeug colours the line)."""


def _wait(predicate, seconds: float, what: str):  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it returns something true, at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {seconds} s waiting for {what}")


def _workers_up(server: ServerProcess, count: int, exclude: set[int] = frozenset()) -> list[int]:  # type: ignore[assignment]
    """The server's ``count`` workers once each has printed its ``serving`` line (none of ``exclude``)."""
    serving = {int(pid) for _, pid in SERVING.findall(server.log.read_text())}
    pids = server.worker_pids()
    ok = len(pids) == count and set(pids) <= serving and not set(pids) & exclude
    return pids if ok else []


_CRASH_LOOP = textwrap.dedent("""
    import os, sys, time
    from leaderboard.server import prefork
    from leaderboard.server.serving import listen

    def worker(index):
        os.write(1, f"start {index} {os.getpid()}\\n".encode())  # one write: lines of two processes never interleave
        if index == 0:
            os._exit(3)  # a worker that dies at start-up, every time
        time.sleep(600)  # SIGTERM interrupts it

    sys.exit(prefork.run(listen("127.0.0.1", 0), 2, worker, restarts_per_minute=3))
""")


def test_a_crash_loop_is_restarted_at_most_n_times_a_minute_and_sigterm_reaps_every_worker() -> None:
    proc = subprocess.Popen([sys.executable, "-c", _CRASH_LOOP], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    try:
        _wait(lambda: sum(line.startswith("start 0 ") for line in lines) >= 4, 30, "worker 0's 3 restarts")
        time.sleep(2.0)  # unbounded, worker 0 would restart hundreds of times in 2 s; bounded, it waits 60 s
        starts = [line.split() for line in list(lines) if line.startswith("start ")]
        assert sum(s[1] == "0" for s in starts) == 4  # the first start and 3 restarts: restarts_per_minute=3
        assert sum(s[1] == "1" for s in starts) == 1
        survivor = int(next(s[2] for s in starts if s[1] == "1"))
        assert alive(survivor)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0  # 5 s grace at most, then SIGKILL: 20 s leaves room on a loaded machine
        assert not alive(survivor)  # stopped and reaped by the supervisor before it exited
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        reader.join(timeout=10)
    assert any("restarting it in " in line for line in lines), lines[-5:]


def test_serve_workers_replaces_a_killed_worker_and_sigint_stops_them_all(tmp_path: Path, make_server, token_for,
                                                                            random_bundle) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'workers.db'}"
    token = token_for(db)
    server = make_server(db, "--workers", "2").start()
    first = _wait(lambda: _workers_up(server, 2), 60, "2 workers serving")
    answer = requests.post(server.url + "/api/v1/submissions", data=body(named(random_bundle, "workers 0")),
                           headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert answer.status_code == 201, answer.text
    sid = answer.json()["id"]
    victim = first[1]
    os.kill(victim, signal.SIGKILL)
    second = _wait(lambda: _workers_up(server, 2, exclude={victim}), 60, "the killed worker replaced")
    assert set(first) - {victim} < set(second)
    _wait(lambda: requests.get(f"{server.url}/api/v1/submissions/{sid}", timeout=10).json()["status"] == "verified",
          120, "the replay verifier")
    log = server.log.read_text()
    verified_by = {int(pid) for pid in re.findall(rf"\[(\d+)\] leaderboard\.server\.worker submission {sid}: verified", log)}
    zero = {int(pid) for index, pid in SERVING.findall(log) if index == "0"}
    assert verified_by and verified_by <= zero  # the verifier thread runs in worker 0 only
    assert "was killed by SIGKILL; restarting it" in log
    server.proc.send_signal(signal.SIGINT)
    assert server.proc.wait(timeout=20) == 0
    assert not [pid for pid in {*first, *second} if alive(pid)]


@pytest.mark.slow
def test_4_workers_on_postgresql_lose_no_acknowledged_submission_when_one_is_killed(pg_cluster: str, make_server, token_for,
                                                                                    random_bundle) -> None:  # type: ignore[no-untyped-def]
    with pg_database(pg_cluster) as db:
        token = token_for(db)
        server = make_server(db, "--no-verify", "--workers", "4").start()
        first = _wait(lambda: _workers_up(server, 4), 60, "4 workers serving")
        acks: dict[str, int] = {}
        errors: list[str] = []
        # as in test_lb_load: once 150 are acknowledged no new submission starts until the replacement is up, so the
        # kill lands mid-load however slowly this thread is scheduled
        replaced = threading.Event()
        threads = run_clients(server.url, token, random_bundle, acks, errors, gate=replaced, cap=150)
        try:
            _wait(lambda: len(acks) >= 60 or not any(t.is_alive() for t in threads), 300, "60 acknowledged")
            served = [int(pid) for pid in SUBMITTED.findall(server.log.read_text())]
            victim = next(pid for pid in reversed(served) if pid in first)  # a worker carrying load
            os.kill(victim, signal.SIGKILL)
            acknowledged_before_kill = dict(acks)
            second = _wait(lambda: _workers_up(server, 4, exclude={victim}), 60, "the killed worker replaced")
        finally:
            replaced.set()
            for t in threads:
                t.join(timeout=300)  # each submission retries for 90 s at most (test_lb_load._submit_all)
        assert not any(t.is_alive() for t in threads)
        assert not errors, errors[:5]
        assert 60 <= len(acknowledged_before_kill) < CLIENTS * PER_CLIENT  # the kill really hit the load
        stored = stored_submissions(server.url)
        assert len(stored) == len({name for name, _ in stored}) == CLIENTS * PER_CLIENT  # each name once: no duplicate
        assert dict(stored) == acks  # nothing acknowledged is lost, each with the id it was acknowledged with
        served_by = {int(pid) for pid in SUBMITTED.findall(server.log.read_text())}
        assert len(served_by) >= 2 and served_by - {victim}, served_by  # more than one worker served submissions
        assert len(set(second) - set(first)) == 1  # one new worker, in the killed one's place
        server.stop()  # SIGTERM to the supervisor
        assert server.proc.returncode == 0
        assert not [pid for pid in {*first, *second} if alive(pid)]
