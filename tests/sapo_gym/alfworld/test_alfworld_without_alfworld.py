"""``pip install sapo-gym`` without the alfworld extra: ALFWorld plays on the compiled engine, the same.

A subprocess hides alfworld, textworld, Fast Downward, tatsu and tqdm (modules and distributions:
``tests/support/blocked.py``) and plays expert episodes with the default prompt; every observation,
reward, flag and info, and the spec hash, must equal those of the same episodes in this process (which
has the extra) and the pinned hashes (``tests/support/alfworld.py``). What needs the extra says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.alfworld import FULL_HASHES, MINI_HASHES, expert_trajectories
from tests.support.blocked import ALFWORLD_DISTRIBUTIONS, ALFWORLD_MODULES, run_without

EMBEDDED_CASES = [
    ("sapo/ALFWorld-v0", {"data_dir": "embedded", "split": "eval_out_of_distribution"}, [0, 1]),
    ("sapo/ALFWorld-Mini-v0", {"split": "eval_in_distribution"}, [0]),
    ("sapo/ALFWorld-Mini-v0", {"split": "eval_out_of_distribution", "expert": "search"}, [3]),
]
"""The walkthrough expert on both embedded sets, and the search expert (agents' ``expert`` baseline)."""

_PLAY = """
import importlib.metadata, importlib.util, json, sys
from tests.support.alfworld import expert_trajectories
from sapo_gym.alfworld.engines import engine_versions
hidden = [m for m in {modules!r} if importlib.util.find_spec(m) is not None]
out = {{"visible": hidden, "versions": engine_versions(), "runs": expert_trajectories({cases!r})}}
out["imported"] = sorted(m for m in sys.modules if m.partition(".")[0] in {modules!r})
print(json.dumps(out))
"""


def _without_alfworld(cases: list) -> dict:
    done = run_without(_PLAY.format(modules=ALFWORLD_MODULES, cases=cases), ALFWORLD_MODULES, ALFWORLD_DISTRIBUTIONS)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["visible"] == [] and out["versions"] == {} and out["imported"] == []  # the extra really is absent
    return out["runs"]


def test_embedded_games_play_the_same_without_alfworld():
    pytest.importorskip("alfworld")  # the comparison needs this process to have the extra
    without, here = _without_alfworld(EMBEDDED_CASES), expert_trajectories(EMBEDDED_CASES)
    assert without.keys() == here.keys()
    for key in here:
        assert without[key] == here[key], key
        assert all(e["won"] for e in here[key]["episodes"]), key
    hashes = [run["spec_hash"] for run in here.values()]
    assert hashes == [
        FULL_HASHES["eval_out_of_distribution"],
        MINI_HASHES["eval_in_distribution"],
        MINI_HASHES["eval_out_of_distribution"],
    ]


@pytest.mark.needs_data
def test_official_games_play_the_same_without_alfworld(alfworld_data: Path):
    pytest.importorskip("alfworld")
    cases = [("sapo/ALFWorld-v0", {"data_dir": str(alfworld_data), "split": "eval_out_of_distribution"}, [0, 7])]
    without, here = _without_alfworld(cases), expert_trajectories(cases)
    assert without == here
    (run,) = here.values()
    assert all(e["won"] for e in run["episodes"])
    assert all('"engine_fallback": null' in e["steps"][0] for e in run["episodes"])  # the compiled engine played


_NEEDS_THE_EXTRA = """
import gymnasium as gym, sapo_gym
from sapo_gym.extras import MissingExtra
from sapo_gym.alfworld.catalog import EMBEDDED_SET
from sapo_gym.alfworld.generator.build import generate, generate_game
messages = []
for kwargs in ({"engine": "reference"}, {"expert": "planner"}):
    env = gym.make("sapo/ALFWorld-Mini-v0", prompt=None, **kwargs)
    try:
        _, info = env.reset(seed=0, options={"task_index": 0})
        env.step("look")  # off the walkthrough: the planner replans
        env.unwrapped.expert_action()
    except MissingExtra as exc:
        messages.append(str(exc))
for attempt in (lambda: list(generate({"train": 1}, seed=0)), lambda: generate_game(0, "train", 0)):
    try:
        attempt()
    except MissingExtra as exc:
        messages.append(str(exc))
print(len(messages)); print("\\n".join(messages))
"""


def test_what_needs_alfworld_names_the_extra():
    done = run_without(_NEEDS_THE_EXTRA, ALFWORLD_MODULES, ALFWORLD_DISTRIBUTIONS)
    assert done.returncode == 0, done.stderr[-3000:]
    count, *messages = done.stdout.strip().splitlines()
    assert count == "4" and len(messages) == 4, done.stdout
    assert all("pip install 'sapo-gym[alfworld]'" in m for m in messages), messages
