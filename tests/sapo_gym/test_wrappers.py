"""Wrappers that each do one thing."""

from __future__ import annotations

import gymnasium as gym
import pytest

import sapo_gym  # noqa: F401
from sapo_gym.wrappers import InvalidActionPenalty


def test_invalid_action_penalty_is_explicit() -> None:
    plain = gym.make("sapo/Vault-v0")
    plain.reset(options={"task_index": 0})
    assert plain.step("look")[1] == 0.0  # backends never penalize
    env = InvalidActionPenalty(gym.make("sapo/Vault-v0"), coef=0.1)
    _, info = env.reset(options={"task_index": 0})
    assert env.step("look")[1] == pytest.approx(-0.1)  # no tags: invalid
    assert env.step("<think></think><action>look</action>")[1] == 0.0
    _, r, term, _, _ = env.step(f"<action>{info['expert_action']}</action>")  # right button, no think tags
    assert r == pytest.approx(-0.1) and not term
