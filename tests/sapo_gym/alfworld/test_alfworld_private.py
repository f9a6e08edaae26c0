"""ALFWorld-Mini's private split: games generated from a secret seed, found in no published data; needs the alfworld extra."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import sapo_gym  # noqa: F401

pytest.importorskip("alfworld")
pytest.importorskip("fast_downward")

from sapo_gym.alfworld.private import game_key, private_games, public_game_keys  # noqa: E402

SEED = "3c" * 32
OTHER = "91" * 32
N = 4


def _make(seed: str = SEED, n: int = N):
    return gym.make("sapo/ALFWorld-Mini-v0", prompt=None, split="private", private_seed=seed, private_games=n)


@pytest.mark.slow
def test_the_split_regenerates_identically_and_no_game_is_a_public_one() -> None:
    games = private_games(SEED, N, workers=1)
    assert [g.to_json() for g in games] == [g.to_json() for g in private_games(SEED, N, workers=1)]
    other = private_games(OTHER, N, workers=1)
    assert {game_key(g) for g in games}.isdisjoint(game_key(g) for g in other)
    public = public_game_keys()
    assert len(public) > 700 and not {game_key(g) for g in games + other} & public
    assert all(len(g.receptacles) <= 4 for g in games)  # ALFWorld-Mini's rooms


@pytest.mark.slow
def test_the_env_hashes_the_games_hides_the_seed_and_its_games_are_won_by_their_walkthrough() -> None:
    a, b, c = _make(), _make(), _make(OTHER)
    try:
        base = a.unwrapped
        assert base.spec_hash() == b.unwrapped.spec_hash() != c.unwrapped.spec_hash()
        fields = json.dumps(base.spec_fields())
        assert SEED not in fields and base.spec_fields()["dataset"].startswith("generated-mini-v1-private-")
        assert list(base.task_ids) == [f"private/{i:03d}" for i in range(N)]  # opaque: no task type, object or scene
        for index in range(N):
            _, info = a.reset(seed=0, options={"task_index": index})
            done = False
            while not done:
                _, _, terminated, truncated, info = a.step(f"<think>x</think><action>{info['expert_action']}</action>")
                done = terminated or truncated
            assert info["won"], index
    finally:
        for env in (a, b, c):
            env.close()
