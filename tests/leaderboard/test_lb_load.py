"""Load on a real server process: 200 submissions from 20 concurrent clients, and a kill -9 in the middle."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from lb_support import body, named

CLIENTS, PER_CLIENT = 20, 10


def _submit_all(url: str, token: str, bundles: list[tuple[str, bytes]], acks: dict[str, int], errors: list[str]) -> None:
    """Submit each bundle until acknowledged, retrying through connection failures (a restart)."""
    headers = {"Authorization": f"Bearer {token}"}
    with requests.Session() as session:
        for name, data in bundles:
            deadline = time.monotonic() + 90
            while True:
                try:
                    r = session.post(url + "/api/v1/submissions", data=data, headers=headers, timeout=30)
                except requests.RequestException:
                    if time.monotonic() > deadline:
                        errors.append(f"{name}: server unreachable")
                        break
                    time.sleep(0.05)
                    continue
                if r.status_code in (200, 201):
                    acks[name] = r.json()["id"]
                else:
                    errors.append(f"{name}: HTTP {r.status_code} {r.text[:200]}")
                break


def _run_clients(url: str, token: str, template: dict[str, Any], acks: dict[str, int], errors: list[str]) -> list[threading.Thread]:
    threads = []
    for c in range(CLIENTS):
        bundles = [(f"load c{c:02d} n{i:02d}", body(named(template, f"load c{c:02d} n{i:02d}"))) for i in range(PER_CLIENT)]
        threads.append(threading.Thread(target=_submit_all, args=(url, token, bundles, acks, errors)))
    for t in threads:
        t.start()
    return threads


def _stored(url: str) -> list[tuple[str, int]]:
    rows = requests.get(url + "/api/v1/submissions", timeout=30).json()["submissions"]
    return sorted((r["agent"]["name"], r["id"]) for r in rows)


@pytest.mark.slow
def test_200_concurrent_submissions_each_stored_once(tmp_path: Path, make_server, token_for, random_bundle) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'load.db'}"
    token = token_for(db)
    server = make_server(db, "--no-verify").start()
    acks: dict[str, int] = {}
    errors: list[str] = []
    for t in _run_clients(server.url, token, random_bundle, acks, errors):
        t.join()
    assert not errors, errors[:5]
    assert len(acks) == CLIENTS * PER_CLIENT
    assert _stored(server.url) == sorted(acks.items())


@pytest.mark.slow
def test_kill_9_during_load_loses_no_acknowledged_submission(tmp_path: Path, make_server, token_for, random_bundle) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'crash.db'}"
    token = token_for(db)
    first = make_server(db, "--no-verify").start()
    acks: dict[str, int] = {}
    errors: list[str] = []
    threads = _run_clients(first.url, token, random_bundle, acks, errors)
    while len(acks) < 60 and any(t.is_alive() for t in threads):
        time.sleep(0.01)
    acknowledged_before_kill = dict(acks)
    first.kill()
    second = make_server(db, "--no-verify", port=first.port).start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]
    assert 60 <= len(acknowledged_before_kill) < CLIENTS * PER_CLIENT  # the kill really hit the load
    stored = dict(_stored(second.url))
    assert len(stored) == CLIENTS * PER_CLIENT  # every submission once: no loss, no duplicate after retries
    assert all(stored[name] == sid for name, sid in acks.items())
