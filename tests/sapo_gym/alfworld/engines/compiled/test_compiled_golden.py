"""The compiled engine against the reference engine's golden traces (all 274 valid games)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.alfworld_verification.golden import GoldenTrace, load_golden, replay
from sapo_gym.alfworld.engines.compiled import CompiledEngine

pytestmark = pytest.mark.needs_data

_REPLAY_ALL = """
import sys
from sapo_gym.alfworld.engines.compiled import CompiledEngine
from benchmarks.alfworld_verification.golden import load_golden, replay
root = sys.argv[1]
states = bad = 0
for trace in load_golden(root):
    n, mismatch = replay(CompiledEngine(trace.game_file(root)), trace)
    states += n
    bad += mismatch is not None
print(states, bad)
"""


def test_every_golden_trace_replays_byte_identically(alfworld_data: Path):
    traces = list(load_golden(alfworld_data))
    assert len(traces) == 274
    states, failures = 0, []
    for trace in traces:
        engine = CompiledEngine(trace.game_file(alfworld_data))
        assert engine.fallback is None, (trace.game, engine.fallback)
        n, mismatch = replay(engine, trace)
        states += n
        if mismatch is not None:
            failures.append((trace.game, mismatch))
    assert failures == []
    assert states == 13108  # every reset, walkthrough step and random-walk step of the recording


@pytest.mark.parametrize("hash_seed", ["0", "4242"])
def test_replay_is_independent_of_the_hash_seed(alfworld_data: Path, hash_seed: str):
    env = {"PYTHONHASHSEED": hash_seed, "PATH": "", "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", _REPLAY_ALL, str(alfworld_data)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[5],
    )  # the repository root: benchmarks.* imports from it
    assert out.stdout.split() == ["13108", "0"]


def _game(alfworld_data: Path) -> Path:
    return sorted((alfworld_data / "json_2.1.1" / "valid_unseen").glob("pick_heat*/*/game.tw-pddl"))[0]


def test_commands_are_stripped_and_matched_exactly(alfworld_data: Path):
    engine = CompiledEngine(_game(alfworld_data))
    start = engine.reset()
    command = start.admissible[0]
    for junk in (command.upper(), command + " 2", "", "look around"):
        state = engine.step(junk)
        assert (state.obs, state.admissible, state.won) == ("Nothing happens.", start.admissible, False)
    assert engine.step(f"  {command}\t").obs != "Nothing happens."


def test_a_changed_task_sentence_still_compiles(alfworld_data: Path, tmp_path: Path):
    data = json.loads(_game(alfworld_data).read_text())
    data["grammar"] = data["grammar"].replace("Your task is to: ", "Your task is to: quickly ", 1)
    path = tmp_path / "game.tw-pddl"
    path.write_text(json.dumps(data))
    engine = CompiledEngine(path)
    assert engine.fallback is None
    assert "\n\nYour task is to: quickly " in engine.reset().obs


def _variant(alfworld_data: Path, tmp_path: Path, part: str, old: str, new: str) -> tuple[Path, dict]:
    data = json.loads(_game(alfworld_data).read_text())
    assert old in data[part]
    data[part] = data[part].replace(old, new, 1)
    path = tmp_path / "game.tw-pddl"
    path.write_text(json.dumps(data))
    return path, data


def test_unknown_domain_falls_back_to_the_reference(alfworld_data: Path, tmp_path: Path):
    path, _ = _variant(alfworld_data, tmp_path, "pddl_domain", "(define (domain alfred)", "(define (domain alfred) ")
    engine = CompiledEngine(path)
    assert engine.fallback is not None and "domain" in engine.fallback
    trace = next(
        t
        for t in load_golden(alfworld_data)
        if str(alfworld_data / "json_2.1.1" / t.game) == str(_game(alfworld_data).parent)
    )
    walkthrough = GoldenTrace(trace.game, {"walkthrough": trace.episodes["walkthrough"]})
    assert replay(engine, walkthrough)[1] is None  # same behaviour: the reference plays it


def test_unknown_grammar_falls_back_to_the_reference(alfworld_data: Path, tmp_path: Path):
    path, data = _variant(alfworld_data, tmp_path, "grammar", "You arrive at {r.name}.", "You get to {r.name}.")
    engine = CompiledEngine(path)
    assert engine.fallback is not None and "grammar" in engine.fallback
    engine.reset()
    assert engine.step(data["walkthrough"][0]).obs.startswith("You get to ")


def test_replan_gives_a_winning_plan_from_the_current_state(alfworld_data: Path):
    game = _game(alfworld_data)
    engine = CompiledEngine(game)
    engine.reset()
    for command in json.loads(game.read_text())["walkthrough"][:2] + ["jump"]:
        engine.step(command)
    plan = engine.replan()
    assert plan
    state = None
    for command in plan:
        state = engine.step(command)
        assert state.obs != "Nothing happens."
    assert state is not None and state.won
