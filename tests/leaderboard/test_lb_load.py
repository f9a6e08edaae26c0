"""Load on a real server process: 200 submissions from 20 concurrent clients, and a kill -9 in the middle."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.support.submitters import CLIENTS, PER_CLIENT, run_clients, stored_submissions


@pytest.mark.slow
def test_200_concurrent_submissions_each_stored_once(tmp_path: Path, make_server, token_for, random_bundle) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'load.db'}"
    token = token_for(db)
    server = make_server(db, "--no-verify").start()
    acks: dict[str, int] = {}
    errors: list[str] = []
    for t in run_clients(server.url, token, random_bundle, acks, errors):
        t.join()
    assert not errors, errors[:5]
    assert len(acks) == CLIENTS * PER_CLIENT
    assert stored_submissions(server.url) == sorted(acks.items())


@pytest.mark.slow
def test_kill_9_during_load_loses_no_acknowledged_submission(
    tmp_path: Path, make_server, token_for, random_bundle
) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'crash.db'}"
    token = token_for(db)
    first = make_server(db, "--no-verify").start()
    acks: dict[str, int] = {}
    errors: list[str] = []
    # The kill must land before the load ends, however slowly this thread gets scheduled among 20 clients: once
    # 150 are acknowledged no new submission starts until the restart (at most 20 more are in flight), so at
    # most 170 of 200 can be acknowledged by the first server.
    restarted = threading.Event()
    threads = run_clients(first.url, token, random_bundle, acks, errors, gate=restarted, cap=150)
    while len(acks) < 60 and any(t.is_alive() for t in threads):
        time.sleep(0.01)
    first.kill()
    acknowledged_before_kill = dict(acks)  # after the kill: every one of them was acknowledged by the first server
    second = make_server(db, "--no-verify", port=first.port).start()
    restarted.set()
    for t in threads:
        t.join()
    assert not errors, errors[:5]
    assert 60 <= len(acknowledged_before_kill) < CLIENTS * PER_CLIENT  # the kill really hit the load
    stored = dict(stored_submissions(second.url))
    assert len(stored) == CLIENTS * PER_CLIENT  # every submission once: no loss, no duplicate after retries
    assert all(stored[name] == sid for name, sid in acks.items())
