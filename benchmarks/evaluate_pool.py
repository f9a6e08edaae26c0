"""Episodes per minute of the continuous pool against today's lockstep batches, at equal concurrency, on the same server.

The server is a fake OpenAI-compatible one on 127.0.0.1 in a process of its own
(``tests.support.fake_openai``): every request waits a seeded lognormal latency (``--median`` seconds,
log-sd ``--sigma``; request ``k`` gets the ``k``-th draw), then answers (Vault: the right button; other envs:
a deterministic pick among the admissible actions, so episode lengths vary). The agent is
:class:`agents.openai_agent.OpenAIChatAgent`, in this process for both:

* lockstep: :func:`sapo_gym.evaluation.evaluate` (``act`` on a batch of ``N`` envs; the batch waits for its
  slowest request, the next batch for the whole batch);
* pool: :func:`sapo_gym.pool.run_episodes` (``respond``; up to ``N`` requests in flight, a turn sent as soon
  as its env stepped).

    OMP_NUM_THREADS=1 python benchmarks/evaluate_pool.py [--concurrency 8] [--median 0.05] [--sigma 1.0]
        [--envs sapo/Vault-v0:test:16,sapo/WebShop-v0:test:24] [--seeds 0,1,2,3]

Prints a table: env, episodes, turns, seconds and episodes/min of each, and the pool/lockstep ratio.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym

import sapo_gym  # noqa: F401
from agents.openai_agent import OpenAIChatAgent
from sapo_gym.evaluation import evaluate
from sapo_gym.pool import plan, run_episodes

ROOT = Path(__file__).resolve().parents[1]


def _server(median: float, sigma: float, seed: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.fake_openai",
            "--median",
            str(median),
            "--sigma",
            str(sigma),
            "--seed",
            str(seed),
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _measure(env_id: str, split: str, tasks: int, seeds: list[int], width: int, url: str) -> dict[str, float]:
    envs = [gym.make(env_id, split=split) for _ in range(width)]
    ids = list(envs[0].unwrapped.task_ids)[:tasks]
    agent = OpenAIChatAgent(url, "bench", max_concurrency=width, seed=0)
    row: dict[str, float] = {}
    try:
        start = time.perf_counter()
        lockstep = evaluate(agent, env_id, task_ids=ids, seeds=seeds, envs=envs, progress=False)
        row["lockstep_s"] = time.perf_counter() - start
        start = time.perf_counter()
        pooled = run_episodes(agent, envs, plan(ids, seeds))
        row["pool_s"] = time.perf_counter() - start
    finally:
        for env in envs:
            env.close()
    row["episodes"] = len(pooled)
    row["turns_lockstep"] = sum(r.steps for r in lockstep)
    row["turns_pool"] = sum(r.steps for r in pooled)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--median", type=float, default=0.05, help="median request latency, seconds")
    parser.add_argument("--sigma", type=float, default=1.0, help="log-sd of the request latency")
    parser.add_argument("--seed", type=int, default=0, help="the latency draws' seed")
    parser.add_argument("--envs", default="sapo/Vault-v0:test:16,sapo/WebShop-v0:test:24", help="ENV:SPLIT:TASKS,...")
    parser.add_argument("--seeds", default="0,1,2,3")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    proc, url = _server(args.median, args.sigma, args.seed)
    try:
        print(
            f"fake server {url}: lognormal latency, median {args.median} s, sigma {args.sigma}; N = {args.concurrency}"
        )
        print(f"{'env':<22} {'episodes':>8} {'turns L/P':>10} {'lockstep ep/min':>16} {'pool ep/min':>12} {'ratio':>6}")
        for item in args.envs.split(","):
            env_id, split, tasks = item.rsplit(":", 2)
            row = _measure(env_id, split, int(tasks), seeds, args.concurrency, url)
            lock, pool = row["episodes"] / row["lockstep_s"] * 60, row["episodes"] / row["pool_s"] * 60
            print(
                f"{env_id:<22} {int(row['episodes']):>8} {int(row['turns_lockstep']):>4}/{int(row['turns_pool']):<5} "
                f"{lock:>16.1f} {pool:>12.1f} {pool / lock:>5.2f}x",
                flush=True,
            )
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
