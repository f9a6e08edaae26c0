"""The TextEnv contract's post-terminal rule: a terminated episode is frozen, in every backend.

verl-agent's batch env repeats a finished game's last state (TextWorld's ``SyncBatchEnv`` copies the
last ``(obs, score, done, infos)`` over); here every step after ``terminated`` returns the final turn
again with reward 0, and nothing reaches the backend. (ALFWorld's own case, undoing the goal after a
win, is in ``tests/sapo_gym/alfworld/test_alfworld_env.py``.) And the JSON form of an info that servers send.
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import sapo_gym  # noqa: F401  (registers the ids)
from sapo_gym.core import to_jsonable


def _act(action: str) -> str:
    return f"<think>ok</think><action>{action}</action>"


def _play_expert(env: gym.Env, task_index: int) -> tuple[str, dict[str, Any], float]:
    _, info = env.reset(seed=0, options={"task_index": task_index})
    total, terminated, obs = 0.0, False, ""
    while not terminated:
        obs, reward, terminated, truncated, info = env.step(_act(info["expert_action"]))
        total += reward
        assert not truncated
    return obs, info, total


def _assert_frozen(env: gym.Env, final_obs: str, final: dict[str, Any], actions: list[str]) -> None:
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(_act(action))
        assert obs == final_obs and reward == 0.0 and terminated and not truncated
        for key in ("raw_observation", "won", "score", "step", "admissible_actions", "task_id"):
            assert info[key] == final[key], key
        assert info["action"] == action  # the parse keys describe the action that was sent


@pytest.mark.parametrize("env_id", ["sapo/Vault-v0", "sapo/WebShop-v0"])
def test_steps_after_a_win_repeat_the_final_turn_without_reward(env_id: str) -> None:
    env = gym.make(env_id, split="test", prompt=None, max_episode_steps=100)  # the TimeLimit would truncate Vault
    obs, info, total = _play_expert(env, 0)
    assert info["won"] and total == 10.0
    later = info["admissible_actions"][:2] + ["look", "click[back to search]", "search[anything]"]
    _assert_frozen(env, obs, info, later)
    env.close()


def test_vault_alarm_is_frozen_too() -> None:
    env = gym.make("sapo/Vault-v0", split="test", prompt=None, max_episode_steps=100)
    _, info = env.reset(seed=0, options={"task_index": 0})
    wrong = next(a for a in info["admissible_actions"] if a.startswith("press ") and a != info["expert_action"])
    obs, reward, terminated, _, info = env.step(_act(wrong))
    assert terminated and not info["won"] and reward == 0.0
    _assert_frozen(env, obs, info, [wrong, "look"])
    env.close()


def test_webshop_purchase_that_is_not_a_win_stays_lost() -> None:
    env = gym.make("sapo/WebShop-v0", split="test", prompt=None)
    _, info = env.reset(seed=0, options={"task_index": 1})
    _, _, _, _, info = env.step(_act("search[shirt]"))
    product = next(a for a in info["admissible_actions"] if a.startswith("click[b") and a != "click[back to search]")
    env.step(_act(product))
    obs, reward, terminated, _, info = env.step(_act("click[buy now]"))
    assert terminated and not info["won"] and reward == 0.0 and info["score"] < 1.0
    _assert_frozen(env, obs, info, ["click[buy now]", "click[back to search]"])
    env.close()


def test_strict_protocol_freezes_after_a_win_as_well() -> None:
    env = gym.make("sapo/Vault-v0", split="test", prompt=None, protocol="strict-v1", max_episode_steps=100)
    obs, info, total = _play_expert(env, 3)
    assert info["won"] and total == 10.0
    _assert_frozen(env, obs, info, ["press nothing", info["admissible_actions"][0]])
    env.close()


def test_to_jsonable_gives_json_values_of_any_info() -> None:
    value = {
        "arr": np.arange(3, dtype=np.int64),
        "f32": np.float32(0.5),
        "pair": (1, 2.5),
        "s": {"b", "a"},
        1: {"x": np.bool_(True)},
        "obj": object,
        "none": None,
        "chat": [{"role": "user", "content": "hi"}, {2: np.int64(3)}, [np.float32(1.5), None]],
    }
    out = to_jsonable(value)
    assert out == {
        "arr": [0, 1, 2],
        "f32": 0.5,
        "pair": [1, 2.5],
        "s": ["a", "b"],
        "1": {"x": True},
        "obj": repr(object),
        "none": None,
        "chat": [{"role": "user", "content": "hi"}, {"2": 3}, [1.5, None]],
    }
    assert type(out["chat"][1]["2"]) is int and type(out["1"]["x"]) is bool  # Python scalars, not numpy's
    assert json.loads(json.dumps(out, allow_nan=False)) == out
