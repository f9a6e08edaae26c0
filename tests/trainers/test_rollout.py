"""The rollout: one episode per member, active envs only, groups on one task, done ≠ truncated."""

from __future__ import annotations

from agents.base import format_action
from agents.baselines import ExpertAgent
from trainers.rollout import collect, make_train_vec


class _Recorder:
    """Presses 'look' forever (episodes end by truncation) except in env 0, which follows the expert."""

    def __init__(self):
        self.batch_sizes: list[int] = []

    def act(self, observations, infos):
        self.batch_sizes.append(len(observations))
        return [format_action(info["expert_action"]) if i == 0 and len(infos) == 3 else format_action("look") for i, info in enumerate(infos)]


def test_expert_rollout_records_every_turn_with_ids():
    vec = make_train_vec("sapo/Vault-v0", num_tasks=2, group_size=3, schedule_seed=0)
    rollout = collect(vec, ExpertAgent().act, episode=0)
    assert len(rollout.episodes) == 6 and all(e.won for e in rollout.episodes)
    assert [e.group_id for e in rollout.episodes] == [0, 0, 0, 1, 1, 1]
    assert len({e.task_id for e in rollout.episodes[:3]}) == 1 and len({e.task_id for e in rollout.episodes[3:]}) == 1
    for traj in range(6):
        turns = [t for t in rollout.turns if t.traj_id == traj]
        assert [t.turn_idx for t in turns] == list(range(len(turns)))
        assert [t.done for t in turns] == [False] * (len(turns) - 1) + [True]
        assert turns[-1].reward == 10.0 and not any(t.invalid for t in turns)


def test_finished_envs_are_not_prompted_and_truncation_is_not_done():
    vec = make_train_vec("sapo/Vault-v0", num_tasks=3, group_size=1, schedule_seed=1)
    agent = _Recorder()
    rollout = collect(vec, agent.act, episode=0)
    assert agent.batch_sizes == [3, 3, 2, 2]  # env 0 opens the vault in 2 turns, the others hit the horizon (4)
    assert rollout.episodes[0].won and not rollout.episodes[0].truncated
    assert all(e.truncated and not e.won for e in rollout.episodes[1:])
    assert not any(t.done for t in rollout.turns if t.traj_id > 0)


def test_invalid_outputs_are_flagged_and_schedule_follows_the_episode_number():
    vec = make_train_vec("sapo/Vault-v0", num_tasks=4, group_size=1, schedule_seed=0)
    rollout = collect(vec, lambda obs, infos: ["press red"] * len(obs), episode=0)
    assert all(t.invalid for t in rollout.turns)
    first = [e.task_id for e in rollout.episodes]
    again = [e.task_id for e in collect(vec, lambda o, i: ["x"] * len(o), episode=0).episodes]
    later = [e.task_id for e in collect(vec, lambda o, i: ["x"] * len(o), episode=1).episodes]
    assert first == again and first != later
