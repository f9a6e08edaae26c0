"""``sapo/WebShop-Mini-v0``: WebShop's shop, pages, reward and horizon over 200 generated products, with
held-out goals of its own id and spec hash."""

from __future__ import annotations

import gymnasium as gym
import pytest

import sapo_gym  # noqa: F401  (registers the ids)
from agents.base import format_action
from sapo_gym.webshop.catalog import TEST_GOALS
from sapo_gym.webshop.env import WebShopEnv


def _raw(env_id: str, **kwargs) -> WebShopEnv:
    return gym.make(env_id, prompt=None, **kwargs).unwrapped


def test_mini_is_webshop_over_fewer_products_with_its_own_spec():
    mini, full = _raw("sapo/WebShop-Mini-v0", split="test"), _raw("sapo/WebShop-v0", split="test")
    assert len(mini.catalog.products) == 200 and len(full.catalog.products) == 1000
    assert gym.spec("sapo/WebShop-Mini-v0").max_episode_steps == gym.spec("sapo/WebShop-v0").max_episode_steps == 15
    assert type(mini) is type(full)  # the same shop, pages, reward and parser: only the catalog and the cut differ
    assert mini.spec_fields()["goals"] == {"set": "human", "seed": 233, "part": "test", "test_goals": 100}
    assert "test_goals" not in full.spec_fields()["goals"]  # WebShop's cut stays out: the benchmark's hash is unchanged
    assert mini.spec_hash() != full.spec_hash()


def test_mini_held_out_goals_are_never_trained_on():
    test, train = _raw("sapo/WebShop-Mini-v0", split="test"), _raw("sapo/WebShop-Mini-v0", split="train")
    assert (len(test.task_ids), len(train.task_ids)) == (100, 300)
    assert not set(test.task_ids) & set(train.task_ids)
    held_out = {test.goal(i).instruction_text for i in range(len(test.task_ids))}
    assert not held_out & {train.goal(i).instruction_text for i in range(len(train.task_ids))}
    assert test.spec_hash() != train.spec_hash()


def test_the_oracle_wins_the_mini_goals():
    env = gym.make("sapo/WebShop-Mini-v0", prompt=None, split="test")
    wins = 0
    for seed in range(20):
        env.reset(seed=seed)
        done = False
        while not done:
            _, _, terminated, truncated, info = env.step(format_action(env.unwrapped.expert_action(), "oracle"))
            done = terminated or truncated
        wins += info["won"]
    assert wins >= 19, wins  # the full catalog's oracle wins >= 95 % (test_webshop_env); 20 draws, at most one miss


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "100"])
def test_test_goals_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="test_goals"):
        WebShopEnv(split="test", test_goals=bad)


def test_test_goals_moves_the_cut_between_the_parts():
    assert len(WebShopEnv(split="test").task_ids) == TEST_GOALS
    assert len(WebShopEnv(split="test", test_goals=40).task_ids) == 40
    assert (
        len(WebShopEnv(split="train", test_goals=40).task_ids)
        == len(WebShopEnv(split="train").task_ids) + TEST_GOALS - 40
    )
