"""What an agent hands the harness is bounded before any env, log or bundle sees it: outputs at the action bound
(the env steps what the record holds), a lone surrogate refused, accounting numbers bounded or unknown."""

from __future__ import annotations

import gymnasium as gym
import pytest

import sapo_gym  # noqa: F401
from sapo_gym.accounting import usage_totals
from sapo_gym.bounds import MAX_TOKEN_COUNT, OutputError, bound_output, clean_usage
from sapo_gym.core import ACTION_MAX_LENGTH
from sapo_gym.pool import EvaluationAborted, plan, run_batch, run_episodes
from tests.support.hostile_agents import (
    LONG_PADDING,
    BatchSurrogateAgent,
    HugeNumbersAgent,
    LongOutputAgent,
    SurrogateAgent,
)
from tests.support.scripted_agent import scripted_reply

TASKS = [f"vault-test-{i:03d}" for i in range(2)]


class _RecordingEnv(gym.Wrapper):
    """Keeps every action it is stepped with."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.actions: list[str] = []

    def step(self, action):  # type: ignore[no-untyped-def]
        self.actions.append(action)
        return self.env.step(action)


def _envs(n: int) -> list:
    return [_RecordingEnv(gym.make("sapo/Vault-v0", split="test")) for _ in range(n)]


def test_outputs_are_cut_at_the_action_bound_and_a_lone_surrogate_is_refused() -> None:
    assert bound_output("x" * (ACTION_MAX_LENGTH + 5)) == "x" * ACTION_MAX_LENGTH
    assert bound_output("press red") == "press red"
    with pytest.raises(OutputError, match="lone surrogate at character 3"):
        bound_output("abc\udfff")
    with pytest.raises(OutputError, match="not a string"):
        bound_output(b"bytes")


def test_accounting_out_of_its_bounds_is_unknown() -> None:
    assert clean_usage(
        {
            "prompt_tokens": 10**400,
            "completion_tokens": MAX_TOKEN_COUNT,
            "latency_s": float("nan"),
            "finish_reason": "length",
        }
    ) == {"prompt_tokens": None, "completion_tokens": MAX_TOKEN_COUNT, "latency_s": None, "finish_reason": "length"}
    assert clean_usage(
        {"prompt_tokens": -1, "completion_tokens": True, "latency_s": -0.5, "finish_reason": "x" * 65}
    ) == {"prompt_tokens": None, "completion_tokens": None, "latency_s": None, "finish_reason": None}
    assert clean_usage({"prompt_tokens": 12, "completion_tokens": 3, "latency_s": 0.25}) == {
        "prompt_tokens": 12,
        "completion_tokens": 3,
        "latency_s": 0.25,
        "finish_reason": None,
    }


def test_the_pool_steps_and_records_the_same_bounded_output() -> None:
    envs = _envs(2)
    records = run_episodes(LongOutputAgent(), envs, plan(TASKS, [0]))
    outputs = [t.output for r in records for t in r.turns]
    assert outputs and all(len(o) == ACTION_MAX_LENGTH for o in outputs)
    assert sorted(outputs) == sorted(a for env in envs for a in env.actions)  # what the env got is what is recorded
    assert LONG_PADDING + len(scripted_reply("")) > ACTION_MAX_LENGTH


def test_the_pool_records_huge_numbers_as_unknown_and_a_price_gives_a_cost() -> None:
    records = run_episodes(HugeNumbersAgent(), _envs(2), plan(TASKS, [0]))
    turns = [t for r in records for t in r.turns]
    assert all(t.prompt_tokens is None and t.completion_tokens is None and t.finish_reason is None for t in turns)
    assert all(t.latency_s is not None and 0 <= t.latency_s < 60 for t in turns)  # measured instead
    assert usage_totals(records, 0.15, 0.60)["cost_usd"] == 0.0


@pytest.mark.parametrize("agent", [SurrogateAgent(), BatchSurrogateAgent()], ids=["pool", "lockstep"])
def test_an_output_no_log_can_hold_fails_its_episode_cleanly(agent) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(EvaluationAborted, match="cannot be encoded as UTF-8"):
        run_episodes(agent, _envs(2), plan(TASKS, [0]))


def test_lockstep_cuts_outputs_too_and_refuses_a_short_batch() -> None:
    class Long(BatchSurrogateAgent):
        def act(self, observations, infos):  # type: ignore[no-untyped-def]
            return [scripted_reply(o) + " " * LONG_PADDING for o in observations]

    class Short(BatchSurrogateAgent):
        def act(self, observations, infos):  # type: ignore[no-untyped-def]
            return [scripted_reply(o) for o in observations][:-1]

    envs = _envs(2)
    records = run_batch(Long(), envs, TASKS, 0, None)
    assert all(len(t.output) == ACTION_MAX_LENGTH for r in records for t in r.turns)
    assert sorted(t.output for r in records for t in r.turns) == sorted(a for env in envs for a in env.actions)
    with pytest.raises(TypeError, match="one output per observation"):
        run_batch(Short(), _envs(2), TASKS, 0, None)
