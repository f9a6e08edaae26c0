"""The alfworld files shipped in ``generator/from_alfworld/``: equal to what the alfworld 0.4.2 wheel gives,
checked on every read, credited, and in the wheel's package data."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from sapo_gym.alfworld import TASK_TYPES
from sapo_gym.alfworld.generator import logic
from sapo_gym.alfworld.generator.logic import SHIPPED, goal_library, official_domain, official_grammar, shipped_text
from sapo_gym.alfworld.generator.scenes import props

ROOT = Path(__file__).resolve().parents[3]
SHIPPED_FILES = {"alfred.pddl", "alfred.twl2", "goal_library.json", "constants.json", "layouts.json.gz", "CREDITS.txt"}


def test_shipped_files_equal_the_ones_rebuilt_from_the_wheel():
    pytest.importorskip("alfworld")
    from importlib.metadata import version

    from sapo_gym.alfworld.generator import wheel

    assert version("alfworld") == "0.4.2"
    rebuilt = wheel.files()
    assert set(rebuilt) | {"CREDITS.txt"} == SHIPPED_FILES == {p.name for p in SHIPPED.iterdir()}
    for name, text in rebuilt.items():
        assert shipped_text(name) == text, name


def test_goal_library_and_constants_equal_alfworlds_modules():
    """Against alfworld's modules as imported (not the rebuild's own reading of their files)."""
    pytest.importorskip("alfworld")
    from alfworld.gen import constants as c, goal_library as g

    assert goal_library() == {t: {"pddl": g.gdict[t]["pddl"], "templates": g.gdict[t]["templates"]} for t in TASK_TYPES}
    p = props()
    static = sorted(set(c.RECEPTACLES) - set(c.MOVABLE_RECEPTACLES))
    assert p.header_objects == tuple(o for o in c.OBJECTS if o not in static) and p.static_receptacles == tuple(static)
    assert p.can_contain == {r: frozenset(o) for r, o in c.VAL_RECEPTACLE_OBJECTS.items()}
    assert (p.cleanable, p.heatable, p.coolable, p.toggleable, p.sliceable) == tuple(
        frozenset(c.VAL_ACTION_OBJECTS[k]) for k in ("Cleanable", "Heatable", "Coolable", "Toggleable", "Sliceable")
    )
    assert p.receptacle_objects == frozenset(c.MOVABLE_RECEPTACLES) and p.openable == frozenset(c.OPENABLE_CLASS_LIST)
    assert p.scene_types == dict(c.SCENE_TYPE)
    assert (p.train_scenes, p.test_scenes) == (tuple(c.TRAIN_SCENE_NUMBERS), tuple(c.TEST_SCENE_NUMBERS))


def test_domain_and_grammar_are_the_pinned_revision():
    assert hashlib.sha256(official_domain().encode()).hexdigest() == logic.DOMAIN_SHA256
    assert hashlib.sha256(official_grammar().encode()).hexdigest() == logic.GRAMMAR_SHA256


def test_a_changed_shipped_file_is_refused(tmp_path, monkeypatch):
    copy = tmp_path / "from_alfworld"
    shutil.copytree(SHIPPED, copy)
    text = (copy / "alfred.twl2").read_bytes()
    (copy / "alfred.twl2").write_bytes(text.replace(b"Available commands", b"Available Commands", 1))
    monkeypatch.setattr(logic, "SHIPPED", copy)
    logic.official_grammar.cache_clear()
    try:
        assert official_domain()  # cached, and unchanged
        with pytest.raises(RuntimeError, match="differs from the official games"):
            official_grammar()
    finally:
        logic.official_grammar.cache_clear()


def test_credited_and_in_the_package_data():
    credits = (SHIPPED / "CREDITS.txt").read_text()
    for needle in (
        "alfworld 0.4.2",
        "Copyright (c) 2020 Mohit Shridhar and others",
        "Copyright (c) 2019 ALFRED",
        "TextWorld",
        "Permission is hereby granted",
    ):
        assert needle in credits, needle
    assert credits.count("Permission is hereby granted") == 2  # both MIT notices, in full
    pyproject = (ROOT / "pyproject.toml").read_text()
    globs = json.loads(pyproject.split('[tool.setuptools.package-data]\n"*" = ', 1)[1].split("\n", 1)[0])
    assert all(any(fnmatch.fnmatch(name, g) for g in globs) for name in SHIPPED_FILES)
    assert "from_alfworld/CREDITS.txt" in (ROOT / "docs" / "alfworld.md").read_text()
