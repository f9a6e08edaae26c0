"""``sapo/ALFWorld-Mini-v0``: the CPU-scale variant (``generated-mini-v1``) — registration, spec hash,
the generator's room limits, the default generator path left unchanged, and the baselines.

Counts are exact: the set, the planner's walkthroughs, the search policy and the seeded random agent
are all deterministic (the random agent's draws depend on the batch size: 8, the CLI's default).
"""

from __future__ import annotations

import random
from collections import Counter

import gymnasium as gym
import pytest

import sapo_gym  # noqa: F401  (registers the ids)
from sapo_gym.alfworld import CATEGORIES, TASK_TYPES
from sapo_gym.alfworld.catalog import EMBEDDED_MINI_SET, EMBEDDED_SET, SPLITS
from sapo_gym.alfworld.generator.build import MAX_ATTEMPTS, generate_game, read_set, write_set
from sapo_gym.alfworld.generator.problem import GeneratedGame
from sapo_gym.alfworld.generator.sample import MIN_RECEPTACLES, keep_receptacles, sample_game
from sapo_gym.alfworld.generator.scenes import LAMP_HOLDERS, load_scene, props
from sapo_gym.registration import ENVS
from tests.support.alfworld import FULL_HASHES, MINI_HASHES

MINI, FULL = "sapo/ALFWorld-Mini-v0", "sapo/ALFWorld-v0"
K, D = 4, 1
"""The Mini set's limits: at most K receptacles per room, D object types besides the goal's."""
COUNTS = {"train": 240, "eval_in_distribution": 60, "eval_out_of_distribution": 60}
_TOOLS = {"clean": "SinkBasin", "heat": "Microwave", "cool": "Fridge"}


def _act(action: str) -> str:
    return f"<think>ok</think><action>{action}</action>"


def _kind(thor_id: str) -> str:
    return thor_id.split("|", 1)[0]


@pytest.fixture(scope="module")
def mini_set() -> tuple[dict, list[GeneratedGame]]:
    return read_set(EMBEDDED_MINI_SET)


# ---------------------------------------------------------------- registration and spec hash
def test_registered_as_an_alfworld_variant():
    full, mini = ENVS[FULL], ENVS[MINI]
    assert (mini.backend, mini.prompt, mini.horizon, mini.eval_splits, mini.protocol) == (
        full.backend,
        full.prompt,
        50,
        full.eval_splits,
        full.protocol,
    )
    assert dict(mini.defaults) == {"data_dir": "embedded-mini"} and full.defaults == ()
    assert gym.spec(MINI).max_episode_steps == 50


@pytest.mark.parametrize("split", list(SPLITS))
def test_own_dataset_splits_and_spec_hash(split: str):
    mini = gym.make(MINI, split=split, prompt=None)
    full = gym.make(FULL, split=split, data_dir="embedded", prompt=None)
    try:
        fields = mini.unwrapped.spec_fields()
        assert fields["id"] == MINI and fields["dataset"] == "generated-mini-v1" and fields["horizon"] == 50
        assert len(mini.unwrapped.task_ids) == COUNTS[split]
        assert mini.unwrapped.spec_hash() == MINI_HASHES[split]
        assert full.unwrapped.spec_hash() == FULL_HASHES[split] != mini.unwrapped.spec_hash()
    finally:
        mini.close()
        full.close()


def test_alfworld_data_does_not_redirect_mini_but_an_explicit_data_dir_does(tmp_path, monkeypatch):
    (tmp_path / "json_2.1.1" / "valid_unseen").mkdir(parents=True)
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    for kwargs, dataset in (
        ({}, "generated-mini-v1"),
        ({"data_dir": "embedded-mini"}, "generated-mini-v1"),
        ({"data_dir": str(EMBEDDED_MINI_SET)}, "generated-mini-v1"),
        ({"data_dir": "embedded"}, "generated-v1"),
    ):
        env = gym.make(MINI, split="eval_out_of_distribution", prompt=None, **kwargs)
        try:
            _, info = env.reset(seed=0)
            assert info["dataset"] == dataset, kwargs
        finally:
            env.close()
    env = gym.make(FULL, split="eval_out_of_distribution", prompt=None)  # ALFWorld-v0 still follows ALFWORLD_DATA
    try:
        assert env.unwrapped.catalog.dataset == "alfworld-json_2.1.1"
    finally:
        env.close()


def test_play_a_mini_game_by_its_walkthrough():
    env = gym.make(MINI, split="eval_out_of_distribution")
    try:
        obs, info = env.reset(options={"task_index": 0})
        assert "Your task is to: " in obs and info["dataset"] == "generated-mini-v1" and info["engine"] == "compiled"
        total, terminated, truncated = 0.0, False, False
        while not (terminated or truncated):
            obs, reward, terminated, truncated, info = env.step(_act(info["expert_action"]))
            total += reward
        assert terminated and info["won"] and total == 10.0
    finally:
        env.close()


# ---------------------------------------------------------------- the set and the generator
def test_mini_set_shape(mini_set):
    header, games = mini_set
    assert header == {
        "dataset": "generated-mini-v1",
        "seed": 0,
        "generated": True,
        "max_receptacles": K,
        "max_distractors": D,
    }
    assert Counter(g.split for g in games) == COUNTS
    for split in COUNTS:
        assert Counter(TASK_TYPES[g.task_type] for g in games if g.split == split).keys() == set(CATEGORIES)
    assert {g.scene for g in games if g.split == "eval_out_of_distribution"} <= set(props().test_scenes)
    assert {g.scene for g in games if g.split != "eval_out_of_distribution"} <= set(props().train_scenes)
    assert all(g.walkthrough for g in games)
    assert EMBEDDED_MINI_SET.stat().st_size < 100_000


def _check_room(g: GeneratedGame, k: int, d: int | None) -> None:
    """At most k receptacles, every object in a kept one, and what the task needs kept."""
    scene = {r.id: r for r in load_scene(g.scene).receptacles}
    kept = [scene[r] for r in g.receptacles]
    assert 1 <= len(kept) <= k and len(set(g.receptacles)) == len(kept)
    kept_ids = {r.id for r in kept}
    assert {r for _, r in g.objects} <= kept_ids
    types = {r.type for r in kept}
    by_id = {r.id: r for r in kept}
    goal_objects = [by_id[r] for o, r in g.objects if _kind(o) == g.object_target]
    assert goal_objects, g
    category = TASK_TYPES[g.task_type]
    if category == "look":
        lamps = [by_id[r] for o, r in g.objects if _kind(o) == "DeskLamp"]
        assert lamps and all(r.type in LAMP_HOLDERS for r in lamps)
    else:
        assert g.parent_target in types
        assert all(r.type != g.parent_target for r in goal_objects)  # the goal is false at the start
        assert len(goal_objects) >= (2 if category == "pick2" else 1)
        if category in _TOOLS:
            assert _TOOLS[category] in types
    if d is not None:
        assert len({_kind(o) for o, _ in g.objects} - {g.object_target, "DeskLamp"}) <= d
    problem = g.pddl_problem()
    lines = [line.strip() for line in problem.splitlines() if "?" not in line]  # not the goal's variables
    assert sum(line.endswith(" - receptacle") for line in lines) == len(kept)
    assert sum(line.startswith("(receptacleAtLocation ") for line in lines) == len(kept)


def test_every_mini_game_respects_k_and_keeps_what_its_task_needs(mini_set):
    _, games = mini_set
    for g in games:
        _check_room(g, K, D)


@pytest.mark.parametrize("k", [MIN_RECEPTACLES, 5])
def test_sampling_with_a_limit_keeps_the_needed_receptacles(k: int):
    """Sampling alone (no planner), every task type, train and test floor plans."""
    from sapo_gym.alfworld.generator.build import _scenes

    sampled = 0
    for split in ("train", "eval_out_of_distribution"):
        scenes = _scenes(split)
        for i in range(24):
            task_type = list(TASK_TYPES)[i % 6]
            g = sample_game(
                random.Random(f"t:{split}:{i}"), task_type, scenes, split, i, max_receptacles=k, max_distractors=2
            )
            if g is not None:
                _check_room(g, k, 2)
                sampled += 1
    assert sampled >= 24


def test_keep_receptacles_rejects_a_too_small_limit():
    scene = load_scene(1)
    with pytest.raises(ValueError, match="at least"):
        keep_receptacles(random.Random(0), scene, "pick_and_place_simple", "Apple", "CounterTop", MIN_RECEPTACLES - 1)


def test_default_path_writes_the_embedded_set_byte_for_byte(tmp_path):
    """No limit: the game records and the file are exactly generated-v1's (no new field, same RNG draws)."""
    header, games = read_set(EMBEDDED_SET)
    assert header == {"dataset": "generated-v1", "seed": 0, "generated": True}
    assert all(g.receptacles == () and "receptacles" not in g.to_json() for g in games)
    out = tmp_path / EMBEDDED_SET.name  # the gzip header names the file
    write_set(games, out, seed=0)
    assert out.read_bytes() == EMBEDDED_SET.read_bytes()


def test_default_sampling_draws_what_it_drew_before():
    """Without a limit, sampling reproduces stored generated-v1 games (up to the walkthrough) at some attempt."""
    from sapo_gym.alfworld.generator.build import _scenes

    _, games = read_set(EMBEDDED_SET)
    for g in [g for g in games if g.split == "eval_out_of_distribution"][:12]:
        scenes = _scenes(g.split)
        stored = GeneratedGame.from_json({**g.to_json(), "walkthrough": []})
        found = False
        for attempt in range(MAX_ATTEMPTS):
            rng = random.Random(f"0:{g.split}:{g.index}:{attempt}")
            if sample_game(rng, g.task_type, scenes, g.split, g.index) == stored:
                found = True
                break
        assert found, g.folder


def test_mini_games_regenerate_from_their_seed(mini_set):
    """One game per category of the held-out split, planned and verified again."""
    _, games = mini_set
    held_out = [g for g in games if g.split == "eval_out_of_distribution"][:6]
    for g in held_out:
        assert generate_game(0, g.split, g.index, max_receptacles=K, max_distractors=D) == g


@pytest.mark.slow
def test_default_generation_reproduces_embedded_games():
    _, games = read_set(EMBEDDED_SET)
    for split, index in (("train", 0), ("eval_in_distribution", 3)):
        stored = next(g for g in games if g.split == split and g.index == index)
        assert generate_game(0, split, index) == stored


# ---------------------------------------------------------------- baselines
def _walkthrough_wins(split: str) -> tuple[int, int]:
    env = gym.make(MINI, split=split, prompt=None)
    wins = 0
    try:
        for task_id in env.unwrapped.task_ids:
            _, info = env.reset(seed=0, options={"task_id": task_id})
            terminated = truncated = False
            while not (terminated or truncated) and info["expert_action"] is not None:
                assert info["expert_action"] in info["admissible_actions"]
                _, _, terminated, truncated, info = env.step(_act(info["expert_action"]))
            wins += bool(info["won"])
        return wins, len(env.unwrapped.task_ids)
    finally:
        env.close()


def test_expert_wins_every_game_of_the_mini_set():
    assert _walkthrough_wins("eval_out_of_distribution") == (60, 60)
    assert _walkthrough_wins("eval_in_distribution") == (60, 60)
    assert _walkthrough_wins("train") == (240, 240)


def _baseline(spec: str, split: str, seeds: tuple[int, ...] = (0,)) -> tuple[int, int]:
    from agents.registry import load_agent
    from sapo_gym.evaluation import evaluate

    records = evaluate(load_agent(spec, seed=seeds[0]), MINI, split=split, seeds=seeds, batch_size=8, progress=False)
    return sum(r.success for r in records), len(records)


SEARCH = {"eval_out_of_distribution": (60, 60), "eval_in_distribution": (60, 60)}
RANDOM = {"eval_out_of_distribution": (5, 60), "eval_in_distribution": (6, 60)}  # seed 0, batches of 8


def test_search_and_random_baselines_on_the_held_out_split():
    assert _baseline("search", "eval_out_of_distribution") == SEARCH["eval_out_of_distribution"]
    assert _baseline("random", "eval_out_of_distribution") == RANDOM["eval_out_of_distribution"]


def test_search_and_random_baselines_in_distribution():
    assert _baseline("search", "eval_in_distribution") == SEARCH["eval_in_distribution"]
    assert _baseline("random", "eval_in_distribution") == RANDOM["eval_in_distribution"]


# ---------------------------------------------------------------- leaderboard
def test_leaderboard_hosts_mini_boards_seeded_with_the_three_baselines():
    """Boards come from the registry (both evaluation splits); seeding admits expert, random and search."""
    from leaderboard.boards import BoardRegistry, default_board_keys
    from leaderboard.checks import admit
    from leaderboard.seed import BASELINE_ENVS, seed_store

    assert {f"{MINI}:eval_out_of_distribution", f"{MINI}:eval_in_distribution"} <= set(default_board_keys())
    assert MINI in BASELINE_ENVS["search"]
    registry = BoardRegistry([f"{MINI}:eval_out_of_distribution"])
    (board,) = list(registry)
    assert board.spec_hash == MINI_HASHES["eval_out_of_distribution"] and len(board.task_ids) == 60

    class Store:  # records what seeding adds, after the API's own checks (admit)
        def __init__(self) -> None:
            self.added: list[tuple[str, float]] = []

        def add(self, bundle, board, submitter, token_id):  # type: ignore[no-untyped-def]
            assert admit(bundle, registry) is board
            self.added.append((bundle["agent"]["name"], bundle["aggregates"]["all"]["success"]))
            return type("Row", (), {"id": len(self.added)})()

    store = Store()
    seed_store(store, registry)
    assert store.added == [
        ("expert (oracle)", 1.0),
        ("random (admissible)", RANDOM["eval_out_of_distribution"][0] / 60),
        ("search (observation-only)", SEARCH["eval_out_of_distribution"][0] / 60),
    ]
