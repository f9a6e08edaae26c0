"""The wire types and the pure functions of the remote env (no server)."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("openenv.core.env_server")

from pydantic import ValidationError  # noqa: E402

import sapo_gym  # noqa: E402,F401
from sapo_gym.core import INFO_KEYS, STEP_INFO_KEYS  # noqa: E402
from sapo_gym.registration import parse_env_args  # noqa: E402
from sapo_gym.remote.server import idle_sessions, reap_interval  # noqa: E402
from sapo_gym.remote.wire_types import (  # noqa: E402
    ACTION_LIMIT_CHARS,
    MAX_BODY_BYTES,
    TYPED_INFO_KEYS,
    ResetRequest,
    SapoAction,
    SapoObservation,
    info_from_observation,
    observation_from_step,
)
from tests.support.remote import canon  # noqa: E402


def wire(obs: SapoObservation) -> SapoObservation:
    """Through JSON and back, as over the network."""
    return SapoObservation.model_validate_json(obs.model_dump_json())


def test_a_real_info_crosses_the_wire_unchanged() -> None:
    env = gym.make("sapo/ALFWorld-v0", data_dir="embedded")
    prompt, info = env.reset(seed=0, options={"task_index": 4})
    first = wire(observation_from_step(prompt, info, "h"))
    assert first.reward is None and first.prompt == prompt and first.spec_hash == "h"
    assert canon(info_from_observation(first)) == canon(info)
    step = env.step(f"<think>t</think><action>{info['expert_action']}</action>")
    back = wire(observation_from_step(step[0], step[4], "h", *step[1:4]))
    assert (back.prompt, back.reward, back.terminated, back.truncated) == step[:4]
    assert canon(info_from_observation(back)) == canon(step[4])  # same keys, order, types and values
    assert list(info_from_observation(back)) == list(step[4])


def test_the_typed_keys_are_cores_and_each_is_a_field() -> None:
    """One source for the info keys: core writes them (in this order), the wire types them from core's list."""
    env = gym.make("sapo/Vault-v0", prompt=None)
    _, info = env.reset(seed=0)
    assert tuple(info)[: len(INFO_KEYS)] == INFO_KEYS
    _, _, _, _, info = env.step("<think></think><action>look</action>")
    assert tuple(info)[-len(STEP_INFO_KEYS) :] == STEP_INFO_KEYS
    assert set(TYPED_INFO_KEYS) <= set(SapoObservation.model_fields)


def test_unknown_info_keys_pass_through_as_json() -> None:
    info = {
        "raw_observation": "o",
        "task": "t",
        "task_id": "i",
        "task_type": "k",
        "dataset": "d",
        "admissible_actions": ["a"],
        "action_mask": np.ones(1, dtype=bool),
        "step": 0,
        "won": False,
        "score": 0.0,
        "messages": [{"role": "user", "content": "o"}],
        "arr": np.arange(3, dtype=np.int64),
        "pair": (1, 2.5),
        "f32": np.float32(0.5),
        "nested": {1: {"x": np.bool_(True)}},
        "obj": object,
    }
    back = info_from_observation(wire(observation_from_step("p", info, "h")))
    assert list(back) == list(info)
    assert back["messages"] == info["messages"] and back["arr"] == [0, 1, 2] and back["pair"] == [1, 2.5]
    assert back["f32"] == 0.5 and back["nested"] == {"1": {"x": True}} and back["obj"] == repr(object)


def test_action_model_takes_any_text_up_to_the_limit() -> None:
    assert SapoAction(text="ü中🙂" * 10).text == "ü中🙂" * 10
    assert len(SapoAction(text="x" * ACTION_LIMIT_CHARS).text) == ACTION_LIMIT_CHARS
    for bad in ({"text": "x" * (ACTION_LIMIT_CHARS + 1)}, {"text": 5}, {"text": None}, {}, {"text": "a", "tool": 1}):
        with pytest.raises(ValidationError):
            SapoAction.model_validate(bad)
    # the server takes exactly the actions the action space admits: none over the limit reaches an env
    assert gym.make("sapo/Vault-v0").action_space.max_length == ACTION_LIMIT_CHARS


def test_the_body_limit_holds_the_longest_action_at_its_worst_escaping() -> None:
    # a non-BMP character is one str character and 12 bytes as \\uXXXX\\uXXXX (json.dumps' default ensure_ascii)
    body = json.dumps({"action": {"text": "🙂" * ACTION_LIMIT_CHARS}})
    assert len(body) == 12 * ACTION_LIMIT_CHARS + len('{"action": {"text": ""}}')
    assert len(body) <= MAX_BODY_BYTES


def test_reset_request_is_strict() -> None:
    assert ResetRequest.model_validate({"seed": 3, "options": {"task_id": "x"}}).options.task_id == "x"
    for bad in (
        {"seed": "3"},
        {"seed": -1},
        {"seed": True},
        {"options": {"task_index": "0"}},
        {"options": {"level": 2}},
        {"episode_id": 7},
        {"colour": "red"},
    ):
        with pytest.raises(ValidationError):
            ResetRequest.model_validate(bad)


def test_idle_selection_and_interval() -> None:
    last = {"a": 0.0, "b": 5.0, "c": 9.5}
    assert idle_sessions(last, now=10.0, timeout_s=1.0, exempt=set()) == ["a", "b"]
    assert idle_sessions(last, now=10.0, timeout_s=1.0, exempt={"a"}) == ["b"]
    assert idle_sessions(last, now=10.0, timeout_s=10.0, exempt=set()) == []
    assert reap_interval(600.0) == 5.0 and reap_interval(1.0) == 0.25 and reap_interval(0.01) == 0.05


def test_env_args_read_json_values_else_strings() -> None:
    assert parse_env_args(["split=test", "max_episode_steps=10", "x=true", "y=null", "data_dir=/a=b"]) == {
        "split": "test",
        "max_episode_steps": 10,
        "x": True,
        "y": None,
        "data_dir": "/a=b",
    }
    for bad in (["novalue"], ["=3"]):
        with pytest.raises(ValueError, match="KEY=VALUE"):
            parse_env_args(bad)
