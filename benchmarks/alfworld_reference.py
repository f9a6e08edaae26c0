"""Wrapper overhead of sapo/ALFWorld-v0 over the raw alfworld/TextWorld engine, side by side.

For the same games, in one run and one process, measures:

* raw:  textworld ``PddlEnv`` + alfworld's ``AlfredDemangler(shuffle=False)`` + ``AlfredInfos``
        (what alfworld's ``AlfredTWEnv`` builds per game): load+reset, reset, step;
* env:  ``gym.make("sapo/ALFWorld-v0")`` with the default prompt wrapper: reset on a new game
        (load + first reset), reset on the same game again (engine kept), step (parse + engine +
        prompt + info), and, inside the same step calls, the time outside the engine;

then prints the ratios and a cProfile of the env's steps and resets grouped by package.

    python benchmarks/alfworld_reference.py [--data-dir ../shared/data/alfworld] [--games 6] [--steps 20]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import statistics
import time
from collections import defaultdict

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _raw_engine(game_file: str):
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    from textworld.envs import PddlEnv

    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    env = AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False))
    env.load(game_file)
    return env


def _time(fn, *args, **kwargs) -> float:
    t = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - t


def bench_raw(game_files: list[str], plans: list[list[str]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for game_file, plan in zip(game_files, plans):
        t = time.perf_counter()
        env = _raw_engine(game_file)
        env.reset()
        out["load+reset"].append(time.perf_counter() - t)
        out["reset"].append(_time(env.reset))
        for command in plan:
            out["step"].append(_time(env.step, command))
    return out


class _EngineClock:
    """Wraps the env's engine ``step`` to time the engine inside the env's own calls."""

    def __init__(self, backend) -> None:
        self.backend, self.seconds = backend, 0.0

    def install(self) -> None:
        engine = self.backend._engine
        if getattr(engine.step, "_clocked", False):
            return
        inner = engine.step

        def step(command: str):
            t = time.perf_counter()
            try:
                return inner(command)
            finally:
                self.seconds += time.perf_counter() - t

        step._clocked = True  # type: ignore[attr-defined]
        engine.step = step


def bench_env(env, task_ids: list[str], plans: list[list[str]]) -> dict[str, list[float]]:
    """Env timings; ``inside`` holds, per step, the part spent in the engine (same call)."""
    out: dict[str, list[float]] = defaultdict(list)
    clock = _EngineClock(env.unwrapped)
    for task_id, plan in zip(task_ids, plans):
        out["load+reset"].append(_time(env.reset, options={"task_id": task_id}))
        out["reset"].append(_time(env.reset, options={"task_id": task_id}))
        clock.install()
        for command in plan:
            action = f"<think>following the plan</think><action>{command}</action>"
            before = clock.seconds
            out["step"].append(_time(env.step, action))
            out["inside"].append(clock.seconds - before)
    return out


def _profile(env, task_ids: list[str], plans: list[list[str]]) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    bench_env(env, task_ids, plans)
    profiler.disable()
    stats = pstats.Stats(profiler)
    by_package: dict[str, float] = defaultdict(float)
    for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        for key in ("sapo_gym", "tatsu", "fast_downward", "textworld", "alfworld", "copy.py", "gymnasium", "json"):
            if key in filename:
                by_package[key] += tottime
                break
        else:
            by_package["other (C calls, stdlib)"] += tottime
    total = sum(by_package.values())
    print("\nwhere the env's time goes (cProfile, own time by package):")
    for key, seconds in sorted(by_package.items(), key=lambda kv: -kv[1]):
        print(f"  {key:<24} {seconds:8.2f} s  {100 * seconds / total:5.1f} %")
    print("\ntop functions by cumulative time:")
    stats.sort_stats("cumulative").print_stats(12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=None, help="root with json_2.1.1/ (default: the embedded generated set)")
    parser.add_argument("--split", default="eval_out_of_distribution")
    parser.add_argument("--games", type=int, default=6)
    parser.add_argument("--steps", type=int, default=20, help="steps per game (walkthrough then random admissible)")
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of the env")
    args = parser.parse_args()
    from trainers.hardware import describe

    print(describe())  # kernels, rounding and dtype speed differ between CPUs: every table says which ran it

    import gymnasium as gym

    import sapo_gym  # noqa: F401
    from sapo_gym.alfworld.env import game_file_of

    kwargs = {"split": args.split, **({"data_dir": args.data_dir} if args.data_dir else {})}
    env = gym.make("sapo/ALFWorld-v0", **kwargs)
    backend = env.unwrapped
    task_ids = list(backend.task_ids)[:: max(1, len(backend.task_ids) // args.games)][: args.games]

    # One fixed command list per game, recorded once through the raw engine: walkthrough, then random admissible.
    rng = random.Random(0)
    game_files, plans = [], []
    for task_id in task_ids:
        env.reset(options={"task_id": task_id})
        game_file = str(game_file_of(backend.catalog.games[backend.task_index_of(task_id)]))
        raw = _raw_engine(game_file)
        state = raw.reset()
        plan = list(backend._walkthrough)
        for command in plan:
            state, _, _ = raw.step(command)
        while len(plan) < args.steps:
            plan.append(rng.choice([c for c in state["admissible_commands"] if c != "help"]))
            state, _, _ = raw.step(plan[-1])
        game_files.append(game_file)
        plans.append(plan[: args.steps])

    # Interleaved game by game (raw, then env) so that load drift on a shared machine hits both sides.
    raw_t: dict[str, list[float]] = defaultdict(list)
    env_t: dict[str, list[float]] = defaultdict(list)
    for game_file, task_id, plan in zip(game_files, task_ids, plans):
        for key, values in bench_raw([game_file], [plan]).items():
            raw_t[key] += values
        for key, values in bench_env(env, [task_id], [plan]).items():
            env_t[key] += values
    print(f"{len(task_ids)} games x {args.steps} steps · dataset={backend.catalog.dataset} · split={args.split}")
    print(f"{'':<12}{'raw engine':>14}{'sapo env':>14}{'env/raw':>10}")
    for key in ("load+reset", "reset", "step"):
        r, e = statistics.median(raw_t[key]), statistics.median(env_t[key])
        unit, scale = ("ms", 1e3)
        print(f"{key:<12}{r * scale:>11.1f} {unit}{e * scale:>11.1f} {unit}{e / r:>10.3f}")
    r, e = statistics.mean(raw_t["step"]), statistics.mean(env_t["step"])
    print(f"step, env vs raw engine run separately (mean): {1e3 * (e - r):+.2f} ms = {100 * (e / r - 1):+.1f} %")
    outside = [s - i for s, i in zip(env_t["step"], env_t["inside"])]
    share = sum(outside) / sum(env_t["inside"])
    print(
        f"wrapper overhead within the same env.step calls (parse + prompt + info, outside the engine): "
        f"{1e3 * statistics.mean(outside):.2f} ms per step = {100 * share:.2f} % of the engine's time"
    )
    if args.profile:
        _profile(env, task_ids, plans)
    env.close()


if __name__ == "__main__":
    main()
