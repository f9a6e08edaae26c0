"""WebShop's private split: held-out goals from a secret seed, found in no published data."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import sapo_gym  # noqa: F401
from sapo_gym.webshop.private import _text, goal_key, private_catalog, public_goal_keys

SEED = "5e" * 32
OTHER = "a7" * 32


def _make(seed: str = SEED, n: int = 6):
    return gym.make("sapo/WebShop-v0", prompt=None, split="private", private_seed=seed, private_goals=n)


def test_the_split_regenerates_identically_from_its_seed_and_differently_from_another() -> None:
    a, b, c = _make(), _make(), _make(OTHER)
    try:
        goals = [a.unwrapped.goal(i) for i in range(6)]
        assert goals == [b.unwrapped.goal(i) for i in range(6)]
        assert a.unwrapped.spec_hash() == b.unwrapped.spec_hash() != c.unwrapped.spec_hash()
        assert {g.instruction_text for g in goals}.isdisjoint(c.unwrapped.goal(i).instruction_text for i in range(6))
        assert (
            a.unwrapped.spec_hash() != _make(n=7).unwrapped.spec_hash()
        )  # the hash covers the goals, not only the seed
    finally:
        for env in (a, b, c):
            env.close()


def test_no_private_goal_is_a_public_one_and_the_spec_does_not_hold_the_seed() -> None:
    keys, texts = public_goal_keys(None, 0)
    catalog = private_catalog(SEED, 100)
    assert len({goal_key(g) for g in catalog.goals}) == 100 and len({_text(g) for g in catalog.goals}) == 100
    assert not {goal_key(g) for g in catalog.goals} & keys and not {_text(g) for g in catalog.goals} & texts
    env = _make()
    try:
        fields = env.unwrapped.spec_fields()
        assert SEED not in json.dumps(fields) and fields["split"] == "private"
        assert fields["goals"] == {"set": "private", "seed": 233, "part": "all"}
        assert list(env.unwrapped.task_ids) == [f"goal-{i:05d}" for i in range(6)]
    finally:
        env.close()


def test_the_expert_wins_every_private_goal() -> None:
    env = _make(n=4)
    try:
        for index in range(4):
            _, info = env.reset(seed=0, options={"task_index": index})
            done = False
            while not done:
                _, _, terminated, truncated, info = env.step(
                    f"<think>x</think><action>{info['expert_action']}</action>"
                )
                done = terminated or truncated
            assert info["won"], index
    finally:
        env.close()


@pytest.mark.parametrize("seed", [None, "", "12", "zz" * 32, "abc" * 11])
def test_a_weak_or_malformed_seed_is_refused_without_being_repeated(seed) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="private_seed") as exc:
        _make(seed)
    assert seed is None or not seed or seed not in str(exc.value)
