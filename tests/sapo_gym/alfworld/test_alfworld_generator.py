"""The generator: official logic rebuilt from the wheel, deterministic sampling, planner-verified games."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from sapo_gym.alfworld import CATEGORIES, TASK_TYPES
from sapo_gym.alfworld.catalog import EMBEDDED_SET
from sapo_gym.alfworld.generator.build import generate_game, read_set
from sapo_gym.alfworld.generator.logic import TASK_PLACEHOLDER, grammar_for_task, official_domain, official_grammar


@pytest.mark.needs_data
def test_logic_equals_the_official_games(alfworld_data: Path):
    game_file = next((alfworld_data / "json_2.1.1" / "valid_seen").glob("look_at_obj_in_light-*/*/game.tw-pddl"))
    game = json.loads(game_file.read_text())
    sentence = game["grammar"].split("Your task is to: ", 1)[1].split('."', 1)[0]
    assert official_domain() == game["pddl_domain"]
    assert grammar_for_task(sentence) == game["grammar"]


def test_grammar_placeholder():
    assert official_grammar().count(TASK_PLACEHOLDER) == 1
    assert "Your task is to: heat an egg." in grammar_for_task("heat an egg")


def test_embedded_set_shape():
    header, games = read_set(EMBEDDED_SET)
    assert header == {"dataset": "generated-v1", "seed": 0, "generated": True}
    by_split = Counter(g.split for g in games)
    assert (
        by_split["train"] >= 240
        and by_split["eval_in_distribution"] >= 60
        and by_split["eval_out_of_distribution"] >= 60
    )
    for split in by_split:
        assert Counter(TASK_TYPES[g.task_type] for g in games if g.split == split).keys() == set(CATEGORIES)
    assert all(g.walkthrough for g in games)
    assert EMBEDDED_SET.stat().st_size < 400_000  # compact: problems only, no domain or grammar


def test_problem_has_the_official_shape():
    _, games = read_set(EMBEDDED_SET)
    problem = games[0].pddl_problem()
    assert problem.lstrip().startswith("(define (problem plan_gen_train_00000)\n(:domain alfred)\n(:objects\n")
    for pred in (
        "receptacleType",
        "objectType",
        "canContain",
        "pickupable",
        "atLocation agent1",
        "inReceptacle",
        "receptacleAtLocation",
        "objectAtLocation",
    ):
        assert f"({pred} " in problem
    assert "(:goal" in problem and problem.count("(") == problem.count(")")


@pytest.mark.slow
def test_generation_is_deterministic_and_reproduces_the_embedded_set():
    _, games = read_set(EMBEDDED_SET)
    first = next(g for g in games if g.split == "eval_out_of_distribution" and g.index == 1)
    again = generate_game(0, "eval_out_of_distribution", 1)
    assert again == first
    assert again.game_data() == first.game_data()
