"""The env server under load: ``sapo-gym env serve`` (uvicorn behind nginx, as deployed) on 127.0.0.1, driven by N
concurrent WebSocket sessions speaking OpenEnv's protocol with this server's types, from one process on uvloop:
picows sessions by default (:mod:`benchmarks.picows_sessions`: the cheapest load generator on the cores it shares
with the server), or the package's own asyncio client (``--client package``:
:class:`sapo_gym.remote.client.SapoEnvClient`, OpenEnv's ``EnvClient``).

For each env, server process count (``--workers``) and N: a fresh server (``--max-sessions N``), its idle RSS, then
N sessions connected at once; once all are open the clock starts and each session plays expert episodes (the
privileged ``expert_action`` of each observation: every action valid) until ``--steps`` steps in all or
``--seconds`` pass. Reported: steps/s (resets take time in the window too, not counted as steps), p50/p99 of a
step's latency as the client sees it (send to parsed answer), the server's RSS per session (the server's
processes, the serve command, nginx and uvicorn, loaded minus idle, divided by N), the server's CPU seconds per
step (its process tree; also split into uvicorn and nginx, and the kernel's part of it: the processes' system
time), and the load generator's own CPU (it shares the machine with the server). Beside them, the same env's step in process (the env's share of a served step; in the
load generator's process, on its interpreter).

``--scheduling batch,other`` runs each configuration's server once under each CPU scheduling policy of the command
(``--scheduling``), and ``--server-python`` once with each CPython build (each needs the serve extra; this checkout
is put on its ``PYTHONPATH``), one after the other; the table names each server's policy and Python.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/env_server_load.py [--envs alfworld-mini,webshop]
        [--sessions 1,16,64,256] [--workers 1] [--steps 6000] [--seconds 20] [--client picows]
        [--scheduling batch[,other]] [--server-python PYTHON[,PYTHON...]]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.env_workers import cpu_line, interpreter, interpreter_line  # noqa: E402
from benchmarks.leaderboard_load_probe import _TICK, _machine, _stat, rss_kib, tree  # noqa: E402

ENVS = {"alfworld-mini": "sapo/ALFWorld-Mini-v0", "webshop": "sapo/WebShop-Mini-v0"}
"""The envs measured: ALFWorld-Mini and WebShop's small catalog (200 products)."""
START_TIMEOUT_S = 120.0
CONNECT_TIMEOUT_S = 180.0
"""Every session's env is built when its socket opens: 256 of them take a while on a busy machine."""


def action_text(command: str) -> str:
    return f"<think>the expert says so</think><action>{command}</action>"


# ------------------------------------------------------------------ the server, as deployed
@dataclass
class Server:
    proc: subprocess.Popen
    url: str

    def processes(self) -> list[int]:
        """The serve command and every process under it (nginx's master and worker, the uvicorn processes)."""
        return tree(self.proc.pid)

    def rss_mib(self) -> float:
        return sum(rss_kib(pid) or 0 for pid in self.processes()) / 1024

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far of the server's processes, by kind (``uvicorn``, ``nginx``, ``command``), and apart the
        kernel's part of them all (``kernel``: their ``stime`` and ``cstime``), from one read of each ``/proc`` stat."""
        out = {"uvicorn": 0.0, "nginx": 0.0, "command": 0.0, "kernel": 0.0}
        for pid in self.processes():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            fields = _stat(pid)
            if fields is None:
                continue
            kind = "command" if pid == self.proc.pid else "uvicorn" if b"uvicorn" in cmdline else "nginx"
            out[kind] += sum(int(v) for v in fields[11:15]) / _TICK
            out["kernel"] += (int(fields[12]) + int(fields[14])) / _TICK
        return out


@contextmanager
def serve(env_id: str, sessions: int, workers: int, log: Path, python: str, scheduling: str) -> Iterator[Server]:
    """``sapo-gym env serve --scheduling scheduling`` run by the CPython ``python`` on 127.0.0.1 and a free port,
    bounded start; stopped (SIGTERM, then SIGKILL) after."""
    cmd = [
        python,
        "-m",
        "sapo_cli",
        "env",
        "serve",
        env_id,
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--max-sessions",
        str(sessions),
        "--max-connections",
        str(max(64, sessions + 8)),
        "--max-connections-per-client",
        str(sessions + 8),
        "--workers",
        str(workers),
        "--drain-seconds",
        "2",
        "--scheduling",
        scheduling,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            line = _first_line(proc, START_TIMEOUT_S)
            if "serving" not in line:
                raise RuntimeError(f"the server did not start: {line!r}; see {log}")
            yield Server(proc, line.split(" on ", 1)[1].split()[0])
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            proc.stdout.close()


def _first_line(proc: subprocess.Popen, timeout_s: float) -> str:
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    return box[0] if box else ""


# ------------------------------------------------------------------ the load
@dataclass
class Load:
    """Shared by the sessions of one run: the bounds and what was counted."""

    target_steps: int
    deadline: float = 0.0
    steps: int = 0
    resets: int = 0
    errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)

    def over(self) -> bool:
        return self.steps >= self.target_steps or time.monotonic() >= self.deadline


async def session(url: str, index: int, load: Load, go: asyncio.Event, connected: list[int]) -> None:
    """One session of the package's client (``--client package``): connect, wait for the start, play expert
    episodes until the load is over."""
    from sapo_gym.remote.client import SapoEnvClient
    from sapo_gym.remote.wire_types import SapoAction

    client = SapoEnvClient(base_url=url, connect_timeout_s=CONNECT_TIMEOUT_S, message_timeout_s=120.0)
    rng = random.Random(index)
    try:
        await client.connect()
        first = await client.reset(seed=index, options={"task_index": rng.randrange(1 << 16)})
        connected.append(index)
        await go.wait()
        while not load.over():
            result, load.resets = first, load.resets + 1
            while not result.done and not load.over():
                started = time.perf_counter()
                result = await client.step(SapoAction(text=action_text(result.observation.expert_action)))
                load.latencies.append(time.perf_counter() - started)
                load.steps += 1
            first = await client.reset(seed=index, options={"task_index": rng.randrange(1 << 16)})
    except Exception as exc:  # counted and reported: a failed session must show in the table
        load.errors.append(f"session {index}: {type(exc).__name__}: {exc}"[:300])
    finally:
        await client.close()


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _package_sessions(url: str, sessions: int, load: Load, connected: list[int]) -> tuple[Any, list[Any]]:
    """The package's client: one task a session; (start them, what finishes when they are done)."""
    go = asyncio.Event()
    tasks = [asyncio.create_task(session(url, i, load, go, connected)) for i in range(sessions)]
    return go.set, tasks


async def _picows_sessions(url: str, sessions: int, load: Load, connected: list[int]) -> tuple[Any, list[Any]]:
    """picows: one frame-callback listener a session (:mod:`benchmarks.picows_sessions`)."""
    from openenv.core.utils import convert_to_ws_url

    from benchmarks.picows_sessions import open_sessions

    ws_url = convert_to_ws_url(url) + "/ws"  # as OpenEnv's own client builds it
    return await open_sessions(ws_url, sessions, load, connected, action_text, CONNECT_TIMEOUT_S)


CLIENTS = {"picows": _picows_sessions, "package": _package_sessions}
"""The load generators (``--client``): picows (the default, the cheapest on the shared cores) and the package's own
asyncio client (OpenEnv's ``EnvClient``, as a trainer's rollout workers talk to the server)."""


async def drive(server: Server, sessions: int, args: argparse.Namespace) -> dict[str, Any]:
    """Connect ``sessions`` sessions, then load the server for the run's bounds; the run's numbers."""
    load, connected = Load(args.steps), []
    start, pending = await CLIENTS[args.client](server.url, sessions, load, connected)
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while len(connected) + len(load.errors) < sessions:
        if time.monotonic() > deadline:  # bounded: a session closed without an answer must not hang the run
            load.errors.append(f"{sessions - len(connected)} sessions had no first answer in {CONNECT_TIMEOUT_S:g} s")
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # the connections' own work settles
    rss = server.rss_mib()
    cpu0, own0, machine0, t0 = server.cpu(), _own_cpu(), _machine(), time.monotonic()
    load.deadline = t0 + args.seconds
    start()
    while not load.over() and not all(t.done() for t in pending):
        await asyncio.sleep(0.05)
    elapsed = time.monotonic() - t0
    cpu1, own1, machine1 = server.cpu(), _own_cpu(), _machine()
    rss = max(rss, server.rss_mib())
    await asyncio.wait_for(asyncio.gather(*pending), CONNECT_TIMEOUT_S)
    busy = (machine1[0] - machine0[0]) / max(1, machine1[1] - machine0[1])
    return {
        "steps": load.steps,
        "resets": load.resets,
        "elapsed": elapsed,
        "latencies": load.latencies,
        "errors": load.errors,
        "rss_mib": rss,
        "server_cpu": {k: cpu1[k] - cpu0[k] for k in cpu0},
        "client_cpu": own1 - own0,
        "machine_busy": busy,
    }


def measure(
    env_id: str, sessions: int, workers: int, setup: tuple[str, str], args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    """A fresh server for one configuration (``setup``: its Python and its scheduling policy): its idle RSS, then
    the load."""
    import uvloop

    python, scheduling = setup
    log = work / f"{env_id.split('/')[1]}_w{workers}_n{sessions}_{scheduling}.log"
    with serve(env_id, sessions, workers, log, python, scheduling) as server:
        time.sleep(1.0)
        idle = server.rss_mib()
        result = uvloop.run(drive(server, sessions, args))  # the load generator's loop: uvloop, as the server's
    version, linked, _ = interpreter(python)
    return {
        **result,
        "idle_rss_mib": idle,
        "sessions": sessions,
        "workers": workers,
        "env_id": env_id,
        "python": f"{version} ({linked})",
        "scheduling": scheduling,
    }


def in_process_step_ms(env_id: str, steps: int = 600) -> float:
    """Mean CPU milliseconds of one expert step (and its share of the resets) of the env in this process."""
    import gymnasium as gym

    import sapo_gym  # noqa: F401  (registers the ids)

    env, rng, done = gym.make(env_id), random.Random(0), True
    started = time.process_time()
    for _ in range(steps):
        if done:
            _, info = env.reset(seed=0, options={"task_index": rng.randrange(1 << 16)})
        _, _, terminated, truncated, info = env.step(action_text(info["expert_action"]))
        done = terminated or truncated
    env.close()
    return (time.process_time() - started) / steps * 1000


# ------------------------------------------------------------------ the report
COLUMNS = (
    "env",
    "server Python",
    "scheduling",
    "server processes",
    "sessions",
    "steps",
    "steps/s",
    "p50 ms",
    "p99 ms",
    "RSS / session MiB",
    "server CPU ms / step (uvicorn + nginx)",
    "of it, the kernel's",
    "in-process env ms / step",
    "load generator CPU, cores",
    "machine busy",
    "errors",
)


def row(r: dict[str, Any], env_ms: float) -> list[str]:
    lat = sorted(r["latencies"]) or [float("nan")]
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    steps = max(1, r["steps"])
    cpu = r["server_cpu"]
    total = cpu["uvicorn"] + cpu["nginx"] + cpu["command"]
    per_step = f"{total / steps * 1000:.2f} ({cpu['uvicorn'] / steps * 1000:.2f} + {cpu['nginx'] / steps * 1000:.2f})"
    return [
        r["env_id"].removeprefix("sapo/"),
        r["python"],
        r["scheduling"],
        str(r["workers"]),
        str(r["sessions"]),
        str(r["steps"]),
        f"{r['steps'] / r['elapsed']:,.0f}",
        f"{statistics.median(lat) * 1000:.1f}",
        f"{p99 * 1000:.1f}",
        f"{(r['rss_mib'] - r['idle_rss_mib']) / r['sessions']:.2f}",
        per_step,
        f"{cpu['kernel'] / steps * 1000:.3f}",
        f"{env_ms:.2f}",
        f"{r['client_cpu'] / r['elapsed']:.2f}",
        f"{r['machine_busy']:.0%}",
        str(len(r["errors"])),
    ]


def table(rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows)])


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", default="alfworld-mini,webshop", help=f"comma-separated, of {sorted(ENVS)}")
    p.add_argument("--sessions", default="1,16,64,256", help="comma-separated concurrent session counts")
    p.add_argument("--workers", default="1", help="comma-separated server process counts (--workers of the command)")
    p.add_argument("--steps", type=int, default=6000, help="steps in all per run, at most")
    p.add_argument("--seconds", type=float, default=20.0, help="seconds of load per run, at most")
    p.add_argument("--client", choices=sorted(CLIENTS), default="picows", help="the load generator (CLIENTS)")
    p.add_argument(
        "--server-python",
        default=sys.executable,
        help="comma-separated CPython executables to run the server with, each with the serve extra installed "
        "(default: this one); the load generator stays in this process",
    )
    p.add_argument(
        "--scheduling",
        default="batch",
        help="comma-separated CPU scheduling policies of the server (--scheduling of the command: batch, other)",
    )
    args = p.parse_args(argv)
    envs = [ENVS[name] for name in args.envs.split(",")]
    pythons = [path for path in args.server_python.split(",") if path.strip()]
    policies = args.scheduling.split(",")
    if not set(policies) <= {"batch", "other"}:
        p.error(f"--scheduling takes batch and other, got {args.scheduling!r}")
    print(cpu_line(), flush=True)
    for python in pythons:
        print(f"server: {interpreter_line(python)}", flush=True)
    print(f"load generator ({interpreter_line()}): {args.client} on uvloop, in this process", flush=True)
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="env-server-load-") as tmp:
        for env_id in envs:
            env_ms = in_process_step_ms(env_id)
            for workers in _ints(args.workers):
                setups = list(itertools.product(pythons, policies))
                for n, setup in itertools.product(_ints(args.sessions), setups):  # side by side
                    result = measure(env_id, n, workers, setup, args, Path(tmp))
                    rows.append(row(result, env_ms))
                    print(
                        " | ".join(rows[-1]), *result["errors"][:3], sep="\n  " if result["errors"] else "", flush=True
                    )
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
