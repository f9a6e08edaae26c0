"""Env workers on a two-node Ray cluster simulated on this machine (``ray.cluster_utils.Cluster``, one CPU per
node): members run on both nodes and play the sync vector env's episodes; a worker killed mid-episode is
flagged and replaced, never a hang."""

from __future__ import annotations

import time

import pytest

from tests.support import ray_envs  # before ray: keeps Ray on 127.0.0.1

ray = pytest.importorskip("ray")

import sapo_gym  # noqa: E402
from sapo_gym.ray_vector import RayWorkers  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def _expert(results) -> list[str]:
    return [f"<think></think><action>{r.info['expert_action']}</action>" for r in results]


def _play(vec, episode: int, kill_after: int | None = None) -> list[tuple]:
    """Every member plays schedule entry ``episode`` with the oracle; optionally kill member 1's worker after
    ``kill_after`` steps. The log holds each answer (obs, reward, flags, task, lost)."""
    results = vec.reset_members(range(vec.num_envs), list(range(vec.num_envs)), episode)
    log = [(r.obs, r.info["task_id"]) for r in results]
    active, step = list(range(vec.num_envs)), 0
    while active:
        if step == kill_after:
            ray_envs.kill(vec.actors[1])
        answers = vec.step_members(active, _expert(results))
        log += [(i, r.obs, r.reward, r.terminated, r.truncated, r.lost is not None) for i, r in zip(active, answers)]
        keep = [k for k, r in enumerate(answers) if not (r.terminated or r.truncated or r.lost)]
        active, results, step = [active[k] for k in keep], [answers[k] for k in keep], step + 1
    return log


def test_members_on_both_nodes_play_the_sync_episodes_and_survive_a_kill():
    kwargs = dict(group_size=2, schedule_seed=5, data_dir="embedded-mini")
    sync = sapo_gym.make_vec("sapo/ALFWorld-Mini-v0", 2, vectorization="sync", **kwargs)
    try:
        expected = [_play(sync, e) for e in (0, 1)]
        with ray_envs.two_node_cluster():
            assert len([n for n in ray.nodes() if n["Alive"]]) == 2
            vec = sapo_gym.make_vec(
                "sapo/ALFWorld-Mini-v0",
                2,
                vectorization="ray",
                ray_workers=RayWorkers(num_cpus=0.25, step_timeout_s=60),
                **kwargs,
            )
            try:
                nodes = vec.node_ids
                assert len(set(nodes)) == 2, f"SPREAD must place members on both nodes, got {nodes}"
                assert set(nodes) == {n["NodeID"] for n in ray.nodes() if n["Alive"]}
                assert _play(vec, 0) == expected[0]
                start = time.monotonic()
                lost = _play(vec, 1, kill_after=2)
                assert time.monotonic() - start < 60  # flagged at once, not waited out
                assert [e for e in lost if len(e) == 6 and e[5]] == [(1, "", 0.0, False, False, True)]
                others = [e for e in lost if len(e) == 2 or e[0] != 1]
                assert others == [e for e in expected[1] if len(e) == 2 or e[0] != 1]  # the other members untouched
                assert vec.replacements == [0, 1, 0, 0]
                assert _play(vec, 1) == expected[1]  # the replacement plays member 1's episode as sync does
            finally:
                vec.close()
    finally:
        sync.close()
