"""Bounded live differential fuzzing of the compiled engine against the reference engine.

The full run (every valid game, a sample of the train tarball, rule coverage report) is
``benchmarks/alfworld_fuzz.py``; this keeps CI to a few games (the reference costs ~1 s a load and
tens of ms a step).
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.alfworld_verification.coverage import UNREACHABLE, coverage_table, grammar_branches
from benchmarks.alfworld_verification.fuzz import ChainPolicy, extract_games, fuzz_game, generated_games, sampled
from benchmarks.alfworld_verification.golden import load_golden, replay
from benchmarks.alfworld_verification.refcache import instrumented_reference
from sapo_gym.alfworld.engines.reference import ReferenceEngine

STEPS = 30


def test_chain_policy_is_seeded_and_follows_chains():
    admissible = ["go to fridge 1", "help", "inventory", "look", "take apple 1 from countertop 1"]

    def run(seed: int) -> list[str]:
        policy = ChainPolicy(random.Random(seed))
        return [policy.choose(admissible) for _ in range(50)]

    assert run(3) == run(3)
    policy = ChainPolicy(random.Random(0), junk_rate=0.0, stale_rate=0.0)
    policy._chain("heat apple 1 with microwave 1")
    assert policy.choose(["examine apple 1", "look"]) == "examine apple 1"


def test_hash_sample_is_stable():
    names = [f"json_2.1.1/train/x/trial_{i}/game.tw-pddl" for i in range(2000)]
    picked = [n for n in names if sampled(n, seed=0, fraction=0.1)]
    assert picked == [n for n in names if sampled(n, seed=0, fraction=0.1)]
    assert 150 < len(picked) < 250


@pytest.mark.needs_data
def test_instrumented_reference_preserves_golden_output(alfworld_data: Path):
    traces = list(load_golden(alfworld_data))
    with instrumented_reference() as hits:
        for trace in traces[::137]:  # two games (one valid_seen, one valid_unseen)
            assert replay(ReferenceEngine(trace.game_file(alfworld_data)), trace)[1] is None
    assert hits[("intro", 0)] == 4  # each game's two episodes start with a reset


@pytest.mark.needs_data
def test_fuzzing_finds_no_difference_and_reports_coverage(alfworld_data: Path, tmp_path: Path):
    valid = sorted((alfworld_data / "json_2.1.1").glob("valid_*/*/*/game.tw-pddl"))
    games = [str(g) for g in valid[::69]]  # four games across task types and both splits
    tarball = alfworld_data / "json_2.1.1-train.tar.xz"
    if tarball.is_file():
        games += extract_games(tarball, tmp_path, fraction=0.0008, seed=1)[:2]
    with instrumented_reference() as hits:
        reports = [fuzz_game(g, STEPS, seed=7) for g in games]
        branches = grammar_branches(ReferenceEngine(games[0]))
    assert [(r.game, r.mismatch) for r in reports if r.mismatch] == []
    assert sum(r.steps for r in reports) == STEPS * len(games)
    table = coverage_table(branches, Counter(hits))
    assert not [b for b in table if b.hits and b.unreachable]  # nothing listed unreachable was derived
    assert set(UNREACHABLE) <= {(b.rule, b.index) for b in table}  # the list names real branches
    assert sum(1 for b in table if b.hits) >= 25


def test_generated_games_match_the_reference(tmp_path: Path):
    """The embedded generated set (no official data needed) uses the same domain and grammar."""
    from sapo_gym.alfworld.catalog import EMBEDDED_SET

    if not EMBEDDED_SET.is_file() or EMBEDDED_SET.stat().st_size < 100:
        pytest.skip("the embedded generated set is not built")
    games = generated_games(tmp_path, 2)
    reports = [fuzz_game(g, 20, seed=3) for g in games]
    assert [(r.game, r.mismatch) for r in reports if r.mismatch] == []
