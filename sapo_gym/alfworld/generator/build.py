"""Generate sets of ALFWorld games (deterministic by seed) and read/write them compactly.

A set file is gzipped JSON lines, one :class:`GeneratedGame` per line (no domain, no grammar, no
rendered problem). Game ``i`` of a split gets task type ``TASK_TYPES[i % 6]`` and its own RNG
seeded with ``"{seed}:{split}:{i}:{attempt}"``, so a set is the same whatever the process count.
Scenes: AI2-THOR's training floor plans for ``train`` and ``eval_in_distribution``, its test
floor plans (never seen in training) for ``eval_out_of_distribution``.

``max_receptacles=K`` and ``max_distractors=D`` generate ALFWorld-Mini games (``generated-mini-v1``: at
most K receptacles per room, see :func:`~sapo_gym.alfworld.generator.sample.keep_receptacles`, and D
object types besides the goal's); their RNG seed strings end in ``":k{K}"`` / ``":d{D}"``, so they are
not the full-size games cut down. The header of such a set records K and D.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from sapo_gym.alfworld.generator.problem import GeneratedGame
from sapo_gym.alfworld.generator.sample import ROOMS, sample_game
from sapo_gym.alfworld.generator.scenes import load_scene, props
from sapo_gym.extras import require

__all__ = ["DATASET", "MINI_DATASET", "SPLITS", "dataset_name", "generate", "generate_game", "read_set", "write_set"]

DATASET = "generated-v1"
MINI_DATASET = "generated-mini-v1"
"""Sets generated with ``max_receptacles`` (ALFWorld-Mini)."""
SPLITS = ("train", "eval_in_distribution", "eval_out_of_distribution")
_TASK_TYPES = tuple(ROOMS)
MAX_ATTEMPTS = 200


def _scenes(split: str):
    numbers = props().test_scenes if split == "eval_out_of_distribution" else props().train_scenes
    return [load_scene(n) for n in numbers]


def dataset_name(max_receptacles: int | None = None, max_distractors: int | None = None) -> str:
    """The dataset label of sets generated with these limits (both None: full-size rooms)."""
    return DATASET if max_receptacles is None and max_distractors is None else MINI_DATASET


def generate_game(
    seed: int | str, split: str, index: int, max_receptacles: int | None = None, max_distractors: int | None = None
) -> GeneratedGame:
    """Game ``index`` of ``split`` for ``seed``: sampled, planned and verified to be winnable
    (at most ``max_receptacles`` receptacles and ``max_distractors`` other object types when given)."""
    from sapo_gym.alfworld.generator.solve import solve

    task_type = _TASK_TYPES[index % len(_TASK_TYPES)]
    scenes = _scenes(split)
    suffix = "" if max_receptacles is None else f":k{max_receptacles}"
    suffix += "" if max_distractors is None else f":d{max_distractors}"
    for attempt in range(MAX_ATTEMPTS):
        rng = random.Random(f"{seed}:{split}:{index}:{attempt}{suffix}")
        candidate = sample_game(rng, task_type, scenes, split, index, max_receptacles, max_distractors)
        solved = solve(candidate) if candidate is not None else None
        if solved is not None:
            return solved
    raise RuntimeError(f"no solvable {task_type} game for {split}[{index}] after {MAX_ATTEMPTS} attempts")


def _job(args: tuple[int | str, str, int, int | None, int | None]) -> GeneratedGame:
    return generate_game(*args)


def generate(
    counts: dict[str, int],
    seed: int | str,
    workers: int = 1,
    max_receptacles: int | None = None,
    max_distractors: int | None = None,
) -> Iterator[GeneratedGame]:
    """Generate ``counts[split]`` games per split, in order (a progress bar on stderr). Needs the alfworld
    extra (the planner and the reference engine that verify each game)."""
    require(("alfworld",), "generating ALFWorld games", ("textworld", "alfworld", "fast_downward", "tqdm"))
    from tqdm import tqdm

    jobs = [(seed, split, i, max_receptacles, max_distractors) for split, n in counts.items() for i in range(n)]
    if workers <= 1:
        results: Iterable[GeneratedGame] = map(_job, jobs)
        yield from tqdm(results, total=len(jobs), desc="generating ALFWorld games")
        return
    with ProcessPoolExecutor(workers) as pool:
        yield from tqdm(pool.map(_job, jobs, chunksize=4), total=len(jobs), desc="generating ALFWorld games")


def write_set(
    games: Iterable[GeneratedGame],
    path: Path,
    seed: int,
    max_receptacles: int | None = None,
    max_distractors: int | None = None,
) -> int:
    """Write games as gzipped JSON lines (a header line first); returns the number written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header: dict = {"dataset": dataset_name(max_receptacles, max_distractors), "seed": seed, "generated": True}
    if max_receptacles is not None:
        header["max_receptacles"] = max_receptacles
    if max_distractors is not None:
        header["max_distractors"] = max_distractors
    n = 0
    with gzip.GzipFile(path, "wb", mtime=0) as raw:
        raw.write((json.dumps(header) + "\n").encode())
        for game in games:
            raw.write((json.dumps(game.to_json(), separators=(",", ":")) + "\n").encode())
            n += 1
    return n


def read_set(path: Path) -> tuple[dict, list[GeneratedGame]]:
    """(header, games) of a set file."""
    with gzip.open(path, "rt") as f:
        header = json.loads(f.readline())
        return header, [GeneratedGame.from_json(json.loads(line)) for line in f]
