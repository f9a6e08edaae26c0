"""The compiled engine behind ``gym.make("sapo/ALFWorld-v0", engine="compiled")``."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import sapo_gym  # noqa: F401  (registers the ids)
from sapo_gym.alfworld.engines import ENGINES, load_engine
from sapo_gym.alfworld.engines.compiled import CompiledEngine


def _act(action: str) -> str:
    return f"<think>ok</think><action>{action}</action>"


def test_registered_and_loaded_through_the_registry(tmp_path: Path):
    from benchmarks.alfworld_verification.fuzz import generated_games

    assert "compiled" in ENGINES
    try:
        (game,) = generated_games(tmp_path, 1)
    except (FileNotFoundError, ValueError, EOFError) as err:
        pytest.skip(f"the embedded generated set is not available: {err}")
    engine = load_engine(game, "compiled")
    assert isinstance(engine, CompiledEngine) and engine.fallback is None


def test_env_plays_every_walkthrough_to_a_win_on_the_compiled_engine():
    env = gym.make("sapo/ALFWorld-v0", split="eval_out_of_distribution", engine="compiled", prompt=None)
    task_ids = env.unwrapped.task_ids
    for task_id in task_ids:
        _, info = env.reset(options={"task_id": task_id})
        total, terminated, truncated = 0.0, False, False
        while not (terminated or truncated):
            assert info["expert_action"] in info["admissible_actions"]
            _, reward, terminated, truncated, info = env.step(_act(info["expert_action"]))
            total += reward
        assert terminated and total == 10.0, task_id
        assert info["engine"] == "compiled"
    env.close()


def test_a_played_engine_is_freed_by_reference_counting_alone():
    """An engine's table of effects refers to no engine (no closure, no bound method): a server that resets
    thousands of games leaves nothing to the cycle collector, whose full passes stall every session of a process."""
    import gc
    import weakref

    env = gym.make("sapo/ALFWorld-Mini-v0", prompt=None)
    _, info = env.reset(seed=0, options={"task_index": 0})
    for _ in range(3):  # moves, takes, opens: each step rebuilds the effects
        _, _, terminated, truncated, info = env.step(_act(info["expert_action"]))
    engine = weakref.ref(env.unwrapped._engine)
    assert isinstance(engine(), CompiledEngine) and engine().fallback is None
    gc.disable()
    try:
        env.reset(seed=0, options={"task_index": 1})  # another game: the env drops the played engine
        assert engine() is None
    finally:
        gc.enable()
    env.close()
