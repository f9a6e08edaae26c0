"""The prompt/history protocol."""

from __future__ import annotations

import gymnasium as gym
import pytest

import sapo_gym  # noqa: F401
from sapo_gym.prompts import ALFWORLD_PROMPT, WEBSHOP_PROMPT, HistoryPrompt, PromptTemplate


def _step(env: gym.Env, action: str):
    return env.step(f"<think>t</think><action>{action}</action>")


def test_first_then_later_template_with_history() -> None:
    env = gym.make("sapo/Vault-v0", prompt=ALFWORLD_PROMPT, history_length=2)
    obs, info = env.reset(options={"task_index": 0})
    assert "Your current observation is: You stand before a vault" in obs and "Prior to this step" not in obs
    assert "'press red'" in obs and "'help'" not in obs
    obs, *_ = _step(env, "look")
    assert "Your task is to: open the vault" in obs
    assert "you have already taken 1 step(s)" in obs and "most recent 1 observaitons" in obs
    assert "[Observation 1: 'You stand before a vault" in obs and "Action 1: 'look']" in obs
    assert "You are now at step 2 and your current observation is: You see the vault." in obs
    _step(env, "look")
    obs, *_ = _step(env, "look")
    # only the last two pairs, numbered by their real step
    assert "[Observation 1:" not in obs and "[Observation 2:" in obs and "[Observation 3:" in obs
    assert "taken 3 step(s)" in obs and "most recent 2 observaitons" in obs


def test_history_zero_and_raw_mode() -> None:
    env = gym.make("sapo/Vault-v0", prompt=ALFWORLD_PROMPT, history_length=0)
    env.reset(options={"task_index": 0})
    obs, *_ = _step(env, "look")
    assert "[Observation" not in obs
    raw = gym.make("sapo/Vault-v0", prompt=None)
    obs, info = raw.reset(options={"task_index": 0})
    assert obs == info["raw_observation"]


def test_user_template_and_webshop_format() -> None:
    mine = PromptTemplate(first="T={task_description}|{admissible_actions}", later="S={current_step}", format_actions="/".join)
    env = gym.make("sapo/Vault-v0", prompt=mine)
    obs, _ = env.reset(options={"task_index": 0})
    assert obs == "T=open the vault by pressing its 2 buttons in order|look/press red/press blue/press green"
    assert _step(env, "look")[0] == "S=2"
    assert WEBSHOP_PROMPT.format_actions(["search[x]", "click[y]"]) == "'search[x]',\n'click[y]',"


def test_negative_history_rejected() -> None:
    with pytest.raises(ValueError):
        HistoryPrompt(gym.make("sapo/Vault-v0", prompt=None), ALFWORLD_PROMPT, history_length=-1)
