"""Env steps per second of the three vector envs side by side: sync (this process), async (one process per env,
gymnasium's AsyncVectorEnv) and Ray (one actor per env), at 1 and 2 envs, in one run on this machine.

    OMP_NUM_THREADS=1 python benchmarks/env_workers.py [--envs ID[@K=V],...] [--seconds 4]

Default envs: ALFWorld-Mini on the compiled engine (sub-millisecond steps), the same games on the reference
engine (TextWorld + alfworld, tens of milliseconds a step: ``sapo/ALFWorld-Mini-v0@engine=reference``) and
WebShop (in process).

Each cell: build the vector env, reset, 5 warm-up steps, then batch steps with the oracle's actions for
``--seconds``; env steps = batch steps x envs (a step in which an env auto-resets counts as one of its steps).
Building and starting the workers is not timed. Ray runs a local one-node Ray of ``os.cpu_count()`` CPUs on
127.0.0.1, started once before the Ray cells. Prints the CPU, then a markdown table with each cell's ratio to
sync at 1 env.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # Ray on the loopback interface only

import sapo_gym  # noqa: E402

FEATURES = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile")
ENV_KWARGS = {"sapo/ALFWorld-Mini-v0": {"data_dir": "embedded-mini"}}


@dataclass
class Cell:
    env: str
    """The env spec as given (id, then @-separated K=V keyword arguments)."""
    vectorization: str
    envs: int
    steps: int
    seconds: float

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds


def cpu_line() -> str:
    """Model name, usable cores and the SIMD features the CPU reports (Linux /proc/cpuinfo)."""
    model, flags = platform.processor() or "unknown", set()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    have = [f for f in FEATURES if f in flags] or ["(flags not readable)"]
    return f"CPU: {model}; {cores} usable cores; features: {' '.join(have)}; OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}"


_INTERPRETER_PROBE = (
    "import sys; maps = open('/proc/self/maps').read() if sys.platform == 'linux' else '';"
    "print(sys.version.split()[0], 'shared' if 'libpython' in maps else 'static', sys.executable)"
)


@functools.cache  # one probe a path: every row of a run names its server's Python
def interpreter(python: str | None = None) -> tuple[str, str, str]:
    """The CPython at ``python`` (default: this one): its version, ``"shared"`` when its interpreter runs from a shared
    libpython (position-independent code, calls through the PLT) or ``"static"``, and its path. How it was built (PGO,
    LTO, libpython shared) sets how fast pure-Python code runs (a served step: within the noise, docs/remote.md "The
    server under load")."""
    out = subprocess.run(
        [python or sys.executable, "-c", _INTERPRETER_PROBE], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split(maxsplit=2)
    return out[0], out[1], out[2].strip()


def interpreter_line(python: str | None = None) -> str:
    version, linked, path = interpreter(python)
    return f"Python {version} (libpython {linked}): {path}"


def _actions(infos: dict, n: int) -> list[str]:
    has = infos.get("_expert_action", [False] * n)
    return [f"<think></think><action>{infos['expert_action'][i] if has[i] else 'look'}</action>" for i in range(n)]


def parse_env(spec: str) -> tuple[str, dict[str, str]]:
    """``ID@K=V@K2=V2`` -> (ID, its keyword arguments on top of ENV_KWARGS)."""
    env_id, *pairs = spec.split("@")
    return env_id, {**ENV_KWARGS.get(env_id, {}), **dict(p.split("=", 1) for p in pairs)}


def measure(spec: str, vectorization: str, envs: int, seconds: float) -> Cell:
    env_id, kwargs = parse_env(spec)
    vec = sapo_gym.make_vec(env_id, envs, vectorization=vectorization, **kwargs)
    try:
        _, infos = vec.reset(seed=0)
        for _ in range(5):
            _, _, _, _, infos = vec.step(_actions(infos, envs))
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            _, _, _, _, infos = vec.step(_actions(infos, envs))
            steps += envs
        return Cell(spec, vectorization, envs, steps, time.perf_counter() - start)
    finally:
        vec.close()


def table(cells: list[Cell]) -> str:
    rows = ["| env | vector env | envs | env steps/s | vs sync at 1 env |", "|---|---|---:|---:|---:|"]
    for c in cells:
        base = next(b for b in cells if b.env == c.env and b.vectorization == "sync" and b.envs == 1)
        rows.append(
            f"| `{c.env}` | {c.vectorization} | {c.envs} | {c.steps_per_s:,.0f} | "
            f"{c.steps_per_s / base.steps_per_s:.2f}x |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--envs", default="sapo/ALFWorld-Mini-v0,sapo/ALFWorld-Mini-v0@engine=reference,sapo/WebShop-v0"
    )
    parser.add_argument("--seconds", type=float, default=4.0, help="timed seconds per cell")
    parser.add_argument("--counts", default="1,2", help="numbers of envs")
    args = parser.parse_args(argv)
    import ray

    print(cpu_line(), flush=True)
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, object_store_memory=100 * 1024**2)
    cells = []
    try:
        for spec in args.envs.split(","):
            for vectorization in ("sync", "async", "ray"):
                for n in (int(k) for k in args.counts.split(",")):
                    cells.append(measure(spec, vectorization, n, args.seconds))
                    print(f"  {spec} {vectorization} x{n}: {cells[-1].steps_per_s:,.0f} steps/s", flush=True)
    finally:
        ray.shutdown()
    print(table(cells))


if __name__ == "__main__":
    main()
