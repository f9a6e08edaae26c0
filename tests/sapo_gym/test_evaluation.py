"""The evaluation harness and the baseline agents on the diagnostic env."""

from __future__ import annotations

import math

import pytest

from agents import ExpertAgent, RandomAgent
from agents.registry import load_agent
from sapo_gym.evaluation import evaluate, format_table, summarize
from sapo_gym.intervals import Z95, clustered_rate_interval
from sapo_gym.records import EpisodeRecord


def test_expert_wins_everything_random_does_not() -> None:
    expert = evaluate(ExpertAgent(), "sapo/Vault-v0", split="test", batch_size=5, progress=False)
    assert len(expert) == 16 and all(r.success for r in expert)
    assert all(r.steps == 2 and r.invalid_actions == 0 and r.episode_return == 10.0 for r in expert)
    rand = evaluate(
        RandomAgent(seed=1),
        "sapo/Vault-v0",
        split="test",
        seeds=[0, 1, 2, 3],
        progress=False,
        env_kwargs={"code_length": 3},
    )
    rate = summarize(rand)["all"]["success"]
    assert len(rand) == 64 and rate < 0.3  # chance: (1/4)**3 per episode with 'look' in the mix


def test_summary_and_table() -> None:
    recs = evaluate(ExpertAgent(), "sapo/Vault-v0", task_ids=["vault-train-000", "vault-train-001"], progress=False)
    summary = summarize(recs)
    assert summary["all"]["episodes"] == 2 and summary["all"]["success"] == 1.0
    # Wilson interval of 2/2 tasks at p = 1: 2 / (2 + z²) = 0.3424 (z = 1.95996); abs 5e-5 is half the literal's last digit
    assert summary["all"]["success_ci_low"] == pytest.approx(0.3424, abs=5e-5)
    table = format_table(summary, title="t")
    assert "code2" in table and "100.0%" in table
    assert recs[0].turns[0].action.startswith("press ") and recs[0].turns[0].valid


def test_evaluate_shows_its_progress_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    records = evaluate(ExpertAgent(), "sapo/Vault-v0", task_ids=["vault-train-000", "vault-train-001"], progress=True)
    last = capsys.readouterr().err.splitlines()[-1]  # captured: not a terminal, one line per report
    assert last.startswith(f"evaluate sapo/Vault-v0: 2/2 episodes, {sum(r.steps for r in records)} turns")


def test_the_interval_counts_tasks_when_an_evaluation_repeats_them() -> None:
    won = [EpisodeRecord("a", "t", seed, True, 1.0, 1, 0, 1.0, "") for seed in range(3)]
    row = summarize([*won, EpisodeRecord("b", "t", 0, False, 0.0, 1, 0, 0.0, "")])["all"]
    assert row["success"] == 0.75  # the episodes' rate
    # the interval, as the bundle's aggregates compute it: around the rate printed beside it, the task the unit
    lo, hi = clustered_rate_interval({"a": [1, 1, 1], "b": [0]})
    assert (row["success_ci_low"], row["success_ci_high"]) == (lo, hi)
    assert lo < row["success"] < hi
    # Wilson at 0.75 over Kish's (3 + 1)² / (3² + 1²) = 1.6 tasks: wider than over the 2 tasks there are
    n, z = 1.6, Z95
    centre, half = (
        (0.75 + z * z / (2 * n)) / (1 + z * z / n),
        z * math.sqrt(0.75 * 0.25 / n + z * z / (4 * n * n)) / (1 + z * z / n),
    )
    assert (lo, hi) == pytest.approx((centre - half, min(1.0, centre + half)), abs=1e-12)  # float64, a few operations
    two = clustered_rate_interval({"a": [1, 1], "b": [1, 0]})  # 0.75 over 2 equal-sized tasks
    assert hi - lo > two[1] - two[0]


def test_agent_specs() -> None:
    assert load_agent("expert").name == "expert"
    assert load_agent("agents.baselines:RandomAgent", seed=3).seed == 3
    with pytest.raises(ValueError, match="unknown agent spec"):
        load_agent("no-such-agent")
    with pytest.raises(ValueError, match="cannot load agent"):
        load_agent("no_such_module:Agent")


def test_given_envs_are_used_and_left_open() -> None:
    import gymnasium as gym

    envs = [gym.make("sapo/Vault-v0", split="test") for _ in range(3)]
    given = evaluate(RandomAgent(seed=1), "sapo/Vault-v0", seeds=(0,), envs=envs, progress=False)
    built = evaluate(RandomAgent(seed=1), "sapo/Vault-v0", split="test", seeds=(0,), batch_size=3, progress=False)
    assert [r.to_dict() for r in given] == [r.to_dict() for r in built]
    envs[0].reset(seed=0)  # still usable: the caller owns them
    for env in envs:
        env.close()


class PeekingAgent:
    """A ``module:Class`` agent that plays the oracle's action whenever the info reveals it."""

    name = "peek"

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def reset(self, num_envs: int) -> None:
        return None

    def act(self, observations, infos):  # type: ignore[no-untyped-def]
        out = []
        for info in infos:
            self.seen |= {"expert_action", "pddl_params"} & set(info)
            out.append(f"<think>peek</think><action>{info.get('expert_action') or 'look'}</action>")
        return out


def test_privileged_info_never_reaches_an_evaluated_agent() -> None:
    agent = load_agent(f"{__name__}:PeekingAgent")
    records = evaluate(agent, "sapo/Vault-v0", split="test", seeds=[0, 1], batch_size=4, progress=False)
    assert agent.seen == set()  # neither expert_action nor pddl_params was handed over
    assert len(records) == 32 and summarize(records)["all"]["success"] < 1.0
    assert not any(r.privileged for r in records)


def test_oracle_agents_get_explicit_access_and_are_labelled() -> None:
    from sapo_gym import PRIVILEGED_INFO_KEYS, public_info
    from sapo_gym.records import harness_record, is_privileged

    records = evaluate(ExpertAgent(), "sapo/Vault-v0", split="test", progress=False)
    assert is_privileged(ExpertAgent()) and all(r.privileged and r.success for r in records)
    assert not is_privileged(RandomAgent()) and not is_privileged(PeekingAgent())
    assert harness_record(True) == {
        "info_filter": "public",
        "withheld_keys": sorted(PRIVILEGED_INFO_KEYS),
        "privileged_agent": True,
    }
    info = {"task_id": "t", "expert_action": "press red", "pddl_params": {}, "won": False}
    assert public_info(info) == {"task_id": "t", "won": False} and "expert_action" in info


# ------------------------------------------------------------------ evaluation modes
@pytest.mark.parametrize("seed", [0, 1000, 1127, 7])
def test_verl_agent_draw_is_textworlds_game_order(seed: int) -> None:
    # the original's own code deals the games: TextworldBatchGymEnv.seed builds the iterator its reset() reads
    textworld_batch = pytest.importorskip("textworld.gym.envs.textworld_batch")
    from sapo_gym.records import shuffled_cycle_pick

    games = [f"json_2.1.1/valid_seen/game-{i:03d}" for i in range(140)]
    env = textworld_batch.TextworldBatchGymEnv(list(games), batch_size=1)
    env.seed(seed)
    dealt = [next(env._gamefiles_iterator) for _ in range(3 * len(games) + 5)]  # three passes and a bit: reshuffles
    assert [shuffled_cycle_pick(games, seed, k) for k in range(len(dealt))] == dealt
    env.close()


def test_verl_agent_mode_plays_one_drawn_game_per_worker() -> None:
    from sapo_gym.records import VERL_AGENT, evaluation_mode, shuffled_cycle_pick

    mode = evaluation_mode("verl-agent", workers=20)
    records = evaluate(
        ExpertAgent(), "sapo/Vault-v0", split="test", seeds=[0, 3], batch_size=8, progress=False, mode=mode
    )
    ids = [f"vault-test-{i:03d}" for i in range(16)]
    assert [r.task_id for r in records] == [shuffled_cycle_pick(ids, s + 1000 + i) for s in (0, 3) for i in range(20)]
    assert [r.seed for r in records] == [0] * 20 + [3] * 20
    assert len({r.task_id for r in records[:20]}) < 16  # drawn with repeats across workers, some games never
    assert VERL_AGENT.workers == 128 and VERL_AGENT.seed_offset == 1000 and VERL_AGENT.round == 0
    later = evaluation_mode("verl-agent", workers=20, round=1).task_ids(ids, 0)
    assert later == [shuffled_cycle_pick(ids, 1000 + i, 1) for i in range(20)] and later != mode.task_ids(ids, 0)


def test_every_task_mode_is_the_default_and_modes_are_validated() -> None:
    from sapo_gym.records import EVERY_TASK, evaluation_mode

    ids = ["b", "a", "c"]
    assert EVERY_TASK.task_ids(ids, 5) == ids and evaluation_mode("every-task") is EVERY_TASK
    assert EVERY_TASK.record() == {"name": "every-task"}
    assert evaluation_mode("verl-agent").record() == {
        "name": "verl-agent",
        "workers": 128,
        "seed_offset": 1000,
        "round": 0,
    }
    with pytest.raises(ValueError, match="valid choices: \\['every-task', 'verl-agent'\\]"):
        evaluation_mode("sampled")
    with pytest.raises(ValueError, match="verl-agent mode only"):
        evaluation_mode("every-task", workers=4)
    with pytest.raises(ValueError, match="workers >= 1"):
        evaluation_mode("verl-agent", workers=0)


@pytest.mark.parametrize("env_id", ["sapo/Vault-v0", "sapo/ALFWorld-Mini-v0", "sapo/WebShop-v0"])
def test_baselines_answer_in_the_envs_protocol(env_id):
    import gymnasium as gym

    probe = gym.make(env_id)
    ids = list(probe.unwrapped.task_ids)[:3]
    probe.close()
    # under tool-call-v1 the env publishes info["tools"] and the baselines write a take_action call
    for protocol in ("verl-agent-v1", "tool-call-v1"):
        kwargs = {"env_kwargs": {"protocol": protocol}, "task_ids": ids, "progress": False}
        expert = evaluate(ExpertAgent(seed=0), env_id, **kwargs)
        assert [r.success for r in expert] == [True] * 3 and sum(r.invalid_actions for r in expert) == 0, protocol
        assert sum(r.invalid_actions for r in evaluate(RandomAgent(seed=0), env_id, **kwargs)) == 0, protocol
