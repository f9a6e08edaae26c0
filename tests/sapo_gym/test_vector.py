"""Vector envs: observations change (no stale shared memory), groups share tasks, schedule is seeded."""

from __future__ import annotations

import numpy as np
import pytest

import sapo_gym
from sapo_gym.wrappers import TaskSchedule


def _act(infos: dict, n: int, pick: str = "expert") -> list[str]:
    out = []
    for i in range(n):
        has_expert = pick == "expert" and "expert_action" in infos and infos["_expert_action"][i]
        action = infos["expert_action"][i] if has_expert else "look"
        out.append(f"<think></think><action>{action}</action>")
    return out


@pytest.mark.parametrize("vectorization", ["async", "sync"])
def test_groups_share_tasks_and_observations_change(vectorization: str) -> None:
    envs = sapo_gym.make_vec("sapo/Vault-v0", 2, group_size=2, vectorization=vectorization, schedule_seed=7)
    try:
        assert envs.num_envs == 4
        obs, infos = envs.reset(seed=0)
        ids = list(infos["task_id"])
        assert ids[0] == ids[1] and ids[2] == ids[3] and ids[0] != ids[2]
        obs2, rewards, term, trunc, infos2 = envs.step(_act(infos, 4))
        assert all(a != b for a, b in zip(obs, obs2)), "observations must change after a step"
        assert list(infos2["raw_observation"]) != list(infos["raw_observation"])
        # run to the end: every member of a group solves the same code
        for _ in range(3):
            if np.all(term | trunc):
                break
            obs2, rewards, term, trunc, infos2 = envs.step(_act(infos2, 4))
        assert np.all(term)
        # next-step autoreset: the next step resets every env onto the next scheduled task
        _, _, _, _, infos3 = envs.step(_act(infos2, 4))
        new_ids = list(infos3["task_id"])
        assert new_ids[0] == new_ids[1] and new_ids[2] == new_ids[3]
        assert new_ids[:3:2] != ids[:3:2]
    finally:
        envs.close()


def test_schedule_is_shared_and_covers_the_split() -> None:
    import gymnasium as gym

    def member(worker: int) -> TaskSchedule:
        return TaskSchedule(gym.make("sapo/Vault-v0"), worker=worker, group_size=2, num_groups=4, schedule_seed=3)

    workers = [member(w) for w in range(8)]
    n = len(workers[0].unwrapped.task_ids)  # 16 tasks, 4 groups: one pass every 4 rounds
    seen = []
    for rnd in range(4):
        per_worker = [w.task_index(rnd) for w in workers]
        assert per_worker[0::2] == per_worker[1::2]  # group members agree
        seen += per_worker[0::2]
    assert sorted(seen) == list(range(n))  # one pass visits every task exactly once
    assert member(0).task_index(5) == member(1).task_index(5)  # derived alone, identically


def test_a_member_reset_as_a_given_episode_follows_the_schedule_rule() -> None:
    """``reset_episode`` (the Ray worker's and ``reset_members``' reset) is ``reset``'s rule at a given episode."""
    from sapo_gym.members import make_member

    env, twin = make_member("sapo/Vault-v0", 3, 2, 4, 7, {}), make_member("sapo/Vault-v0", 3, 2, 4, 7, {})
    ids = env.unwrapped.task_ids
    for episode in range(3):  # the plain reset counts the episodes itself
        assert twin.reset(seed=episode)[1]["task_id"] == ids[env.task_index(episode)]
    assert env.reset_episode(2, seed=0)[1]["task_id"] == ids[env.task_index(2)]
    assert env.reset_episode(5, options={"task_index": 1})[1]["task_id"] == ids[1]  # an explicit task wins


def test_env_kwargs_named_like_make_vec_parameters_pass_through() -> None:
    envs = sapo_gym.make_vec("sapo/Vault-v0", 2, vectorization="sync", num_tasks=3)
    try:
        assert envs.num_envs == 2
        _, infos = envs.reset(seed=0)
        assert set(infos["task_id"]) <= {"vault-train-000", "vault-train-001", "vault-train-002"}
    finally:
        envs.close()


def test_make_vec_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        sapo_gym.make_vec("sapo/Vault-v0", 0)
    with pytest.raises(ValueError, match="vectorization"):
        sapo_gym.make_vec("sapo/Vault-v0", 1, vectorization="threads")  # type: ignore[arg-type]


@pytest.mark.parametrize("vectorization", ["async", "sync"])
def test_envs_with_different_action_counts(vectorization: str) -> None:
    """WebShop pages list different numbers of actions: masks are batched per env, not stacked."""
    envs = sapo_gym.make_vec("sapo/WebShop-v0", 4, vectorization=vectorization, split="test")
    try:
        obs, infos = envs.reset(seed=0)
        differed = False
        for _ in range(3):
            actions = [f"<think></think><action>{a}</action>" for a in infos["expert_action"]]
            new_obs, _, term, trunc, infos = envs.step(actions)
            assert all(a != b for a, b in zip(obs, new_obs))
            obs = new_obs
            for mask, adm in zip(infos["action_mask"], infos["admissible_actions"]):
                assert mask.dtype == bool and mask.shape == (len(adm),)
            differed |= len({len(m) for m in infos["action_mask"]}) > 1
        assert differed, "the test needs pages with different numbers of actions"
    finally:
        envs.close()


def test_members_build_one_share_of_the_full_env() -> None:
    """``members`` (a process's share) play exactly the schedules those indices have in the full env."""
    full = sapo_gym.make_vec("sapo/Vault-v0", 4, group_size=2, vectorization="sync", schedule_seed=3)
    share = sapo_gym.make_vec("sapo/Vault-v0", 4, group_size=2, vectorization="sync", schedule_seed=3, members=[4, 5])
    try:
        assert share.num_envs == 2
        full_tasks = [full.envs[w].unwrapped.task_ids[full.envs[w].task_index(e)] for w in (4, 5) for e in range(3)]
        share_tasks = [env.unwrapped.task_ids[env.task_index(e)] for env in share.envs for e in range(3)]
        assert share_tasks == full_tasks
        with pytest.raises(ValueError, match="members"):
            sapo_gym.make_vec("sapo/Vault-v0", 4, group_size=2, vectorization="sync", members=[8])
    finally:
        full.close()
        share.close()
