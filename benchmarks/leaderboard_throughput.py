"""Leaderboard throughput, measured side by side in one run.

1. Submissions per second through a real ``sapo-gym leaderboard serve`` process (SQLite, WAL,
   synchronous=FULL), with 1 client and with 20 concurrent clients.
2. Server-side admission (strict schema + aggregates + board checks) and replay verification
   speed per available board, for the expert baseline's bundle of the full split.

    python benchmarks/leaderboard_throughput.py [--submissions 200]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from leaderboard.boards import BoardRegistry  # noqa: E402
from leaderboard.checks import admit  # noqa: E402
from leaderboard.replay import replay_bundle  # noqa: E402
from leaderboard.seed import baseline_bundle  # noqa: E402
from leaderboard.server.store import Store  # noqa: E402

VAULT = "sapo/Vault-v0:test"


def _serve(db: str) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sapo_cli",
            "leaderboard",
            "--db",
            db,
            "--board",
            VAULT,
            "serve",
            "--port",
            str(port),
            "--no-verify",
            "--rate-per-minute",
            "0",
        ],  # throughput, not the rate limit
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            requests.get(url + "/api/v1/boards", timeout=1)
            return proc, url
        except requests.RequestException:
            time.sleep(0.1)
    raise RuntimeError("server did not start")


def submissions_per_second(n: int, clients: int, template: dict) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{tmp}/bench.db"
        _, token = Store(db).create_token("bench")
        proc, url = _serve(db)
        bodies = []
        for i in range(n):
            template["agent"]["name"] = f"bench {clients} {i}"
            bodies.append(json.dumps(template).encode())
        headers = {"Authorization": f"Bearer {token}"}

        def client(part: list[bytes]) -> None:
            with requests.Session() as s:
                for b in part:
                    assert s.post(url + "/api/v1/submissions", data=b, headers=headers, timeout=60).status_code == 201

        threads = [threading.Thread(target=client, args=(bodies[c::clients],)) for c in range(clients)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
        proc.terminate()
        proc.wait()
        return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=200)
    args = parser.parse_args()
    from trainers.hardware import describe

    print(describe())  # kernels, rounding and dtype speed differ between CPUs: every table says which ran it
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    vault = next(iter(BoardRegistry([VAULT])))
    template = baseline_bundle(vault, "random")
    one = submissions_per_second(args.submissions, 1, template)
    many = submissions_per_second(args.submissions, 20, template)
    print(f"\nsubmissions/s through the HTTP server (SQLite WAL, {args.submissions} Vault bundles of 16 episodes)")
    print(f"{'clients':>8} {'subm/s':>9} {'ratio':>7}")
    print(f"{1:>8} {one:>9.1f} {1.0:>7.2f}")
    print(f"{20:>8} {many:>9.1f} {many / one:>7.2f}")

    print(f"\n{'board':<44} {'episodes':>8} {'admit s':>8} {'replay s':>9} {'replay ep/s':>12} {'replay/admit':>13}")
    registry = BoardRegistry()
    for board in registry:
        bundle = baseline_bundle(board, "expert")
        start = time.perf_counter()
        admit(bundle, registry)
        t_admit = time.perf_counter() - start
        start = time.perf_counter()
        result = replay_bundle(bundle)
        t_replay = time.perf_counter() - start
        assert result.verified, result.message
        n = len(bundle["episodes"])
        print(
            f"{board.key:<44} {n:>8} {t_admit:>8.2f} {t_replay:>9.2f} {n / t_replay:>12.1f} {t_replay / t_admit:>13.1f}"
        )
    for key, why in registry.skipped.items():
        print(f"{key:<44} unavailable: {why[:60]}")


if __name__ == "__main__":
    main()
