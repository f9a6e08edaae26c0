"""Concurrent submitters for the load tests (test_lb_load.py, test_lb_workers.py): each client submits its bundles
until acknowledged, retrying through connection failures (a killed server) and the proxy's 502 (a killed worker)."""

from __future__ import annotations

import threading
import time
from typing import Any

import requests

from leaderboard.client import PROXY_RETRY
from tests.support.leaderboard import body, named

CLIENTS, PER_CLIENT = 20, 10


def submit_all(
    url: str,
    token: str,
    bundles: list[tuple[str, bytes]],
    acks: dict[str, int],
    errors: list[str],
    gate: threading.Event | None = None,
    cap: int = 0,
) -> None:
    """Submit each bundle until acknowledged, retrying through connection failures (a restart). With a ``gate``,
    no new submission starts once ``cap`` are acknowledged until the gate opens."""
    headers = {"Authorization": f"Bearer {token}"}
    with requests.Session() as session:
        for name, data in bundles:
            if gate is not None and len(acks) >= cap:
                gate.wait()
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
                if r.status_code in PROXY_RETRY and time.monotonic() < deadline:  # the worker behind nginx died
                    time.sleep(0.05)
                    continue
                if r.status_code in (200, 201):
                    acks[name] = r.json()["id"]
                else:
                    errors.append(f"{name}: HTTP {r.status_code} {r.text[:200]}")
                break


def run_clients(
    url: str,
    token: str,
    template: dict[str, Any],
    acks: dict[str, int],
    errors: list[str],
    gate: threading.Event | None = None,
    cap: int = 0,
) -> list[threading.Thread]:
    threads = []
    for c in range(CLIENTS):
        bundles = [
            (f"load c{c:02d} n{i:02d}", body(named(template, f"load c{c:02d} n{i:02d}"))) for i in range(PER_CLIENT)
        ]
        threads.append(threading.Thread(target=submit_all, args=(url, token, bundles, acks, errors, gate, cap)))
    for t in threads:
        t.start()
    return threads


def stored_submissions(url: str) -> list[tuple[str, int]]:
    rows = requests.get(url + "/api/v1/submissions", timeout=30).json()["submissions"]
    return sorted((r["agent"]["name"], r["id"]) for r in rows)
