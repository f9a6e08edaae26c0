"""The env contract on every registered id: check_env, info keys, determinism, bad input."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import sapo_gym
from sapo_gym.registration import ENVS

# The browser env starts Chromium; it has its own tests (marked browser) in tests/sapo_gym/webshop.
TEXT_IDS = [env_id for env_id in ENVS if "Browser" not in env_id]
STABLE_KEYS = {
    "raw_observation",
    "task",
    "task_id",
    "task_type",
    "admissible_actions",
    "action_mask",
    "dataset",
    "step",
    "won",
    "score",
}
STEP_KEYS = STABLE_KEYS | {"action", "is_action_valid", "is_action_admissible"}


@pytest.fixture(scope="module", params=TEXT_IDS)
def env(request: pytest.FixtureRequest) -> gym.Env:
    e = gym.make(request.param)
    yield e
    e.close()


def test_import_is_light() -> None:
    heavy = "'torch','textworld','alfworld','flask','transformers','selenium','openenv','fastapi','uvicorn','websockets','fastmcp'"
    code = f"import sys, sapo_gym, agents; print(sorted(m for m in ({heavy}) if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_every_id_registered_with_horizon() -> None:
    for env_id, entry in ENVS.items():
        spec = gym.spec(env_id)
        assert spec.max_episode_steps == entry.horizon
    assert gym.spec("sapo/ALFWorld-v0").max_episode_steps == 50
    assert gym.spec("sapo/WebShop-v0").max_episode_steps == 15
    # the spec reads the id's registered horizon back: built directly, or made with another max_episode_steps
    from sapo_gym.diagnostic import VaultEnv

    registered = gym.spec("sapo/Vault-v0").max_episode_steps
    assert VaultEnv().spec_fields()["horizon"] == registered
    assert gym.make("sapo/Vault-v0", max_episode_steps=3).unwrapped.spec_fields()["horizon"] == registered


def test_check_env(env: gym.Env) -> None:
    check_env(env.unwrapped, skip_render_check=True)


def test_spaces_admit_any_unicode_and_long_outputs(env: gym.Env) -> None:
    assert env.action_space.contains("ünïcödé 中文 🙂 " * 3000)
    assert env.action_space.max_length >= 32_000
    assert not env.action_space.contains(b"bytes")


def test_info_keys_and_step(env: gym.Env) -> None:
    obs, info = env.reset(seed=3)
    assert isinstance(obs, str) and set(info) >= STABLE_KEYS
    assert info["action_mask"].dtype == bool and info["action_mask"].shape == (len(info["admissible_actions"]),)
    action = next(a for a in info["admissible_actions"] if a != "help")
    obs2, reward, terminated, truncated, info2 = env.step(f"<think>t</think><action>{action}</action>")
    assert set(info2) >= STEP_KEYS
    assert info2["action"] == action and info2["is_action_valid"] and info2["is_action_admissible"]
    assert isinstance(reward, float) and 0.0 <= info2["score"] <= 1.0
    assert env.unwrapped.spec_hash() == env.unwrapped.spec_hash() and len(env.unwrapped.spec_hash()) == 16
    fields = env.unwrapped.spec_fields()
    assert fields["horizon"] == env.spec.max_episode_steps and fields["protocol"] == "verl-agent-v1"
    assert fields["id"] == env.spec.id


def test_seeded_reset_is_deterministic(env: gym.Env) -> None:
    a = env.reset(seed=11)
    b = env.reset(seed=11)
    assert a[0] == b[0] and a[1]["task_id"] == b[1]["task_id"]
    tasks = {env.reset(seed=s)[1]["task_id"] for s in range(6)}
    assert len(tasks) > 1  # seeds choose different tasks


def test_bad_actions_never_raise_or_corrupt(env: gym.Env) -> None:
    obs, info = env.reset(seed=5, options={"task_index": 0})
    before = (info["admissible_actions"], info["task_id"])
    for junk in [
        "",
        "\x00\x01",
        "中" * 10,
        "<action>" * 1000,
        "x" * (1 << 20),
        "<think></think><action>fly to the moon</action>",
    ]:
        _, reward, terminated, _, info = env.step(junk)
        assert info["is_action_admissible"] is False and not terminated
    assert info["task_id"] == before[1]
    assert info["admissible_actions"] == before[0]


def test_unknown_kwargs_and_splits_name_the_choices() -> None:
    with pytest.raises(TypeError, match="valid choices"):
        gym.make("sapo/Vault-v0", colour="red")
    with pytest.raises(ValueError, match="valid choices"):
        gym.make("sapo/Vault-v0", split="nope")
    with pytest.raises(ValueError, match="valid choices"):
        gym.make("sapo/Vault-v0", protocol="nope")


def test_kwargs_validation_follows_forwarded_kwargs_to_the_base_class() -> None:
    # the browser env declares only page_timeout_s and forwards **kwargs to the text env
    with pytest.raises(TypeError, match="valid choices") as err:
        gym.make("sapo/WebShop-Browser-v0", colour="red")
    assert "'page_timeout_s'" in str(err.value) and "'data_dir'" in str(err.value) and "'split'" in str(err.value)


def test_strict_protocol_does_not_execute_inadmissible() -> None:
    env = gym.make("sapo/Vault-v0", protocol="strict-v1")
    _, info = env.reset(options={"task_index": 0})
    _, _, terminated, _, info = env.step("<think>t</think><action>press purple</action>")
    assert info["is_action_valid"] is False and info["parse_reason"] == "inadmissible" and not terminated
    assert info["raw_observation"].startswith("You stand before a vault")  # unchanged


def test_vault_rewards_terminates_and_truncates() -> None:
    env = gym.make("sapo/Vault-v0")
    _, info = env.reset(options={"task_index": 2})
    total, terminated = 0.0, False
    while not terminated:
        _, r, terminated, truncated, info = env.step(f"<think></think><action>{info['expert_action']}</action>")
        total += r
    assert info["won"] and total == 10.0 and not truncated
    env.reset(options={"task_index": 2})
    for _ in range(4):
        _, _, terminated, truncated, _ = env.step("<think></think><action>look</action>")
    assert truncated and not terminated


def test_task_ids_select_tasks() -> None:
    env = gym.make("sapo/Vault-v0", split="test")
    ids = env.unwrapped.task_ids
    _, info = env.reset(options={"task_id": ids[5]})
    assert info["task_id"] == ids[5]
    with pytest.raises(ValueError, match="unknown task_id"):
        env.reset(options={"task_id": "nope"})
    assert np.all(info["action_mask"])
    assert sapo_gym.__version__
