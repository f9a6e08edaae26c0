"""Fixtures for the loop/method tests: a format-warm-started tiny policy and a trainer factory.

A random-init model writes no valid ``<think>…</think><action>…</action>`` at all, so every
turn would get the same reward and a zero advantage. The warm start clones random-admissible
demonstrations for a few epochs: outputs are then partly valid and their outcomes vary, which is
what a test of one update needs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

VAULT = dict(env="sapo/Vault-v0", prompt="plain", history_length=0, max_response_tokens=16, micro_batch_size=16)


@pytest.fixture(scope="session")
def format_policy_state() -> dict[str, Any]:
    """State dict of ``PolicyModel.tiny(seed=0)`` after a short clone of random-admissible play."""
    from agents.baselines import RandomAgent
    from agents.policy import PolicyModel
    from sapo_gym.prompts import PLAIN_PROMPT
    from trainers.config import TrainConfig
    from trainers.sft import behaviour_clone, collect_demonstrations

    policy = PolicyModel.tiny(seed=0)
    demos = collect_demonstrations(
        TrainConfig(**VAULT), {"prompt": PLAIN_PROMPT, "history_length": 0}, RandomAgent(0), 32
    )
    behaviour_clone(policy, demos, epochs=12, lr=3e-3)
    return copy.deepcopy(policy.model.state_dict())


@pytest.fixture
def make_trainer(format_policy_state, tmp_path) -> Callable[..., Any]:
    """``make_trainer(algo, **overrides)``: a Trainer on Vault over a fresh copy of the warm policy."""
    from agents.policy import PolicyModel
    from trainers.config import GROUP_ALGOS, TrainConfig
    from trainers.loop import Trainer

    def make(algo: str, **overrides: Any) -> Trainer:
        policy = PolicyModel.tiny(seed=0)
        policy.model.load_state_dict(format_policy_state)
        fields = {
            **VAULT,
            "algo": algo,
            "episodes_per_iteration": 8,
            "group_size": 4 if algo in GROUP_ALGOS else 0,
            "lr": 1e-3,
            "critic_lr": 1e-3,
            "out_dir": str(tmp_path / algo),
            "progress": False,
            **overrides,
        }
        return Trainer(TrainConfig(**fields), policy=policy)

    return make
