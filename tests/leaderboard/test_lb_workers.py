"""``sapo-gym leaderboard serve --workers N``: nginx and gunicorn supervised by the command (a killed worker replaced by
gunicorn, no process outliving the command, the one verifier in the command's process), a submission and a live run
across gunicorn workers on PostgreSQL, and 4 workers under load with one of them killed -9 (no acknowledged
submission lost or duplicated)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
import requests

from tests.support.leaderboard import ServerProcess, alive, body, descendants, named, pg_database, run_dirs
from tests.support.live_protocol import Client, stored_bundle, uninterrupted
from tests.support.submitters import CLIENTS, PER_CLIENT, run_clients, stored_submissions


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
    """The server's ``count`` gunicorn workers (none of ``exclude``), or [] while they are not all up."""
    pids = server.worker_pids()
    return pids if len(pids) == count and not set(pids) & exclude else []


def test_a_killed_worker_is_replaced_the_command_verifies_and_sigint_stops_every_process(
    tmp_path: Path, make_server, token_for, random_bundle
) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'workers.db'}"
    token = token_for(db)
    server = make_server(db, "--workers", "2").start()
    first = _wait(lambda: _workers_up(server, 2), 60, "2 workers serving")
    everyone = [server.proc.pid, *descendants(server.proc.pid)]  # the command, nginx (master and worker), gunicorn's
    assert len(everyone) == 6, everyone
    answer = requests.post(
        server.url + "/api/v1/submissions",
        data=body(named(random_bundle, "workers 0")),
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    sid = answer.json()["id"]
    victim = first[1]
    os.kill(victim, signal.SIGKILL)
    second = _wait(lambda: _workers_up(server, 2, exclude={victim}), 60, "the killed worker replaced")
    assert set(first) - {victim} < set(second)
    _wait(
        lambda: requests.get(f"{server.url}/api/v1/submissions/{sid}", timeout=10).json()["status"] == "verified",
        120,
        "the replay verifier",
    )
    verified_by = {
        int(pid)
        for pid in re.findall(
            rf"\[(\d+)\] leaderboard\.server\.worker submission {sid}: verified", server.log.read_text()
        )
    }
    assert verified_by == {server.proc.pid}  # one verifier, in the command's own process
    server.proc.send_signal(signal.SIGINT)
    assert server.proc.wait(timeout=40) == 0  # nginx, then gunicorn, each within its 10 s drain
    assert not [pid for pid in {*everyone, *second} if alive(pid)]


def test_no_process_outlives_a_killed_command(tmp_path: Path, make_server) -> None:  # type: ignore[no-untyped-def]
    """``kill -9`` of the command alone: the kernel sends its children SIGTERM (``PR_SET_PDEATHSIG``), so nginx and
    gunicorn stop by themselves and the port is free again."""
    server = make_server(f"sqlite:///{tmp_path / 'orphans.db'}", "--no-verify").start()
    rest = _wait(
        lambda: descendants(server.proc.pid) if len(descendants(server.proc.pid)) == 4 else [],
        60,
        "nginx and gunicorn up",
    )
    left = run_dirs(rest)
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait(10)
    _wait(lambda: not [pid for pid in rest if alive(pid)], 30, "nginx and gunicorn gone")
    with pytest.raises(requests.ConnectionError):
        requests.get(server.url + "/api/v1/boards", timeout=10)
    assert len(left) == 1
    shutil.rmtree(left[0])  # the killed command's run directory: nothing else removes it


def test_a_submission_and_a_live_run_across_two_workers_on_postgresql(
    pg_cluster: str, make_server, token_for, random_bundle
) -> None:  # type: ignore[no-untyped-def]
    with pg_database(pg_cluster) as db:
        token = token_for(db)
        server = make_server(db, "--no-verify", "--workers", "2", "--rate-per-minute", "0").start()
        headers = {"Authorization": f"Bearer {token}"}
        sent = requests.post(server.url + "/api/v1/submissions", data=body(random_bundle), headers=headers, timeout=30)
        again = requests.post(server.url + "/api/v1/submissions", data=body(random_bundle), headers=headers, timeout=30)
        assert sent.status_code == 201 and again.json()["id"] == sent.json()["id"], (sent.text, again.text)
        assert requests.get(server.url + "/", timeout=30).status_code == 200
        client = Client(server.url, token, who="two workers: ")
        client.start()
        submission = None
        for _ in range(200):  # 16 Vault episodes end well within 200 steps
            submission = client.play(1)
            if submission is not None:
                break
        assert submission is not None and submission["id"] is not None, submission
        stored = stored_bundle(db, submission["id"])
        assert stored == uninterrupted(stored, client.who)
        server.stop()
        assert server.proc.returncode == 0


@pytest.mark.slow
def test_4_workers_on_postgresql_lose_no_acknowledged_submission_when_one_is_killed(
    pg_cluster: str, make_server, token_for, random_bundle
) -> None:  # type: ignore[no-untyped-def]
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
            victim = first[0]
            os.kill(victim, signal.SIGKILL)
            acknowledged_before_kill = dict(acks)
            second = _wait(lambda: _workers_up(server, 4, exclude={victim}), 60, "the killed worker replaced")
        finally:
            replaced.set()
            for t in threads:
                t.join(timeout=300)  # each submission retries for 90 s at most (tests.support.submitters)
        assert not any(t.is_alive() for t in threads)
        assert not errors, errors[:5]
        assert 60 <= len(acknowledged_before_kill) < CLIENTS * PER_CLIENT  # the kill really hit the load
        stored = stored_submissions(server.url)
        assert len(stored) == len({name for name, _ in stored}) == CLIENTS * PER_CLIENT  # each name once: no duplicate
        assert dict(stored) == acks  # nothing acknowledged is lost, each with the id it was acknowledged with
        assert len(set(second) - set(first)) == 1  # one new worker, in the killed one's place
        everyone = [server.proc.pid, *descendants(server.proc.pid)]
        server.stop()  # SIGTERM to the command
        assert server.proc.returncode == 0
        assert not [pid for pid in everyone if alive(pid)]
