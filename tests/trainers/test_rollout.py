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
        return [
            format_action(info["expert_action"]) if i == 0 and len(infos) == 3 else format_action("look")
            for i, info in enumerate(infos)
        ]


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


def _buy_the_first_result(observations, infos):
    """Searches the oracle's query, clicks the first product and buys it without choosing options: purchases
    of every quality, most of them partial (0 < score < 1)."""
    actions = []
    for info in infos:
        listed = info["admissible_actions"]
        if "click[buy now]" in listed:
            actions.append("click[buy now]")
        elif "click[next >]" in listed:
            actions.append(listed[listed.index("click[next >]") + 1])
        else:
            actions.append(info["expert_action"])
    return [format_action(a) for a in actions]


def test_a_score_reward_pays_the_purchase_score_where_the_env_pays_only_wins():
    """``--train-reward score``: the ending turn earns r_max × info['score'] (WebShop's partial credit); the
    episodes, their success and score are the env's; the env's own reward stays 10 on a win, else 0."""
    runs = {}
    for mode in (None, 10.0):
        vec = make_train_vec("sapo/WebShop-Mini-v0", num_tasks=6, group_size=1, schedule_seed=0, split="train")
        runs[mode] = collect(vec, _buy_the_first_result, episode=0, score_reward=mode)
        vec.close()
    env, scored = runs[None], runs[10.0]
    assert [(e.task_id, e.won, e.score) for e in env.episodes] == [(e.task_id, e.won, e.score) for e in scored.episodes]
    assert any(0.0 < e.score < 1.0 for e in env.episodes)  # the check below is not only about wins and zeros
    for rollout, pay in ((env, lambda e: 10.0 if e.won else 0.0), (scored, lambda e: 10.0 * e.score)):
        ends = {t.traj_id: t.reward for t in rollout.turns if t.done}
        assert ends == {k: pay(e) for k, e in enumerate(rollout.episodes)}
        assert all(t.reward == 0.0 for t in rollout.turns if not t.done)
        assert [e.episode_return for e in rollout.episodes] == [pay(e) for e in rollout.episodes]
