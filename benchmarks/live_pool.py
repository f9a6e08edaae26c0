"""Live episodes per minute (``sapo-gym submit --live``'s pool) at concurrency 1 and N, against offline evaluation's pool
at equal N, with the same agent and the same fake model server.

A local leaderboard (``sapo-gym leaderboard serve`` on 127.0.0.1, ``--no-verify``, a fresh SQLite file) holds the
env; the agent is :class:`agents.openai_agent.OpenAIChatAgent` on the fake OpenAI-compatible server of
``tests.support.fake_openai`` (a seeded lognormal latency per request: ``--median`` s, log-sd ``--sigma``), as in
benchmarks/evaluate_pool.py. For each N in ``--concurrency``:

* live: :func:`leaderboard.live_client.play_live` (``--seeds`` passes over the board's split, ``parallel = N``;
  every turn is a reset or step request to the leaderboard plus a model request);
* offline: :func:`sapo_gym.pool.run_episodes` with N envs in this process (as ``sapo-gym evaluate --concurrency N``),
  over the same number of episodes.

    OMP_NUM_THREADS=1 python benchmarks/live_pool.py [--concurrency 1,8] [--median 0.05] [--sigma 1.0] [--seeds 4]

Prints a table: N, episodes, turns (offline's; the same agent and model answers play as many live), live and offline
episodes/min, and live/offline.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym

import sapo_gym  # noqa: F401
from agents.openai_agent import OpenAIChatAgent
from leaderboard.live_client import play_live
from sapo_gym.bundle import AgentInfo
from sapo_gym.pool import plan, run_episodes

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from evaluate_pool import _server  # noqa: E402  (the fake model server, as the offline benchmark starts it)

from tests.support.leaderboard import ServerProcess  # noqa: E402

ENV, SPLIT = "sapo/Vault-v0", "test"


def _live(url: str, token: str, model_url: str, width: int, seeds: int) -> tuple[int, float]:
    agent = OpenAIChatAgent(model_url, "bench", max_concurrency=width, seed=0)
    start = time.perf_counter()
    result = play_live(
        agent, url, token, ENV, SPLIT, AgentInfo(name=f"live bench N {width}"), seeds=seeds, concurrency=width
    )
    elapsed = time.perf_counter() - start
    assert result.submission.get("id") is not None and result.parallel == width, result
    return result.episodes, elapsed


def _offline(model_url: str, width: int, seeds: int) -> tuple[int, int, float]:
    envs = [gym.make(ENV, split=SPLIT) for _ in range(width)]
    agent = OpenAIChatAgent(model_url, "bench", max_concurrency=width, seed=0)
    try:
        start = time.perf_counter()
        records = run_episodes(agent, envs, plan(list(envs[0].unwrapped.task_ids), range(seeds)))
        elapsed = time.perf_counter() - start
    finally:
        for env in envs:
            env.close()
    return len(records), sum(r.steps for r in records), elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", default="1,8", help="N values, comma-separated")
    parser.add_argument("--median", type=float, default=0.05, help="median request latency, seconds")
    parser.add_argument("--sigma", type=float, default=1.0, help="log-sd of the request latency")
    parser.add_argument("--seed", type=int, default=0, help="the latency draws' seed")
    parser.add_argument(
        "--seeds", type=int, default=4, help="passes over the split (live: at most the server's max_seeds)"
    )
    args = parser.parse_args()
    from leaderboard.server.store import Store

    proc, model_url = _server(args.median, args.sigma, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp) / 'lb.db'}"
        store = Store(db)
        token = store.create_token("bench")[1]
        store.engine.dispose()
        server = ServerProcess(db, Path(tmp) / "server.log", "--no-verify").start()
        try:
            print(
                f"fake model server: lognormal latency, median {args.median} s, sigma {args.sigma}; leaderboard {server.url}"
            )
            print(
                f"{'N':>3} {'episodes':>8} {'turns':>6} {'live ep/min':>12} {'offline ep/min':>15} {'live/offline':>13}"
            )
            for width in (int(n) for n in args.concurrency.split(",")):
                episodes, live_s = _live(server.url, token, model_url, width, args.seeds)
                offline_episodes, turns, offline_s = _offline(model_url, width, args.seeds)
                live, offline = episodes / live_s * 60, offline_episodes / offline_s * 60
                print(
                    f"{width:>3} {episodes:>8} {turns:>6} {live:>12.1f} {offline:>15.1f} {live / offline:>12.2f}x",
                    flush=True,
                )
        finally:
            server.stop()
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
