"""The continuous evaluation pool: results in plan order whatever the completion order, up to N requests in
flight, a turn sent as soon as its env stepped, failures named; progress and ETA from the turn rate."""

from __future__ import annotations

import io
import threading
import time
import zlib

import gymnasium as gym
import pytest

import sapo_gym  # noqa: F401
from sapo_gym.accounting import Progress, eta_seconds, usage_totals
from sapo_gym.pool import EvaluationAborted, Job, plan, run_episodes, run_pool, turn_seed
from sapo_gym.records import EVERY_TASK, evaluation_mode
from tests.support.scripted_agent import ScriptedAgent, ScriptedBatchAgent

TASKS = [f"vault-test-{i:03d}" for i in range(8)]


def _envs(n: int) -> list:
    return [gym.make("sapo/Vault-v0", split="test") for _ in range(n)]


class JitteryAgent(ScriptedAgent):
    """The scripted replies, each after a delay that scrambles the completion order; counts requests in flight."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = self.most = 0
        self.seeds: list[int | None] = []

    def respond(self, observation, info, turn_seed=None):  # type: ignore[no-untyped-def]
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.seeds.append(turn_seed)
        time.sleep((zlib.crc32(observation.encode()) % 7) / 1000)
        try:
            return super().respond(observation, info, turn_seed)
        finally:
            with self.lock:
                self.in_flight -= 1


def _strip(records) -> list[dict]:  # type: ignore[no-untyped-def]
    out = []
    for rec in records:
        data = rec.to_dict()
        for turn in data["turns"]:
            turn.pop("latency_s")
        out.append(data)
    return out


def test_the_pool_and_lockstep_report_every_turn_and_episode_to_one_progress() -> None:
    jobs = plan(TASKS[:4], [0])
    for agent in (ScriptedAgent(), ScriptedBatchAgent()):
        progress = Progress(len(jobs), stream=io.StringIO())
        records = run_episodes(agent, _envs(2), jobs, progress=progress)
        turns = sum(r.steps for r in records)
        assert (progress.done, progress.turns, progress.finished_turns) == (len(jobs), turns, turns), agent


def test_pool_records_match_lockstep_in_plan_order_whatever_the_completion_order() -> None:
    jobs = plan(TASKS, [0, 1])
    envs = _envs(4)
    agent = JitteryAgent()
    pooled = run_episodes(agent, envs, jobs)
    batched = run_episodes(ScriptedBatchAgent(), envs, jobs)
    assert [(r.seed, r.task_id) for r in pooled] == [(j.seed, j.task_id) for j in jobs]
    pooled_dicts = _strip(pooled)
    for r in pooled_dicts:  # the pool's agent reported its usage; the batch agent's path has none
        for t in r["turns"]:
            assert t["prompt_tokens"] is not None and t["finish_reason"] == "stop"
            t.update(prompt_tokens=None, completion_tokens=None, finish_reason=None)
    assert pooled_dicts == _strip(batched)
    assert (
        1 < agent.most <= 4
    )  # requests overlapped, never more than the pool's width (how many at once: the scheduler's)
    expected = sorted(turn_seed(j, k) for j, r in zip(jobs, pooled) for k in range(r.steps))
    assert sorted(agent.seeds) == expected  # a seed per (episode, turn): independent of the order


def test_a_slow_request_does_not_hold_the_other_envs_back() -> None:
    """Task 0's first request waits until 6 other turns were answered: in lockstep that never happens."""
    others = threading.Semaphore(0)

    class Straggler(ScriptedAgent):
        def respond(self, observation, info, turn_seed=None):  # type: ignore[no-untyped-def]
            if turn_seed == turn_seed_of_first:
                for _ in range(6):
                    assert others.acquire(timeout=20), "the other envs did not move on"
            else:
                others.release()
            return super().respond(observation, info, turn_seed)

    jobs = plan(TASKS[:4], [0])
    turn_seed_of_first = turn_seed(jobs[0], 0)
    records = run_pool(Straggler(), _envs(4), jobs)
    assert len(records) == 4


def test_a_failed_request_names_its_episode_and_keeps_the_ended_ones() -> None:
    class Failing(ScriptedAgent):
        def respond(self, observation, info, turn_seed=None):  # type: ignore[no-untyped-def]
            if info.get("task_id") == "vault-test-005":
                raise RuntimeError("server gone")
            return super().respond(observation, info, turn_seed)

    ended: list[Job] = []
    with pytest.raises(EvaluationAborted, match="task 'vault-test-005', seed 0.*server gone") as failure:
        run_episodes(Failing(), _envs(1), plan(TASKS, [0]), on_end=lambda job, rec: ended.append(job))
    assert failure.value.job.task_id == "vault-test-005"
    assert [j.task_id for j in ended] == TASKS[:5]


def test_done_episodes_are_not_played_again() -> None:
    jobs = plan(TASKS[:4], [0])
    first = run_episodes(ScriptedAgent(), _envs(2), jobs)
    agent = JitteryAgent()
    again = run_episodes(agent, _envs(2), jobs, done={jobs[0].key: first[0], jobs[2].key: first[2]})
    assert again[0] is first[0] and again[2] is first[2]
    assert len(agent.seeds) == first[1].steps + first[3].steps


def test_plan_slots_follow_the_mode() -> None:
    assert [(j.seed, j.slot, j.task_id) for j in plan(TASKS[:2], [3], EVERY_TASK)] == [
        (3, 0, TASKS[0]),
        (3, 1, TASKS[1]),
    ]
    drawn = plan(TASKS, [0], evaluation_mode("verl-agent", workers=5))
    assert [j.slot for j in drawn] == list(range(5))


def test_eta_comes_from_the_turn_rate_and_the_episode_length() -> None:
    assert eta_seconds(0, 0, 0, 0, 10, 5.0) is None and eta_seconds(10, 0, 0, 10, 10, 5.0) is None
    # 20 turns in 10 s (2/s); 4 finished episodes of 4 turns; 6 left, in flight ones already took 4 turns: (24-4)/2
    assert eta_seconds(20, 4, 16, 4, 6, 10.0) == 10.0
    now = [0.0]
    out = io.StringIO()
    progress = Progress(10, clock=lambda: now[0], stream=out, interval=1.0)
    for step in range(8):
        now[0] += 0.5
        progress.turn()
        if step % 2 == 1:
            progress.episode(2)
    progress.in_flight = 3
    assert progress.line() == "evaluate: 4/10 episodes, 8 turns (120/min), 3 in flight, ETA 0:00:06"
    assert out.getvalue().count("\n") == 4  # at most one line a second of the injected clock


def test_usage_totals_and_cost() -> None:
    records = run_episodes(ScriptedAgent(), _envs(2), plan(TASKS[:2], [0]))
    totals = usage_totals(records, price_prompt=2.0, price_completion=10.0)
    turns = [t for r in records for t in r.turns]
    assert totals["turns"] == totals["turns_with_usage"] == len(turns) and totals["finish_reasons"] == {
        "stop": len(turns)
    }
    assert totals["cost_usd"] == pytest.approx((totals["prompt_tokens"] * 2 + totals["completion_tokens"] * 10) / 1e6)
    assert usage_totals(records)["cost_usd"] is None
