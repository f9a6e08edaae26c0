"""Env workers on Ray (one-node local Ray of 2 CPUs): the same episodes as the sync vector env, lost workers
flagged and replaced within bounded time, Ray never imported by ``import sapo_gym``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.support import ray_envs  # before ray: keeps Ray on 127.0.0.1

ray = pytest.importorskip("ray")

import sapo_gym  # noqa: E402
from sapo_gym.ray_vector import RayWorkers  # noqa: E402
from sapo_gym.vector import MemberResult  # noqa: E402

pytestmark = pytest.mark.timeout(240)  # nothing here may hang: each test is bounded, the cluster too

LOOK = "<think></think><action>look</action>"


@pytest.fixture(scope="module")
def local_ray():
    with ray_envs.local_ray(num_cpus=2):
        yield


def _play(vec, steps: int) -> list:
    """Reset, then ``steps`` batch steps with the oracle's actions (through autoresets): everything returned."""
    obs, infos = vec.reset(seed=0)
    log = [(obs, list(infos["task_id"]))]
    for _ in range(steps):
        obs, rew, term, trunc, infos = vec.step(ray_envs.expert_actions(infos, vec.num_envs))
        log.append(
            (
                obs,
                rew.tolist(),
                term.tolist(),
                trunc.tolist(),
                list(infos["task_id"]),
                [m.tolist() for m in infos["action_mask"]],
                list(infos["admissible_actions"]),
            )
        )
    return log


def test_batch_api_plays_the_sync_envs_episodes(local_ray):
    """Vault, 2 tasks x 2: 10 steps through two autoresets give the same observations, rewards, flags and masks."""
    sync = sapo_gym.make_vec("sapo/Vault-v0", 2, group_size=2, vectorization="sync", schedule_seed=7)
    remote = sapo_gym.make_vec("sapo/Vault-v0", 2, group_size=2, vectorization="ray", schedule_seed=7)
    try:
        assert remote.num_envs == 4 and remote.member_groups == [0, 0, 1, 1]
        assert remote.metadata["autoreset_mode"] == sync.metadata["autoreset_mode"]
        expected, got = _play(sync, 10), _play(remote, 10)
        assert got == expected
        assert sum(any(step[2]) for step in got[1:]) >= 2, "the run must cross episode ends (autoreset)"
        _, infos = remote.reset(seed=0)
        assert infos["action_mask"].dtype == object  # one bool mask per env, as RaggedSyncVectorEnv batches it
        assert len({info.pid for info in remote.describe()}) == 4  # one worker process per member
    finally:
        sync.close()
        remote.close()


def _episodes(vec, episode: int) -> list[list[MemberResult]]:
    """Every member plays schedule entry ``episode`` to its end with the oracle (member API); all results."""
    results = vec.reset_members(range(vec.num_envs), list(range(vec.num_envs)), episode)
    log, active = [results], list(range(vec.num_envs))
    while active:
        actions = [f"<think></think><action>{results[k].info['expert_action']}</action>" for k in range(len(active))]
        results = vec.step_members(active, actions)
        log.append(results)
        active = [i for i, r in zip(active, results) if not (r.terminated or r.truncated)]
        results = [r for r in results if not (r.terminated or r.truncated)]
    return log


def _same(a: list[list[MemberResult]], b: list[list[MemberResult]]) -> bool:
    def flat(log: list[list[MemberResult]]) -> list[tuple]:
        return [(r.obs, r.reward, r.terminated, r.truncated, r.lost, sorted(r.info)) for step in log for r in step]

    def masks(log: list[list[MemberResult]]) -> list[list]:
        return [r.info["action_mask"].tolist() for step in log for r in step]

    return flat(a) == flat(b) and masks(a) == masks(b)


def test_member_api_plays_whole_alfworld_episodes_like_sync(local_ray):
    """ALFWorld-Mini, 2 groups x 2 members, two schedule entries, whole expert episodes, each member in a worker."""
    kwargs = dict(group_size=2, schedule_seed=3, data_dir="embedded-mini")
    sync = sapo_gym.make_vec("sapo/ALFWorld-Mini-v0", 2, vectorization="sync", **kwargs)
    remote = sapo_gym.make_vec("sapo/ALFWorld-Mini-v0", 2, vectorization="ray", **kwargs)
    try:
        for episode in (0, 1):
            expected, got = _episodes(sync, episode), _episodes(remote, episode)
            assert _same(got, expected)
            assert all(r.info["won"] for r in got[-1])  # the oracle wins every game
        assert remote.replacements == [0] * 4
    finally:
        sync.close()
        remote.close()


def test_a_killed_worker_gives_a_flagged_episode_and_a_replacement(local_ray):
    vec = sapo_gym.make_vec(
        "sapo/Vault-v0", 3, vectorization="ray", schedule_seed=1, ray_workers=RayWorkers(step_timeout_s=30)
    )
    sync = sapo_gym.make_vec("sapo/Vault-v0", 3, vectorization="sync", schedule_seed=1)
    try:
        vec.reset(seed=0)
        sync.reset(seed=0)
        vec.step([LOOK] * 3)
        sync.step([LOOK] * 3)
        os.kill(vec.describe()[1].pid, signal.SIGKILL)  # the worker process dies mid-episode
        start = time.monotonic()
        _, rewards, term, trunc, infos = vec.step([LOOK] * 3)
        assert time.monotonic() - start < 30  # answered, not waited out
        assert trunc.tolist() == [False, True, False] and not term.any() and rewards[1] == 0
        assert infos["_worker_lost"].tolist() == [False, True, False] and "died" in infos["worker_lost"][1]
        assert vec.replacements == [0, 1, 0] and vec.losses[0][0] == 1
        # the next step resets member 1 on the replacement, onto the task its schedule gives the next episode
        sync.step([LOOK] * 3)  # the step the Ray env's member 1 lost
        _, sync_infos = sync.reset(options={"reset_mask": np.array([False, True, False])})
        _, _, _, _, infos = vec.step([LOOK] * 3)
        assert infos["task_id"][1] == sync_infos["task_id"][1] and infos["step"][1] == 0
        assert vec.describe()[1].pid != 0  # the replacement answers
    finally:
        vec.close()
        sync.close()


def test_a_stalled_worker_is_timed_out_and_replaced(local_ray):
    """A step that never returns costs its episode after ``step_timeout_s``, not a hang; the others answer."""
    vec = sapo_gym.make_vec(
        "tests.support.ray_envs:Stalling-v0", 2, vectorization="ray", ray_workers=RayWorkers(step_timeout_s=2.0)
    )
    try:
        vec.reset_members([0, 1], [0, 1], episode=0)
        start = time.monotonic()
        results = vec.step_members([0, 1], ["<think></think><action>stall</action>", LOOK])
        waited = time.monotonic() - start
        # the 2 s timeout and the replacement's launch (seconds; 90 leaves a loaded CI machine room), not the 3600 s stall
        assert 2.0 <= waited < 90
        assert "no answer within 2.0 s" in results[0].lost and results[1].lost is None and results[1].info["step"] == 1
        assert vec.replacements == [1, 0]
        again = vec.reset_members([0, 1], [0, 1], episode=1)  # the replacement plays the member's schedule
        sync = sapo_gym.make_vec("sapo/Vault-v0", 2, vectorization="sync")
        plain = sync.reset_members([0, 1], [0, 1], episode=1)
        sync.close()
        assert [(r.obs, r.info["task_id"]) for r in again] == [(r.obs, r.info["task_id"]) for r in plain]
    finally:
        vec.close()


def test_workers_the_cluster_cannot_place_fail_in_bounded_time(local_ray):
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="did not start within 3.0 s"):
        sapo_gym.make_vec(
            "sapo/Vault-v0",
            2,
            vectorization="ray",
            ray_workers=RayWorkers(resources=(("no_such_resource", 1.0),), start_timeout_s=3.0),
        )
    assert time.monotonic() - start < 90  # the 3 s start timeout and Ray's bookkeeping, never an endless wait


def test_members_build_one_share_of_the_full_env(local_ray):
    full = sapo_gym.make_vec("sapo/Vault-v0", 4, group_size=2, vectorization="sync", schedule_seed=3)
    share = sapo_gym.make_vec("sapo/Vault-v0", 4, group_size=2, vectorization="ray", schedule_seed=3, members=[4, 5])
    try:
        assert share.member_ids == [4, 5] and share.member_groups == [2, 2]
        expected = [r.info["task_id"] for r in full.reset_members([4, 5], [9, 9], episode=2)]
        assert [r.info["task_id"] for r in share.reset_members([0, 1], [9, 9], episode=2)] == expected
    finally:
        full.close()
        share.close()


def test_import_sapo_gym_does_not_import_ray():
    code = (
        "import sys, sapo_gym, sapo_gym.ray_vector; v = sapo_gym.make_vec('sapo/Vault-v0', 1, vectorization='sync'); "
        "v.close(); print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"


def test_a_worker_lost_between_episodes_is_replaced_inside_the_reset(local_ray):
    """A dead worker found at reset time costs nothing: the reset is retried on its replacement."""
    vec = sapo_gym.make_vec("sapo/Vault-v0", 2, vectorization="ray", schedule_seed=2)
    sync = sapo_gym.make_vec("sapo/Vault-v0", 2, vectorization="sync", schedule_seed=2)
    try:
        ray_envs.kill(vec.actors[0])
        got, want = vec.reset_members([0, 1], [5, 6], episode=3), sync.reset_members([0, 1], [5, 6], episode=3)
        assert [(r.obs, r.info["task_id"], r.lost) for r in got] == [(r.obs, r.info["task_id"], None) for r in want]
        assert vec.replacements == [1, 0] and "reset" in vec.losses[0][1]
    finally:
        vec.close()
        sync.close()
