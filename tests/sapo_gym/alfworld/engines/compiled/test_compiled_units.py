"""Unit tests of the compiled ALFWorld engine's parts (no game data needed)."""

from __future__ import annotations

import pytest

from sapo_gym.alfworld.engines.compiled.game import demangle
from sapo_gym.alfworld.engines.compiled.goal import compile_goal
from sapo_gym.alfworld.engines.compiled.pddl import UnsupportedGame, parse_problem, parse_sexpr
from sapo_gym.alfworld.engines.compiled.signature import check_signature, grammar_hash
from sapo_gym.alfworld.engines.compiled.state import GameState
from sapo_gym.alfworld.engines.compiled.text import display_list

DYNAMIC = frozenset({"inreceptacle", "holds", "istoggled", "atlocation"})


def test_demangle_numbers_in_reverse_sorted_order_and_merges_basins():
    ids = [
        "bed_bar__plus_02_dot_40",
        "bed_bar__minus_01_dot_64",
        "sink_bar__minus_01_dot_99_bar_sinkbasin",
        "agent1",
        "cancontaintype",
    ]
    names = demangle(ids)
    # sorted: bed_bar__minus... < bed_bar__plus...; the first sorted id gets the highest number
    assert names["bed_bar__minus_01_dot_64"] == "bed 2"
    assert names["bed_bar__plus_02_dot_40"] == "bed 1"
    assert names["sink_bar__minus_01_dot_99_bar_sinkbasin"] == "sinkbasin 1"
    assert names["agent1"] == "agent1 "  # alfworld renders un-mangled ids with a trailing space


@pytest.mark.parametrize(
    ("items", "text"),
    [([], "nothing"), (["a x"], "a x"), (["a x", "a y"], "a x, and a y"), (["a", "b", "c"], "a, b, and c")],
)
def test_display_list(items, text):
    assert display_list(items) == text


def test_parse_problem_lowercases_and_drops_numeric_fluents():
    problem = parse_problem(
        """(define (problem p) (:domain alfred)
           (:objects agent1 - agent Apple_bar_1 - object Fridge_bar_2 - receptacle l1 - location)
           (:init (= (total-cost) 0) (atLocation agent1 l1) (inReceptacle Apple_bar_1 Fridge_bar_2)) ; comment
           (:goal (and (holds agent1 Apple_bar_1))))"""
    )
    assert problem.objects == {
        "agent1": "agent",
        "apple_bar_1": "object",
        "fridge_bar_2": "receptacle",
        "l1": "location",
    }
    assert problem.init == [("atlocation", "agent1", "l1"), ("inreceptacle", "apple_bar_1", "fridge_bar_2")]


@pytest.mark.parametrize(
    "text", ["(define (problem p)", "(a b))", "(define (problem p) (:objects a) (:init (foo b)) (:goal (x)))"]
)
def test_malformed_problems_are_unsupported(text):
    with pytest.raises(UnsupportedGame):
        parse_problem(text)


def test_pick_two_goal_needs_two_distinct_objects():
    objects = {"a1": "agent", "o1": "object", "o2": "object", "r1": "receptacle", "l": "location"}
    init = [("objecttype", "o1", "penType"), ("objecttype", "o2", "penType"), ("receptacletype", "r1", "deskType")]
    goal = parse_sexpr(
        """(and (exists (?r - receptacle) (exists (?o1 - object) (and (objectType ?o1 penType)
             (receptacleType ?r deskType) (inReceptacle ?o1 ?r) (exists (?o2 - object) (and (not (= ?o1 ?o2))
             (objectType ?o2 penType) (inReceptacle ?o2 ?r)))))))"""
    )
    (clause,) = compile_goal(goal, [tuple(x.lower() for x in f) for f in init], objects, DYNAMIC)
    assert set(clause) == {
        (("inreceptacle", "o1", "r1"), ("inreceptacle", "o2", "r1")),
        (("inreceptacle", "o2", "r1"), ("inreceptacle", "o1", "r1")),
    }
    one = GameState([("atlocation", "a1", "l"), ("inreceptacle", "o1", "r1")])
    both = GameState([("atlocation", "a1", "l"), ("inreceptacle", "o1", "r1"), ("inreceptacle", "o2", "r1")])
    assert not any(all(map(one.has, term)) for term in clause)
    assert any(all(map(both.has, term)) for term in clause)


def test_goal_variable_free_of_static_facts_is_refused():
    goal = parse_sexpr("(and (exists (?o - object) (holds agent1 ?o)))")
    with pytest.raises(UnsupportedGame):
        compile_goal(goal, [], {"agent1": "agent", "o": "object"}, DYNAMIC)


def test_signature_rejects_unknown_domain_and_grammar():
    with pytest.raises(UnsupportedGame, match="domain"):
        check_signature("(define (domain alfred))", '"task": [ { "rhs": "Your task is to: x." } ]')
    digest, task = grammar_hash('"task": [\n  {\n    "rhs": "Your task is to: put a \\"mug\\" on desk."\n  }\n]')
    assert task == 'Your task is to: put a "mug" on desk.'
    assert len(digest) == 64
