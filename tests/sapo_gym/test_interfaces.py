"""The shapes the harness dispatches on: which agents the pool plays, and the one progress both runners report to."""

from __future__ import annotations

import gymnasium as gym
import pytest

import sapo_gym  # noqa: F401
from agents import RandomAgent
from agents.base import Agent
from sapo_gym.interfaces import TurnResponder
from sapo_gym.pool import plan, run_episodes
from tests.support.scripted_agent import ScriptedAgent, ScriptedBatchAgent


def test_an_agent_with_respond_is_a_turn_responder_and_a_batch_agent_is_not() -> None:
    assert isinstance(ScriptedAgent(), TurnResponder) and isinstance(ScriptedAgent(), Agent)
    for batch_only in (RandomAgent(), ScriptedBatchAgent()):
        assert isinstance(batch_only, Agent) and not isinstance(batch_only, TurnResponder)


def test_the_pool_refuses_an_agent_that_is_no_turn_responder() -> None:
    envs = [gym.make("sapo/Vault-v0", split="test")]
    with pytest.raises(ValueError, match="acts on batches only"):
        run_episodes(ScriptedBatchAgent(), envs, plan(["vault-test-000"], [0]), pool=True)
    records = run_episodes(ScriptedAgent(), envs, plan(["vault-test-000"], [0]), pool=False)  # a responder may act too
    assert len(records) == 1 and records[0].success
