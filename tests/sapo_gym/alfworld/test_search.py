"""The observation-only search expert: hand-written episodes, then whole splits on the real engines."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import sapo_gym  # noqa: F401  (registers the ids)
from sapo_gym.alfworld.search import SearchExpert, SearchGoal

ROOM = [
    "go to cabinet 1",
    "go to cabinet 2",
    "go to countertop 1",
    "go to microwave 1",
    "go to shelf 1",
    "inventory",
    "look",
]


def _expert(task_type: str, obj: str, target: str, lamp: str = "") -> SearchExpert:
    params = {"object_target": obj, "parent_target": target, "toggle_target": lamp}
    expert = SearchExpert(SearchGoal.from_task(task_type, params))
    expert.observe("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. ...")
    return expert


def test_goal_from_task_params():
    goal = SearchGoal.from_task("pick_two_obj_and_place", {"object_target": "RemoteControl", "parent_target": "Drawer"})
    assert (goal.obj, goal.target, goal.op, goal.count) == ("remotecontrol", "drawer", None, 2)
    look = SearchGoal.from_task(
        "look_at_obj_in_light", {"object_target": "Book", "parent_target": "", "toggle_target": "DeskLamp"}
    )
    assert (look.op, look.lamp) == ("look", "desklamp")


def test_heat_episode_by_hand():
    ex = _expert("pick_heat_then_place_in_recep", "Apple", "Shelf")
    assert ex.action(ROOM) == "go to cabinet 1"  # the sweep starts with the first listed place
    ex.observe("You arrive at cabinet 1. The cabinet 1 is closed.")
    assert ex.action([*ROOM, "open cabinet 1"]) == "open cabinet 1"
    ex.observe("You open the cabinet 1. The cabinet 1 is open. In it, you see a cup 1.")
    assert ex.action([*ROOM, "close cabinet 1"]) == "go to cabinet 2"  # nothing here: next unvisited place
    ex.observe("You arrive at cabinet 2. On the cabinet 2, you see a apple 3, and a bread 1.")
    assert (
        ex.action([*ROOM, "take apple 3 from cabinet 2", "take bread 1 from cabinet 2"])
        == "take apple 3 from cabinet 2"
    )
    ex.observe("You pick up the apple 3 from the cabinet 2.")
    assert ex.action(ROOM) == "go to microwave 1"  # heat first
    ex.observe("You arrive at microwave 1. The microwave 1 is closed.")
    assert ex.action([*ROOM, "heat apple 3 with microwave 1", "open microwave 1"]) == "heat apple 3 with microwave 1"
    ex.observe("You heat the apple 3 using the microwave 1.")
    assert ex.action(ROOM) == "go to shelf 1"
    ex.observe("You arrive at shelf 1. On the shelf 1, you see nothing.")
    assert ex.action([*ROOM, "move apple 3 to shelf 1"]) == "move apple 3 to shelf 1"


def test_a_failed_command_changes_nothing_and_the_sweep_restarts():
    ex = _expert("pick_and_place_simple", "Pen", "Shelf")
    for place in ("cabinet 1", "cabinet 2", "countertop 1", "microwave 1", "shelf 1"):
        ex.observe(f"You arrive at {place}. On the {place}, you see nothing.")
    ex.observe("Nothing happens.")
    assert ex.location == "shelf 1" and ex.holding is None
    assert ex.action(ROOM) == "go to cabinet 1"  # every place seen: a new sweep


def test_pick_two_returns_to_the_first_drop_and_skips_the_placed_object():
    ex = _expert("pick_two_obj_and_place", "Pen", "Shelf")
    ex.observe("You arrive at cabinet 1. On the cabinet 1, you see a pen 1, and a pen 2.")
    ex.observe("You pick up the pen 1 from the cabinet 1.")
    ex.observe("You arrive at shelf 1. On the shelf 1, you see nothing.")
    ex.observe("You move the pen 1 to the shelf 1.")
    assert ex.action([*ROOM, "take pen 1 from shelf 1"]) != "take pen 1 from shelf 1"
    ex.observe("You arrive at cabinet 1. On the cabinet 1, you see a pen 2.")
    assert ex.action([*ROOM, "take pen 2 from cabinet 1"]) == "take pen 2 from cabinet 1"
    ex.observe("You pick up the pen 2 from the cabinet 1.")
    assert ex.action(ROOM) == "go to shelf 1"


def _play_split(split: str, data_dir: str | None = None) -> tuple[int, int]:
    kwargs = {"data_dir": data_dir} if data_dir else {}
    env = gym.make("sapo/ALFWorld-v0", prompt=None, expert="search", split=split, **kwargs)
    wins = 0
    n = len(env.unwrapped.task_ids)
    for i in range(n):
        _, info = env.reset(seed=0, options={"task_id": env.unwrapped.task_ids[i]})
        while True:
            action = info["expert_action"]
            assert action in info["admissible_actions"]
            _, _, terminated, truncated, info = env.step(f"<think></think><action>{action}</action>")
            if terminated or truncated:
                wins += terminated
                break
    env.close()
    return wins, n


def test_search_expert_solves_the_embedded_held_out_games():
    """Deterministic: 58 / 60 of the embedded eval_out_of_distribution games within the horizon of 50."""
    wins, n = _play_split("eval_out_of_distribution", data_dir="embedded")
    assert (wins, n) == (58, 60)


@pytest.mark.needs_data
def test_search_expert_on_the_official_valid_games(alfworld_data: Path):
    """Deterministic: valid_seen 124 / 140, valid_unseen 134 / 134 (observation-only; the walkthrough knows the map)."""
    assert _play_split("eval_in_distribution", str(alfworld_data)) == (124, 140)
    assert _play_split("eval_out_of_distribution", str(alfworld_data)) == (134, 134)


def test_search_agent_plays_like_the_env_side_expert():
    """The agent (infos only, batched, active envs only) wins exactly the episodes the env-side expert wins."""
    from agents.registry import load_agent
    from sapo_gym.evaluation import evaluate, summarize

    records = evaluate(
        load_agent("search"),
        "sapo/ALFWorld-v0",
        split="eval_out_of_distribution",
        batch_size=8,
        env_kwargs={"data_dir": "embedded"},
        progress=False,
    )
    wins, n = _play_split("eval_out_of_distribution", data_dir="embedded")
    assert len(records) == n and sum(r.success for r in records) == wins
    assert summarize(records)["all"]["invalid_rate"] == 0.0


def test_search_agent_refuses_groups_of_one_task():
    from agents.baselines import SearchAgent

    info = {
        "task_id": "t",
        "step": 0,
        "raw_observation": "",
        "admissible_actions": ["look"],
        "pddl_params": {},
        "alfworld_task_type": "pick_and_place_simple",
    }
    with pytest.raises(ValueError, match="distinct tasks"):
        SearchAgent().act(["", ""], [info, dict(info)])


def _goals_agree(split: str, data_dir: str) -> int:
    """Parse every game's task sentence; it must give the goal of its (privileged) pddl_params. Games checked."""
    env = gym.make("sapo/ALFWorld-v0", split=split, data_dir=data_dir, prompt=None)
    try:
        for task_id in env.unwrapped.task_ids:
            _, info = env.reset(seed=0, options={"task_id": task_id})
            expected = SearchGoal.from_task(info["alfworld_task_type"], info["pddl_params"])
            assert SearchGoal.from_sentence(info["alfworld_task_type"], info["task"]) == expected, info["task"]
        return len(env.unwrapped.task_ids)
    finally:
        env.close()


@pytest.mark.needs_data
def test_goal_from_the_task_sentence_on_the_official_valid_games(alfworld_data: Path):
    assert _goals_agree("eval_out_of_distribution", str(alfworld_data)) == 134
    assert _goals_agree("eval_in_distribution", str(alfworld_data)) == 140


@pytest.mark.parametrize("split", ["eval_out_of_distribution", "eval_in_distribution"])
def test_goal_from_the_task_sentence_equals_the_pddl_goal(split: str):
    """The public task sentence states the goal: parsing it gives exactly the goal of the (privileged) pddl_params."""
    assert _goals_agree(split, "embedded") > 0
    with pytest.raises(ValueError, match="not an ALFWorld task sentence"):
        SearchGoal.from_sentence("pick_and_place_simple", "win the game.")
