"""The leaderboard server under load: locust, headless, against ``sapo-gym leaderboard serve`` on a
throwaway PostgreSQL, at 1 and at 4 server processes on the same machine, side by side.

For each configuration: a fresh database seeded alike (the expert and random baselines and ``--seed-rows``
verified submissions of mixed success), ``--tokens`` API tokens, a server on 127.0.0.1 (``--no-verify``: the
replay verifier is not what is measured; ``--rate-per-minute 0``: the per-token rate limit is off, or the load
would measure 429s), then ``locust --headless`` for ``--duration`` seconds with ``--users`` closed-loop
visitors (benchmarks/leaderboard_locustfile.py: fresh submissions, board page, episode views, JSON listing).
Every submission is new work (its episodes' outputs are nobody's: leaderboard.server.provenance would refuse
copies), pre-generated here. Sampled meanwhile: each server process's RSS, PostgreSQL's client backends; CPU
seconds of the server processes, of PostgreSQL and of locust. locust runs from its own venv
(scripts/setup_locust.sh, run here when it is missing) and shares the machine with everything it measures.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/leaderboard_load.py [--duration 60] [--users 16] [--workers 1,4]
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.leaderboard_load_probe import Sampler, cpu_snapshot, machine_line  # noqa: E402

TASKS = ("submit", "board page", "episode view", "JSON listing")
"""The locustfile's request names, in the table's order."""
LOCUSTFILE = ROOT / "benchmarks" / "leaderboard_locustfile.py"


# ------------------------------------------------------------------ bundles: each one new work
def mixed_bundle(expert: Mapping[str, Any], random_: Mapping[str, Any], i: int, n: int, tag: str) -> dict[str, Any]:
    """Episode j from the expert when ``(i * 7 + j * 3) % n < i`` else from the random agent (success spread over
    ``i``), every turn's think made ``tag``'s own (so the episodes are work nobody owns yet), aggregates recomputed."""
    from sapo_gym.bundle import aggregate

    out = copy.deepcopy(dict(random_))
    out["agent"]["name"] = tag
    episodes = []
    for j, (e, r) in enumerate(zip(expert["episodes"], random_["episodes"])):
        assert e["task_id"] == r["task_id"], "the two baselines' episodes are not aligned"
        ep = copy.deepcopy(e if (i * 7 + j * 3) % max(n, 1) < i else r)
        for t, turn in enumerate(ep["turns"]):
            turn["think"] = f"{tag} episode {j} turn {t}"
            turn["output"] = f"<think>{turn['think']}</think><action>{turn['action']}</action>"
        episodes.append(ep)
    out["episodes"] = episodes
    out["aggregates"] = aggregate(episodes)
    return out


def baselines() -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The Vault test board and its expert and random bundles (the templates of every generated bundle)."""
    from leaderboard.boards import BoardRegistry
    from leaderboard.seed import baseline_bundle
    from tests.support.leaderboard import VAULT

    board = next(iter(BoardRegistry([VAULT])))
    return board, baseline_bundle(board, "expert"), baseline_bundle(board, "random")


def write_bundles(path: Path, expert: Mapping[str, Any], random_: Mapping[str, Any], count: int) -> None:
    """``count`` fresh bundles for locust to submit, one JSON document a line."""
    with path.open("w") as f:
        for i in range(count):
            f.write(json.dumps(mixed_bundle(expert, random_, i % 16, 16, f"load {i}"), separators=(",", ":")) + "\n")


def seed_database(
    url: str, expert: Mapping[str, Any], random_: Mapping[str, Any], rows: int, tokens: int
) -> dict[str, Any]:
    """Baselines + ``rows`` verified submissions (summaries written, as the API does) + ``tokens`` tokens."""
    from leaderboard.boards import BoardRegistry
    from leaderboard.checks import admit
    from leaderboard.seed import seed_store
    from leaderboard.server import summaries
    from leaderboard.server.store import Store
    from tests.support.leaderboard import VAULT

    store, boards = Store(url), BoardRegistry([VAULT])
    ids = seed_store(store, boards, ("expert", "random"))
    token_id, _ = store.create_token("load seed")
    for i in range(rows):
        bundle = mixed_bundle(expert, random_, i, rows, f"seeded {i}")
        ids.append(store.add(bundle, admit(bundle, boards), submitter="load seed", token_id=token_id).id)
    for sid in ids:
        summaries.ensure(store, sid)
        store.finish(sid, True, "seeded for the load benchmark")
    out = {"tokens": [store.create_token(f"load {k}")[1] for k in range(tokens)], "submissions": ids}
    store.engine.dispose()
    return out


# ------------------------------------------------------------------ locust
def locust_binary(explicit: str | None) -> str:
    """``--locust`` if given, else scripts/setup_locust.sh's venv (built on first use, ~12 s)."""
    if explicit:
        return explicit
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup_locust.sh")], check=True, capture_output=True, text=True
    )
    return done.stdout.strip().splitlines()[-1]


def run_locust(locust: str, url: str, config: Path, users: int, duration: int, prefix: Path) -> float:
    """Run the locustfile headless against ``url``; the CPU seconds locust used (it is waited for here)."""
    cmd = [
        locust,
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--host",
        url,
        "-u",
        str(users),
        "-r",
        str(users),
        "-t",
        f"{duration}s",
        "--csv",
        str(prefix),
        "--only-summary",
        "--stop-timeout",
        "5",
        "--loglevel",
        "WARNING",
    ]
    env = {**os.environ, "SAPO_LOAD_CONFIG": str(config), "OMP_NUM_THREADS": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(f"{prefix}.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            proc.wait(timeout=duration + 120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # locust is the only child waited for meanwhile
    if not Path(f"{prefix}_stats.csv").exists():
        raise RuntimeError(
            f"locust wrote no stats (exit {proc.returncode}): {Path(f'{prefix}.log').read_text()[-2000:]}"
        )
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


# ------------------------------------------------------------------ locust's CSV and the table
def read_stats(path: Path) -> dict[str, dict[str, float]]:
    """``*_stats.csv`` per request name (and ``Aggregated``): requests, failures, rps, p50, p95 (ms)."""

    def num(row: dict[str, str], key: str) -> float:
        value = row.get(key, "")
        return float(value) if value not in ("", "N/A") else float("nan")

    out: dict[str, dict[str, float]] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            out[row["Name"]] = {
                "requests": num(row, "Request Count"),
                "failures": num(row, "Failure Count"),
                "rps": num(row, "Requests/s"),
                "p50": num(row, "50%"),
                "p95": num(row, "95%"),
            }
    return out


def summarize(stats: Mapping[str, Mapping[str, float]], duration: float, probe: Mapping[str, Any]) -> dict[str, Any]:
    """The table's numbers for one configuration: locust's per-request stats and what was sampled (``probe``)."""
    total = stats.get("Aggregated", {"requests": 0.0, "failures": 0.0, "rps": 0.0})
    submit = stats.get("submit", {"requests": 0.0, "failures": 0.0})
    out: dict[str, Any] = {
        "submissions/s": (submit["requests"] - submit["failures"]) / duration,
        "requests/s": total["requests"] / duration,
        "error rate": total["failures"] / total["requests"] if total["requests"] else float("nan"),
    }
    for name in TASKS:
        row = stats.get(name, {"p50": float("nan"), "p95": float("nan")})
        out[f"{name} p50 / p95 ms"] = (row["p50"], row["p95"])
    return {**out, **probe}


ROWS = (
    "submissions/s",
    "requests/s",
    *(f"{name} p50 / p95 ms" for name in TASKS),
    "error rate",
    "server processes",
    "RSS per server process, max MiB",
    "RSS of all server processes, MiB",
    "PostgreSQL client backends, max",
    "CPU cores: server processes",
    "CPU cores: PostgreSQL",
    "CPU cores: locust",
    "CPU cores: anything else (this sampler, other jobs)",
    "CPU cores busy, whole machine",
)


def _cell(value: Any) -> str:
    if isinstance(value, tuple):
        return " / ".join(_cell(v) for v in value)
    if isinstance(value, list):
        return ", ".join(_cell(v) for v in value)
    if isinstance(value, float):
        return (
            "–"
            if value != value
            else f"{value:.4f}"
            if 0 < abs(value) < 0.01
            else f"{value:.3g}"
            if abs(value) < 10
            else f"{value:.0f}"
        )
    return str(value)


def _ratio(a: Any, b: Any) -> str:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return " / ".join(_ratio(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a and a == a and b == b:
        return f"{b / a:.2f}"
    return "–"


def table(results: Mapping[int, Mapping[str, Any]]) -> str:
    """Markdown: one column per process count, then the last over the first (when there are two or more)."""
    counts = sorted(results)
    head = ["", *(f"{n} process{'es' if n > 1 else ''}" for n in counts)]
    ratio = len(counts) > 1
    if ratio:
        head.append(f"{counts[-1]} / {counts[0]}")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in ROWS:
        cells = [key, *(_cell(results[n].get(key, "–")) for n in counts)]
        if ratio:
            cells.append(_ratio(results[counts[0]].get(key), results[counts[-1]].get(key)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------ one configuration
def measure(
    workers: int,
    args: argparse.Namespace,
    cluster: Any,
    locust: str,
    work: Path,
    bundles: Path,
    templates: tuple[dict[str, Any], dict[str, Any]],
) -> dict[str, Any]:
    """Seed a fresh database, serve it with ``workers`` processes, load it; the configuration's numbers."""
    from tests.support.leaderboard import ServerProcess
    from tests.support.postgres import create_database

    url = create_database(cluster.url, f"load_w{workers}")
    seeded = seed_database(url, *templates, rows=args.seed_rows, tokens=args.tokens)
    config = work / f"config_w{workers}.json"
    config.write_text(
        json.dumps({"bundles": str(bundles), "spec_hash": args.spec_hash, "episodes": args.episodes, **seeded})
    )
    extra = ["--no-verify", "--rate-per-minute", "0", *(["--workers", str(workers)] if workers > 1 else [])]
    server = ServerProcess(url, work / f"server_w{workers}.log", *extra)
    sampler = None
    try:
        server.start(timeout=180)
        sampler = Sampler(server.proc.pid, url, cluster.postmaster_pid()).start()
        time.sleep(1.0)  # the workers' first samples
        before = cpu_snapshot(server.proc.pid, cluster.postmaster_pid())
        start = time.monotonic()
        locust_cpu = run_locust(locust, server.url, config, args.users, args.duration, work / f"locust_w{workers}")
        elapsed = time.monotonic() - start
        probe = sampler.finish(before, cpu_snapshot(server.proc.pid, cluster.postmaster_pid()), locust_cpu, elapsed)
    finally:
        if sampler is not None:
            sampler.stop()
        server.stop()
        if sampler is not None:
            sampler.reap()
    return summarize(read_stats(work / f"locust_w{workers}_stats.csv"), float(args.duration), probe)


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", default="1,4", help="comma-separated server process counts (default 1,4)")
    p.add_argument("--duration", type=int, default=60, help="seconds of load per configuration")
    p.add_argument("--users", type=int, default=16, help="closed-loop locust visitors")
    p.add_argument("--tokens", type=int, default=4, help="API tokens the visitors submit with, in turn")
    p.add_argument("--seed-rows", type=int, default=200, help="verified submissions on the board before the load")
    p.add_argument(
        "--bundles", type=int, default=None, help="pre-generated fresh bundles (default 150 per second of load)"
    )
    p.add_argument("--locust", default=None, help="locust executable (default: scripts/setup_locust.sh's venv)")
    p.add_argument("--keep", default=None, help="keep the CSVs and logs in this directory")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from tests.support.leaderboard import free_port
    from tests.support.postgres import throwaway_cluster

    args = _args(argv)
    os.environ["OMP_NUM_THREADS"] = "1"
    counts = [int(n) for n in args.workers.split(",")]
    load = os.getloadavg()[0]  # other work on the machine shares its cores with the measurement
    locust = locust_binary(args.locust)
    board, expert, random_ = baselines()
    args.spec_hash, args.episodes = board.spec_hash, len(expert["episodes"])
    with _workdir(args.keep) as work, throwaway_cluster(free_port(), max_connections=300) as cluster:
        bundles = work / "bundles.jsonl"
        write_bundles(bundles, expert, random_, args.bundles or 150 * args.duration)
        results = {n: measure(n, args, cluster, locust, work, bundles, (expert, random_)) for n in counts}
    print(machine_line() + f"; 1-min load average before the runs: {load:.2f}")
    print(
        f"{args.users} locust visitors, {args.duration} s per configuration, PostgreSQL {args.seed_rows} seeded rows; "
        f"locust {subprocess.run([locust, '--version'], capture_output=True, text=True).stdout.split()[1]}\n"
    )
    print(table(results))
    return 0


@contextmanager
def _workdir(keep: str | None) -> Iterator[Path]:
    """``keep`` (created, left in place) or a temp dir removed afterwards."""
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        yield Path(keep)
        return
    with tempfile.TemporaryDirectory(prefix="sapo-load-") as tmp:
        yield Path(tmp)


if __name__ == "__main__":
    sys.exit(main())
