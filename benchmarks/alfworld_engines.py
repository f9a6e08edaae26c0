"""Reference vs compiled ALFWorld engine, side by side on the same games and the same commands.

    python benchmarks/alfworld_engines.py --data ../shared/data/alfworld --games 20

For each game: load (constructor, file read included), reset, and every command of its golden
episodes (walkthrough + 40-command random walk with junk), on both engines; the compiled engine's
outputs are checked against the reference's on the way (outside the timed calls). Prints mean
latencies and the ratios (targets: step >= 100x, load+reset >= 50x).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: benchmarks.* from the repository root

from benchmarks.alfworld_verification.diff import first_difference  # noqa: E402
from benchmarks.alfworld_verification.golden import GoldenTrace, load_golden  # noqa: E402
from sapo_gym.alfworld.engines import CompiledEngine, EngineState, GameEngine, ReferenceEngine  # noqa: E402


@dataclass
class BenchConfig:
    data: str = field(default="../shared/data/alfworld", metadata={"help": "ALFWorld data root (json_2.1.1/, golden/)"})
    games: int = field(default=20, metadata={"help": "games to time, evenly spread over the 274 golden traces"})
    repeats: int = field(
        default=20, metadata={"help": "times the compiled engine replays each game (its calls are µs)"}
    )


@dataclass
class Timings:
    load: list[float] = field(default_factory=list)
    reset: list[float] = field(default_factory=list)
    step: list[float] = field(default_factory=list)


def _timed(fn: Callable[[], EngineState], into: list[float]) -> EngineState:
    t0 = time.perf_counter()
    out = fn()
    into.append(time.perf_counter() - t0)
    return out


def play(factory: Callable[[str], GameEngine], trace: GoldenTrace, game_file: str, t: Timings) -> list[EngineState]:
    """Load ``game_file``, then run every episode of ``trace``; returns the states it produced."""
    t0 = time.perf_counter()
    engine = factory(game_file)
    t.load.append(time.perf_counter() - t0)
    states = []
    for episode in trace.episodes.values():
        for command, _ in episode:
            if command is None:
                states.append(_timed(engine.reset, t.reset))
            else:
                states.append(_timed(lambda c=command: engine.step(c), t.step))
    return states


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in dataclasses.fields(BenchConfig):
        parser.add_argument("--" + f.name, type=type(f.default), default=f.default, help=f.metadata["help"])
    cfg = BenchConfig(**vars(parser.parse_args(argv)))
    from trainers.hardware import describe

    print(describe())  # kernels, rounding and dtype speed differ between CPUs: every table says which ran it
    traces = list(load_golden(cfg.data))
    traces = [traces[i * len(traces) // cfg.games] for i in range(min(cfg.games, len(traces)))]
    ref, comp, mismatches = Timings(), Timings(), 0
    for trace in tqdm(traces, desc="games"):
        game_file = trace.game_file(cfg.data)
        expected = play(ReferenceEngine, trace, game_file, ref)
        for _ in range(cfg.repeats):
            got = play(CompiledEngine, trace, game_file, comp)
        mismatches += sum(first_difference(e, g) is not None for e, g in zip(expected, got))
    mean = statistics.fmean
    rows = [
        ("load", mean(ref.load), mean(comp.load)),
        ("reset", mean(ref.reset), mean(comp.reset)),
        ("load + reset", mean(ref.load) + mean(ref.reset), mean(comp.load) + mean(comp.reset)),
        ("step", mean(ref.step), mean(comp.step)),
        ("step (median)", statistics.median(ref.step), statistics.median(comp.step)),
    ]
    print(
        f"\n{len(traces)} games, {len(ref.step)} steps each engine (compiled x{cfg.repeats}); "
        f"compiled output differing from the reference: {mismatches} states\n"
    )
    print(f"| {'':14} | {'reference':>12} | {'compiled':>12} | {'speed-up':>9} |")
    print(f"|{'-' * 16}|{'-' * 14}|{'-' * 14}|{'-' * 11}|")
    for name, r, c in rows:
        print(f"| {name:14} | {_fmt(r):>12} | {_fmt(c):>12} | {r / c:>8.0f}x |")


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} µs"


if __name__ == "__main__":
    main()
