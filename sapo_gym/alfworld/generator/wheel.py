"""Rebuild the files of ``from_alfworld/`` from the alfworld 0.4.2 wheel (needs the ``alfworld`` extra).

The compiled engine and the rendering of generated games read only those shipped files, so
``pip install sapo-gym`` plays ALFWorld without alfworld. This module says how each file was made,
from the installed wheel; ``tests/sapo_gym/alfworld/test_alfworld_shipped.py`` checks that the shipped
files equal what it rebuilds, and ``python -m sapo_gym.alfworld.generator.wheel`` rewrites them.

* ``alfred.pddl`` / ``alfred.twl2``: the wheel's domain and grammar with the three exact edits that give
  the revision the official ``json_2.1.1`` games embed (see :mod:`.logic`);
* ``goal_library.json``: ``pddl`` and ``templates`` of ``alfworld.gen.goal_library.gdict`` for the six
  task types;
* ``constants.json``: the tables of ``alfworld.gen.constants`` the generator reads (sets as sorted lists,
  ranges as ``[start, stop]``);
* ``layouts.json.gz``: ``alfworld/gen/layouts/FloorPlan<N>-openable.json`` and ``-objects.json`` of every
  train and test floor plan, parsed, keyed by file name.

alfworld's Python modules are executed as files (``runpy``), not imported: ``import alfworld`` creates
its data cache folder.
"""

from __future__ import annotations

import gzip
import json
import re
import runpy
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from sapo_gym.alfworld import TASK_TYPES

__all__ = ["CONSTANTS", "constants", "domain", "files", "goal_library", "grammar", "layouts", "root", "write"]

CONSTANTS = (
    "OBJECTS",
    "RECEPTACLES",
    "MOVABLE_RECEPTACLES",
    "VAL_RECEPTACLE_OBJECTS",
    "VAL_ACTION_OBJECTS",
    "OPENABLE_CLASS_LIST",
    "SCENE_TYPE",
    "TRAIN_SCENE_NUMBERS",
    "TEST_SCENE_NUMBERS",
)
"""The names of ``alfworld.gen.constants`` that :func:`~sapo_gym.alfworld.generator.scenes.props` reads."""


def root() -> Path:
    """The installed ``alfworld`` package folder (without importing it)."""
    spec = find_spec("alfworld")
    if spec is None or spec.origin is None:
        raise ImportError(
            "rebuilding the shipped ALFWorld files needs the alfworld wheel: pip install 'sapo-gym[alfworld]'"
        )
    return Path(spec.origin).parent


def domain() -> str:
    """The official games' PDDL domain, from the wheel's ``alfred.pddl``."""
    text = (root() / "data" / "alfred.pddl").read_text()
    text = text.replace(";(receptacleType ?r SinkType)", "(receptacleType ?r SinkType)", 1)
    text = text.rstrip("\n")
    assert text.endswith(")\n\n)")
    return text[: -len(")\n\n)")] + ")\n)\n"


def grammar() -> str:
    """The official games' grammar (task sentence ``UNKNOWN GOAL``), from the wheel's ``alfred.twl2``."""
    text = (root() / "data" / "alfred.twl2").read_text()
    rule = re.search(
        r'feedback :: "#help\.feedback#";\s*grammar :: """.*?"rhs": (".*?")\s*}\s*]\s*}\s*""";', text, re.DOTALL
    )
    if rule is None:
        raise RuntimeError("unexpected alfred.twl2: the help rule is not where alfworld 0.4.2 has it")
    literal = json.loads(rule.group(1))
    return text[: rule.start()] + f'feedback :: "{literal}";' + text[rule.end() :]


def goal_library() -> dict[str, dict[str, Any]]:
    """Task type -> ``{"pddl": goal template, "templates": sentence templates}`` for the six task types."""
    gdict = runpy.run_path(str(root() / "gen" / "goal_library.py"))["gdict"]
    return {t: {"pddl": gdict[t]["pddl"], "templates": list(gdict[t]["templates"])} for t in TASK_TYPES}


def _plain(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, range):
        assert value.step == 1
        return [value.start, value.stop]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return list(value) if isinstance(value, (list, tuple)) else value


def constants() -> dict[str, Any]:
    """The :data:`CONSTANTS` of ``alfworld.gen.constants``, as JSON values."""
    module = runpy.run_path(str(root() / "gen" / "constants.py"))
    return {name: _plain(module[name]) for name in CONSTANTS}


def layouts() -> dict[str, Any]:
    """``FloorPlan<N>-openable.json`` and ``-objects.json`` of every train and test floor plan, parsed."""
    c = constants()
    folder = root() / "gen" / "layouts"
    names = [
        f"FloorPlan{n}-{kind}.json"
        for n in c["TRAIN_SCENE_NUMBERS"] + c["TEST_SCENE_NUMBERS"]
        for kind in ("openable", "objects")
    ]
    return {name: json.loads((folder / name).read_text()) for name in names}


def files() -> dict[str, str]:
    """File name -> text of every rebuilt file (``layouts.json.gz`` uncompressed)."""
    return {
        "alfred.pddl": domain(),
        "alfred.twl2": grammar(),
        "goal_library.json": json.dumps(goal_library(), indent=1) + "\n",
        "constants.json": json.dumps(constants(), indent=1) + "\n",
        "layouts.json.gz": json.dumps(layouts(), separators=(",", ":")),
    }


def write(folder: Path) -> None:
    """Write :func:`files` into ``folder`` (gzip without a timestamp, so the bytes are reproducible)."""
    for name, text in files().items():
        if name.endswith(".gz"):
            with gzip.GzipFile(folder / name, "wb", mtime=0) as f:
                f.write(text.encode())
        else:
            (folder / name).write_bytes(text.encode())


if __name__ == "__main__":
    from sapo_gym.alfworld.generator.logic import SHIPPED

    write(SHIPPED)
    print(f"wrote {sorted(files())} to {SHIPPED}")
