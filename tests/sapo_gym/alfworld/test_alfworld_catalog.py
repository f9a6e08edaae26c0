"""Split lookup, alfworld's filters, task types from traj_data.json or folder names, per-category counts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from sapo_gym.alfworld import CATEGORIES
from sapo_gym.alfworld.catalog import (
    EMBEDDED_SET,
    OFFICIAL_COUNTS,
    SPLITS,
    official_catalog,
    parse_task_folder,
    resolve,
)


def _game(
    root: Path, split: str, folder: str, trial: str = "trial_1", solvable: bool | None = True, traj: dict | None = None
):
    d = root / "json_2.1.1" / split / folder / trial
    d.mkdir(parents=True)
    body = {"pddl_domain": "", "grammar": "", "pddl_problem": ""}
    if solvable is not None:
        body["solvable"] = solvable
    (d / "game.tw-pddl").write_text(json.dumps(body))
    if traj is not None:
        (d / "traj_data.json").write_text(json.dumps(traj))
    return d


def test_parse_task_folder():
    assert parse_task_folder("look_at_obj_in_light-AlarmClock-None-DeskLamp-323") == (
        "look_at_obj_in_light",
        {
            "object_target": "AlarmClock",
            "object_sliced": False,
            "mrecep_target": "",
            "parent_target": "",
            "toggle_target": "DeskLamp",
        },
    )
    task_type, params = parse_task_folder("pick_heat_then_place_in_recep-Potato-None-GarbageCan-10")
    assert task_type == "pick_heat_then_place_in_recep" and params["parent_target"] == "GarbageCan"


def test_unknown_split_lists_valid_names():
    with pytest.raises(
        ValueError, match="valid choices: \\['train', 'eval_in_distribution', 'eval_out_of_distribution'\\]"
    ):
        resolve("valid_seen")


def test_filters_like_alfworld_and_prefers_traj_data(tmp_path: Path):
    _game(tmp_path, "valid_seen", "pick_and_place_simple-Mug-None-Desk-301")
    _game(tmp_path, "valid_seen", "pick_and_place_with_movable_recep-Mug-Bowl-Desk-301")  # movable: skipped
    _game(tmp_path, "valid_seen", "pick_and_place_simple-AppleSliced-None-Desk-1")  # Sliced: skipped
    _game(tmp_path, "valid_seen", "pick_cool_then_place_in_recep-Egg-None-Fridge-2", solvable=False)
    _game(tmp_path, "valid_seen", "pick_cool_then_place_in_recep-Egg-None-Fridge-3", solvable=None)
    traj = {"task_type": "pick_two_obj_and_place", "pddl_params": {"object_target": "Pen", "parent_target": "Box"}}
    _game(tmp_path, "valid_seen", "pick_and_place_simple-Pen-None-Sofa-201", traj=traj)
    catalog = resolve("eval_in_distribution", data_dir=tmp_path)
    assert catalog.dataset == "alfworld-json_2.1.1"
    assert [(g.category, g.pddl_params["object_target"]) for g in catalog.games] == [("pick", "Mug"), ("pick2", "Pen")]
    assert catalog.games[1].pddl_params["parent_target"] == "Box"  # traj_data.json wins over the folder name


def test_lookup_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    assert resolve("train").dataset == "generated-v1"  # nothing else: the embedded set
    cache = tmp_path / "home" / ".cache" / "alfworld"
    _game(cache, "train", "pick_and_place_simple-Mug-None-Desk-301")
    assert resolve("train").source == str(cache)
    env_root = tmp_path / "env"
    _game(env_root, "train", "pick_and_place_simple-Pen-None-Desk-302")
    monkeypatch.setenv("ALFWORLD_DATA", str(env_root))
    assert resolve("train").source == str(env_root)
    explicit = tmp_path / "explicit"
    _game(explicit, "train", "pick_and_place_simple-Pen-None-Desk-303")
    assert resolve("train", data_dir=explicit).source == str(explicit)
    with pytest.raises(FileNotFoundError, match="no json_2.1.1/valid_unseen"):
        resolve("eval_out_of_distribution", data_dir=explicit)
    with pytest.warns(UserWarning, match="has no json_2.1.1/valid_seen"):
        assert resolve("eval_in_distribution").dataset == "generated-v1"


def test_embedded_set_is_labelled_generated():
    for split in SPLITS:
        catalog = resolve(split, data_dir=EMBEDDED_SET)
        assert catalog.dataset == "generated-v1-seed0" or catalog.dataset == "generated-v1"
        assert {g.category for g in catalog.games} == set(CATEGORIES)
        assert all(g.task_id.startswith(f"{split}/") for g in catalog.games)


def _folder_category_counts(split_dir: Path) -> Counter:
    from sapo_gym.alfworld import TASK_TYPES

    return Counter(TASK_TYPES[p.parent.parent.name.split("-")[0]] for p in split_dir.glob("*/*/game.tw-pddl"))


@pytest.mark.needs_data
@pytest.mark.parametrize("split", ["eval_in_distribution", "eval_out_of_distribution"])
def test_official_valid_counts_per_category(alfworld_data: Path, split: str):
    catalog = resolve(split, data_dir=alfworld_data)
    assert len(catalog.games) == OFFICIAL_COUNTS[split]
    counts = Counter(g.category for g in catalog.games)
    assert counts == _folder_category_counts(alfworld_data / "json_2.1.1" / SPLITS[split])
    assert set(counts) == set(CATEGORIES)


@pytest.mark.needs_data
@pytest.mark.slow
def test_official_train_counts_per_category(train_data: Path):
    catalog = official_catalog((train_data / "json_2.1.1" / "train").resolve())
    counts = Counter(g.category for g in catalog)
    assert len(catalog) == OFFICIAL_COUNTS["train"] == 3553
    assert counts == {"look": 308, "pick": 790, "clean": 650, "cool": 533, "heat": 459, "pick2": 813}


@pytest.mark.needs_data
def test_official_games_load_without_traj_data_and_a_missing_solvable_key_drops_the_game(
    alfworld_data: Path, tmp_path: Path
):
    # The shipped copy is tw-pddl only (no traj_data.json; alfworld's own loader, and verl-agent's vendored copy,
    # walk only folders holding one). A download whose two valid_unseen files lack "solvable" loads 132 games in
    # alfworld (alfworld issue #98): it skips a game without the key, and so does this loader.
    source = alfworld_data / "json_2.1.1" / "valid_unseen"
    games = sorted(source.glob("*/*/game.tw-pddl"))
    assert len(games) == 134 and not list(source.glob("*/*/traj_data.json"))
    assert len(resolve("eval_out_of_distribution", data_dir=alfworld_data).games) == 134
    for k, game in enumerate(games):
        target = tmp_path / "json_2.1.1" / "valid_unseen" / game.parent.parent.name / game.parent.name / "game.tw-pddl"
        target.parent.mkdir(parents=True)
        if k < 2:
            body = json.loads(game.read_text())
            del body["solvable"]
            target.write_text(json.dumps(body))
        else:
            target.symlink_to(game)
    catalog = resolve("eval_out_of_distribution", data_dir=tmp_path)
    assert len(catalog.games) == 132
    assert {g.task_id for g in catalog.games} == {
        f"valid_unseen/{p.parent.parent.name}/{p.parent.name}" for p in games[2:]
    }
