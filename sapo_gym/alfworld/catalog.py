"""Which ALFWorld games a split holds, and where they come from.

Lookup order (the first that has the split wins; ``info["dataset"]`` says which):

1. ``data_dir=`` — a root holding ``json_2.1.1/`` (an error if it lacks the split), or a
   generated set file (``*.jsonl.gz`` from ``sapo-gym data alfworld --generate``);
2. ``$ALFWORLD_DATA``;
3. alfworld's default cache ``~/.cache/alfworld``;
4. the embedded generated set ``generated-v1`` shipped in the package.

Official games are filtered the way alfworld's ``AlfredTWEnv`` filters them: no ``movable`` or
``Sliced`` tasks, only games whose file says ``"solvable": true``.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from sapo_gym.alfworld import TASK_TYPES

__all__ = [
    "EMBEDDED",
    "EMBEDDED_MINI",
    "EMBEDDED_MINI_SET",
    "EMBEDDED_SET",
    "OFFICIAL_COUNTS",
    "SPLITS",
    "Catalog",
    "GameRecord",
    "official_catalog",
    "parse_task_folder",
    "resolve",
]

SPLITS = {"train": "train", "eval_in_distribution": "valid_seen", "eval_out_of_distribution": "valid_unseen"}
"""sapo_gym split -> folder of the official data."""
OFFICIAL_COUNTS = {"train": 3553, "eval_in_distribution": 140, "eval_out_of_distribution": 134}
"""Games per split in ALFWorld 2.1.1 after alfworld's filters (the paper's numbers)."""
OFFICIAL_DATASET = "alfworld-json_2.1.1"
EMBEDDED = "embedded"
"""``data_dir`` value that selects the embedded generated set regardless of ``$ALFWORLD_DATA``."""
EMBEDDED_SET = Path(__file__).resolve().parent / "embedded" / "generated-v1.jsonl.gz"
EMBEDDED_MINI = "embedded-mini"
"""``data_dir`` value that selects the embedded ALFWorld-Mini set (the default of ``sapo/ALFWorld-Mini-v0``)."""
EMBEDDED_MINI_SET = Path(__file__).resolve().parent / "embedded" / "generated-mini-v1.jsonl.gz"
_EMBEDDED_SETS = (EMBEDDED_SET, EMBEDDED_MINI_SET)
_SOLVABLE = re.compile(rb'"solvable"\s*:\s*(true|false)')


@dataclass(frozen=True)
class GameRecord:
    """One game of a split."""

    task_id: str
    """``<split folder>/<task folder>/<trial>``, as ALFWorld names it."""
    category: str
    """pick, look, clean, heat, cool or pick2."""
    task_type: str
    pddl_params: dict[str, Any] = field(hash=False, compare=False)
    game_file: Path | None = None
    """The official ``game.tw-pddl`` (None for generated games, rendered on demand)."""
    generated: Any = None
    """The :class:`~sapo_gym.alfworld.generator.problem.GeneratedGame`, for generated games."""


@dataclass(frozen=True)
class Catalog:
    dataset: str
    source: str
    games: tuple[GameRecord, ...]


def parse_task_folder(name: str) -> tuple[str, dict[str, Any]]:
    """(task_type, pddl_params) from ``<task_type>-<object>-<movable or None>-<receptacle>-<scene>``."""
    task_type, obj, movable, recep, _scene = name.split("-")
    look = task_type == "look_at_obj_in_light"
    return task_type, {
        "object_target": obj,
        "object_sliced": False,
        "mrecep_target": "" if movable == "None" else movable,
        "parent_target": "" if look else recep,
        "toggle_target": recep if look else "",
    }


def _task_of(trial: Path) -> tuple[str, dict[str, Any]]:
    traj = trial / "traj_data.json"
    if traj.is_file():
        data = json.loads(traj.read_text())
        return data["task_type"], dict(data["pddl_params"])
    return parse_task_folder(trial.parent.name)


def _solvable(game_file: Path) -> bool:
    match = _SOLVABLE.search(game_file.read_bytes())
    return bool(match) and match.group(1) == b"true"


@lru_cache(maxsize=16)
def official_catalog(split_dir: Path) -> tuple[GameRecord, ...]:
    """Every playable game under ``split_dir`` (a ``json_2.1.1/<split>`` folder), sorted by id."""
    records = []
    for game_file in sorted(split_dir.glob("*/*/game.tw-pddl")):
        trial = game_file.parent
        if "movable" in str(trial) or "Sliced" in str(trial) or not _solvable(game_file):
            continue
        task_type, params = _task_of(trial)
        if task_type not in TASK_TYPES:
            continue
        task_id = f"{split_dir.name}/{trial.parent.name}/{trial.name}"
        records.append(GameRecord(task_id, TASK_TYPES[task_type], task_type, params, game_file=game_file))
    return tuple(records)


@lru_cache(maxsize=4)
def generated_catalog(path: Path, split: str) -> Catalog:
    from sapo_gym.alfworld.generator.build import read_set

    header, games = read_set(path)
    dataset = header["dataset"] if path in _EMBEDDED_SETS else f"{header['dataset']}-seed{header['seed']}"
    records = tuple(
        GameRecord(
            f"{g.split}/{g.folder}",
            TASK_TYPES[g.task_type],
            g.task_type,
            {
                "object_target": g.object_target,
                "object_sliced": False,
                "mrecep_target": "",
                "parent_target": g.parent_target,
                "toggle_target": g.toggle_target,
            },
            generated=g,
        )
        for g in games
        if g.split == split
    )
    return Catalog(dataset, str(path), records)


def _official_root(root: Path, split: str) -> Path | None:
    split_dir = root / "json_2.1.1" / SPLITS[split]
    return split_dir if split_dir.is_dir() else None


def resolve(split: str, data_dir: str | os.PathLike[str] | None = None) -> Catalog:
    """The games of ``split`` from the first source in the lookup order that has them.

    ``data_dir="embedded"`` skips the lookup and takes the embedded generated set (what the CPU default
    of ``sapo-gym compare`` trains and evaluates on, whatever data the machine has);
    ``data_dir="embedded-mini"`` the embedded ALFWorld-Mini set (``generated-mini-v1``)."""
    if split not in SPLITS:
        raise ValueError(f"unknown ALFWorld split {split!r}; valid choices: {list(SPLITS)}")
    if data_dir == EMBEDDED:
        return generated_catalog(EMBEDDED_SET, split)
    if data_dir == EMBEDDED_MINI:
        return generated_catalog(EMBEDDED_MINI_SET, split)
    if data_dir is not None:
        path = Path(data_dir).expanduser()
        if path.is_file():
            return generated_catalog(path.resolve(), split)
        split_dir = _official_root(path, split)
        if split_dir is None:
            raise FileNotFoundError(
                f"data_dir={str(path)!r} has no json_2.1.1/{SPLITS[split]}/ (nor is it a generated set file); "
                "run `sapo-gym data alfworld` or point data_dir at the folder holding json_2.1.1/"
            )
        return Catalog(OFFICIAL_DATASET, str(path), official_catalog(split_dir.resolve()))
    env_root = os.environ.get("ALFWORLD_DATA")
    for label, root in (("$ALFWORLD_DATA", env_root), ("alfworld cache", "~/.cache/alfworld")):
        if not root:
            continue
        split_dir = _official_root(Path(root).expanduser(), split)
        if split_dir is not None:
            return Catalog(OFFICIAL_DATASET, str(Path(root).expanduser()), official_catalog(split_dir.resolve()))
        if label == "$ALFWORLD_DATA" and (Path(root).expanduser() / "json_2.1.1").is_dir():
            warnings.warn(
                f"ALFWORLD_DATA={root} has no json_2.1.1/{SPLITS[split]}/; using the next source", stacklevel=3
            )
    return generated_catalog(EMBEDDED_SET, split)
