"""gymnasium's own vector API on every registered id, driven as a user drives it.

``gym.make_vec(id, num_envs=2, vectorization_mode="sync"|"async")`` with default ``vector_kwargs`` (async: shared
memory) either plays exactly as two single envs under gymnasium's next-step autoreset (observations, rewards,
flags, every info value and ``_key`` mask) or refuses when built, naming what to use; ``gym.make_vec(id,
num_envs=2)`` (the ids' vector entry point, sync or ``vectorization="async"``) always plays as the single envs.
Episodes mix the expert, random admissible actions and junk (invalid, empty, non-ASCII, sampled from the
action space), and end at different times.
"""

from __future__ import annotations

import copy
import multiprocessing as mp
import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

import sapo_gym
from sapo_gym.registration import ENVS, REMOTE_ID
from sapo_gym.spaces import SharedTexts, UnicodeText

CASES: dict[str, dict[str, Any]] = {
    "sapo/ALFWorld-v0": {"data_dir": "embedded", "max_episode_steps": 12},
    "sapo/ALFWorld-Mini-v0": {"max_episode_steps": 12},
    "sapo/WebShop-v0": {},
    "sapo/WebShop-Mini-v0": {},
    "sapo/Vault-v0": {},
}
"""Ids played, with the kwargs a user would pass (ALFWorld: the embedded games whatever ALFWORLD_DATA says, and a
shorter horizon so that random play also ends episodes within the steps played)."""
SKIPPED = {
    REMOTE_ID: "plays a served env: needs a running `sapo-gym env serve` and the serve extra",
    "sapo/WebShop-Browser-v0": "needs Chromium and selenium (browser extra); its batching is WebShop-v0's (ragged_infos)",
}
STEPS = 40
JUNK = ("", "junk", "<action>fly to the moon</action>", "<think>hm</think>", "日本語 ☃ 𝄞 \x00", "x" * 3000)


def test_every_registered_id_is_played_or_skipped_with_a_reason() -> None:
    ids = {i for i in gym.registry if i.startswith("sapo/")}
    assert ids == set(CASES) | set(SKIPPED)
    assert set(ENVS) | {REMOTE_ID} == ids


def _tagged(action: str) -> str:
    return f"<think>play</think><action>{action}</action>"


def _choose(rng: np.random.Generator, env_index: int, info: dict[str, Any], action_space: gym.Space) -> str:
    """Env 0 mostly follows the expert, env 1 mostly plays at random; both send junk now and then."""
    roll = rng.random()
    if roll < (0.7 if env_index == 0 else 0.1) and info.get("expert_action"):
        return _tagged(info["expert_action"])
    if roll < 0.75 and info.get("admissible_actions"):
        return _tagged(str(rng.choice(info["admissible_actions"])))
    if roll < 0.8:
        return str(action_space.sample())
    return JUNK[int(rng.integers(len(JUNK)))]


def _same(got: Any, want: Any, where: str) -> None:
    if isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype and np.array_equal(got, want), where
    else:  # gymnasium's numeric info arrays give numpy scalars: equal, not identical
        assert not isinstance(got, np.ndarray) and (got is None) == (want is None) and got == want, where


def _same_infos(vec_infos: dict[str, Any], singles: list[dict[str, Any]], where: str) -> None:
    """gymnasium's layout: one entry per key of any env, a ``_key`` mask of the envs that have it, dicts nested."""
    keys = set().union(*singles)
    assert {k for k in vec_infos if not (k.startswith("_") and k[1:] in keys)} == keys, where
    for key in keys:
        assert list(vec_infos[f"_{key}"]) == [key in info for info in singles], f"{where} _{key}"
        if any(isinstance(info.get(key), dict) for info in singles):
            _same_infos(vec_infos[key], [info.get(key, {}) for info in singles], f"{where} {key}")
            continue
        for i, info in enumerate(singles):
            if key in info:
                _same(vec_infos[key][i], info[key], f"{where} env {i} {key}")


def _single_steps(singles: list[gym.Env], actions: list[str], done: list[bool]) -> list[tuple[Any, ...]]:
    """What gymnasium's next-step autoreset makes of single envs: an env that ended resets (reward 0, flags False)."""
    out = []
    for env, action, ended in zip(singles, actions, done):
        if ended:
            obs, info = env.reset()
            out.append((obs, 0.0, False, False, info))
        else:
            out.append(env.step(action))
    return out


def _play(vec: gym.vector.VectorEnv, env_id: str, kwargs: dict[str, Any]) -> None:
    """Step ``vec`` and two single envs alike; each env must end >= 2 episodes, once while the other plays on."""
    assert vec.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP  # gymnasium's default
    singles = [gym.make(env_id, **kwargs) for _ in range(vec.num_envs)]
    rng = np.random.default_rng(0)
    ended, apart = [0] * vec.num_envs, 0
    try:
        obs, infos = vec.reset(seed=0)
        want = [env.reset(seed=i) for i, env in enumerate(singles)]  # gymnasium seeds env i with seed + i
        assert isinstance(obs, tuple) and obs == tuple(o for o, _ in want)
        _same_infos(infos, [info for _, info in want], "reset")
        done = [False] * vec.num_envs
        for t in range(STEPS):
            if t % 4 == 3:  # a batch sampled from the vector env's action space
                batch: Any = vec.action_space.sample()
                actions = list(batch)
            else:
                actions = [_choose(rng, i, info, vec.single_action_space) for i, (_, info) in enumerate(want)]
                batch = (actions, np.array(actions), tuple(actions))[t % 4]  # a list, numpy strings, a tuple
                actions = [str(a) for a in batch]  # numpy's fixed-width strings drop trailing NULs (numpy's doing)
            obs, rewards, terms, truncs, infos = vec.step(batch)
            out = _single_steps(singles, actions, done)
            assert isinstance(obs, tuple) and obs == tuple(o for o, *_ in out), f"obs at step {t}"
            assert rewards.dtype == np.float64 and list(rewards) == [float(r) for _, r, *_ in out], (
                f"rewards at step {t}"
            )
            assert list(terms) == [o[2] for o in out] and list(truncs) == [o[3] for o in out], f"flags at step {t}"
            _same_infos(infos, [o[4] for o in out], f"step {t}")
            done = [bool(o[2] or o[3]) for o in out]
            ended = [n + d for n, d in zip(ended, done)]
            apart += done.count(True) == 1
            want = [(o[0], o[4]) for o in out]
    finally:
        vec.close()
        for env in singles:
            env.close()
    assert min(ended) >= 2 and apart >= 1, (ended, apart)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("env_id", sorted(CASES))
def test_gymnasium_modes_play_as_single_envs_or_refuse_when_built(env_id: str, mode: str) -> None:
    kwargs = CASES[env_id]
    if ENVS[env_id].ragged_infos:
        with pytest.raises(gym.error.Error, match=r"sapo_gym\.make_vec") as refused:
            gym.make_vec(env_id, num_envs=2, vectorization_mode=mode, **kwargs)
        assert env_id in str(refused.value) and "without vectorization_mode" in str(refused.value)
        assert not mp.active_children()  # refused before any worker started
        return
    vec = gym.make_vec(env_id, num_envs=2, vectorization_mode=mode, **kwargs)
    assert type(vec) is {"sync": gym.vector.SyncVectorEnv, "async": gym.vector.AsyncVectorEnv}[mode]
    if mode == "async":
        assert vec.shared_memory  # gymnasium's default
    _play(vec, env_id, kwargs)


@pytest.mark.parametrize("vectorization", [None, "async"])
@pytest.mark.parametrize("env_id", sorted(CASES))
def test_make_vec_without_mode_plays_as_single_envs(env_id: str, vectorization: str | None) -> None:
    kwargs = CASES[env_id]
    extra = {} if vectorization is None else {"vectorization": vectorization}
    vec = gym.make_vec(env_id, num_envs=2, **extra, **kwargs)
    assert (
        type(vec)
        is {None: sapo_gym.vector.RaggedSyncVectorEnv, "async": sapo_gym.vector.RaggedAsyncVectorEnv}[vectorization]
    )
    _play(vec, env_id, kwargs)


class _Echo(gym.Env[str, str]):
    """Observes the action it was given (whatever its length: an env breaking its space, to test the buffer)."""

    observation_space = UnicodeText(8)
    action_space = UnicodeText(64)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        return "", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return action, 0.0, False, False, {}


@pytest.mark.filterwarnings("ignore:.*(Worker|Traceback|Raising the last exception):UserWarning")
def test_shared_memory_carries_any_unicode_and_never_truncates() -> None:
    space = UnicodeText(8)
    memory = create_shared_memory(space, n=3)
    view = read_from_shared_memory(space, memory, n=3)
    texts = ("ab", "\ud800x𝄞\x00é", "12345678")  # a lone surrogate, a non-BMP character, NUL; exactly max_length
    for i, text in enumerate(texts):
        write_to_shared_memory(space, i, text, memory)
    assert isinstance(view, SharedTexts) and view == texts and list(view) == list(texts)
    snapshot = copy.deepcopy(view)
    assert type(snapshot) is tuple and snapshot == texts and pickle.loads(pickle.dumps(view)) == texts
    write_to_shared_memory(space, 0, "", memory)
    assert view[0] == "" and snapshot[0] == "ab"  # the view is live, the copy is not
    with pytest.raises(ValueError, match="exceeds the space's max_length 8"):
        write_to_shared_memory(space, 1, "x" * 9, memory)
    assert view[1] == texts[1]

    vec = gym.vector.AsyncVectorEnv([_Echo, _Echo])  # gymnasium's defaults: shared memory
    try:
        assert vec.reset(seed=0)[0] == ("", "")
        assert vec.step(["héllo 𝄞", "ok"])[0] == ("héllo 𝄞", "ok")
        with pytest.raises(ValueError, match="exceeds the space's max_length"):
            vec.step(["x" * 9, "ok"])
    finally:
        vec.close()
