"""The rollout and the trainer on Ray env workers (``--env-workers ray``, a local Ray of 2 CPUs): the same turns
and the same training numbers as in-process envs; an episode whose worker is lost is dropped, not trained on."""

from __future__ import annotations

import argparse

import pytest

from tests.support import ray_envs  # before ray: keeps Ray on 127.0.0.1

ray = pytest.importorskip("ray")

import torch  # noqa: E402

from agents.baselines import ExpertAgent  # noqa: E402
from trainers.config import TrainConfig, add_arguments, from_args  # noqa: E402
from trainers.rollout import collect, make_train_vec  # noqa: E402

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def local_ray():
    with ray_envs.local_ray(num_cpus=2):
        yield


def test_expert_rollouts_on_ray_equal_the_in_process_ones(local_ray):
    sync = make_train_vec("sapo/Vault-v0", 2, 3, schedule_seed=4)
    remote = make_train_vec("sapo/Vault-v0", 2, 3, schedule_seed=4, env_workers="ray")
    try:
        for episode in (0, 1):
            want, got = (
                collect(sync, ExpertAgent().act, episode, seed=2),
                collect(remote, ExpertAgent().act, episode, seed=2),
            )
            assert got.turns == want.turns and got.episodes == want.episodes and not got.dropped
            assert all(e.won for e in got.episodes)
    finally:
        sync.close()
        remote.close()


def test_an_episode_whose_worker_dies_is_dropped_and_the_member_comes_back(local_ray):
    vec = make_train_vec("sapo/Vault-v0", 3, 1, schedule_seed=0, env_workers="ray")
    calls = []

    def act(observations, infos):  # kills member 1's worker on the second turn, then plays 'look'
        calls.append(len(observations))
        if len(calls) == 2:
            ray_envs.kill(vec.actors[1])
        return ["<think></think><action>look</action>"] * len(observations)

    try:
        rollout = collect(vec, act, episode=0)
        assert [d.traj_id for d in rollout.dropped] == [1] and "died" in rollout.dropped[0].reason
        assert rollout.dropped[0].stats.length == 1  # it got one turn in before the kill
        assert {t.traj_id for t in rollout.turns} == {0, 2} and len(rollout.episodes) == 2
        assert all(e.truncated for e in rollout.episodes)  # 'look' never opens the vault: horizon 4
        assert calls == [3, 3, 2, 2]  # the lost member is not prompted again
        again = collect(vec, ExpertAgent().act, episode=1)
        assert not again.dropped and len(again.episodes) == 3 and all(e.won for e in again.episodes)
        assert vec.replacements == [0, 1, 0]
    finally:
        vec.close()


def test_env_workers_flags_parse():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    cfg = from_args(parser.parse_args(["--env-workers", "ray", "--ray-address", "auto"]))
    assert (cfg.env_workers, cfg.ray_address) == ("ray", "auto")
    assert TrainConfig().env_workers == "sync" and TrainConfig().ray_address == ""
    assert {"env_workers", "ray_address"} <= set(TrainConfig.RESUME_FREE)  # where envs run, not what is learned
    with pytest.raises(SystemExit):
        parser.parse_args(["--env-workers", "threads"])
    with pytest.raises(ValueError, match="env_workers"):
        TrainConfig(env_workers="threads")


def test_training_on_ray_workers_gives_the_in_process_numbers(local_ray, make_trainer):
    """GRPO, 2 iterations of 2 tasks x 4 on Vault: every metric but the timings equals the in-process run's."""
    rows = {}
    for workers in ("sync", "ray"):
        trainer = make_trainer("grpo", env_workers=workers, iterations=2, kl_coef=0.0)
        assert type(trainer.vec).__name__ == {"sync": "RaggedSyncVectorEnv", "ray": "RayVectorEnv"}[workers]
        try:
            rows[workers] = [
                {k: v for k, v in r.items() if not k.startswith(("time/", "memory/"))} for r in trainer.train()
            ]
        finally:
            trainer.close()
    assert rows["ray"] == rows["sync"]
    assert len(rows["ray"]) == 2 and {"rollout/success", "actor/loss"} <= set(rows["ray"][0])


def test_training_goes_on_past_a_lost_worker(local_ray, make_trainer):
    """A worker killed in iteration 0 costs that iteration one episode (logged, not trained on); iteration 1 plays
    all 8 on the replacement."""
    trainer = make_trainer("sapo", env_workers="ray", iterations=2, kl_coef=0.0)
    act, calls = trainer.agent.act_detailed, []

    def act_and_kill(observations, infos):
        calls.append(len(observations))
        if len(calls) == 1:  # member 3 dies before its first step's answer
            ray_envs.kill(trainer.vec.actors[3])
        return act(observations, infos)

    trainer.agent.act_detailed = act_and_kill
    try:
        first, second = trainer.run_iteration(), trainer.run_iteration()
    finally:
        trainer.close()
    assert first["rollout/dropped_episodes"] == 1 and "rollout/dropped_episodes" not in second
    assert trainer.vec.replacements == [0, 0, 0, 1, 0, 0, 0, 0] and calls[0] == 8 and calls[1] <= 7


def test_an_iteration_that_loses_every_worker_skips_its_update(local_ray, make_trainer):
    """All 8 workers die before their first answer: no turn is left, so the update is skipped (logged) and the
    weights stay; the next iteration plays on the replacements and trains."""
    trainer = make_trainer("sapo", env_workers="ray", iterations=2, kl_coef=0.0)
    act, calls = trainer.agent.act_detailed, []

    def act_and_kill_all(observations, infos):
        calls.append(len(observations))
        if len(calls) == 1:
            for actor in trainer.vec.actors:
                ray_envs.kill(actor)
        return act(observations, infos)

    trainer.agent.act_detailed = act_and_kill_all
    before = [p.detach().clone() for p in trainer.policy.model.parameters()]
    try:
        first = trainer.run_iteration()
        unchanged = all(torch.equal(a, b) for a, b in zip(before, trainer.policy.model.parameters()))
        second = trainer.run_iteration()
    finally:
        trainer.close()
    assert first["rollout/dropped_episodes"] == 8 and first["rollout/skipped_update"] == 1 and unchanged
    assert "actor/loss" in second and "rollout/skipped_update" not in second
