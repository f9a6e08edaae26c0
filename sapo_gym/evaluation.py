"""Evaluation harness: run an agent on the tasks of a split, record each episode, summarize the records.

Which episodes run is the :class:`~sapo_gym.records.EvaluationMode` (``every-task`` by default); each is
recorded as a :class:`~sapo_gym.records.EpisodeRecord` (:mod:`sapo_gym.records`). :func:`evaluate` plays them
with the lockstep runner of :mod:`sapo_gym.pool` (the one ``sapo-gym evaluate`` uses for batch agents): envs in
this process, ``batch_size`` at a time, the agent asked only for the active ones. No torch here: the agent is
any object with the :class:`agents.base.Agent` interface.

The agent sees :func:`sapo_gym.core.public_info` only (no ``expert_action``, no ``pddl_params``),
unless it declares ``privileged = True`` (the oracle baselines); each record says which it was
(:func:`~sapo_gym.records.harness_record` is what a result bundle stores). The filter guards what ``act`` is
passed, not what an agent running in this process can reach (frames, ``gc``): ``sapo-gym evaluate`` runs
submitted agents in a process of their own (:mod:`agents.isolated`) and the bundle records which way it ran.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium as gym

from sapo_gym.accounting import Progress
from sapo_gym.intervals import clustered_rate_interval
from sapo_gym.pool import plan, run_lockstep
from sapo_gym.records import EVERY_TASK, EpisodeRecord, EvaluationMode

__all__ = ["evaluate", "summarize", "format_table"]


def evaluate(
    agent: Any,
    env_id: str,
    *,
    split: str | None = None,
    task_ids: Sequence[str] | None = None,
    seeds: Iterable[int] = (0,),
    batch_size: int = 8,
    env_kwargs: dict[str, Any] | None = None,
    progress: bool = True,
    envs: Sequence[gym.Env] | None = None,
    mode: EvaluationMode = EVERY_TASK,
) -> list[EpisodeRecord]:
    """Run ``agent`` on the tasks of ``split`` (or the given ``task_ids``) that ``mode`` picks for each seed, in
    (seed, task) order; ``progress``: a status line on stderr (:class:`~sapo_gym.accounting.Progress`).

    ``every-task`` (default): once per (seed, task). ``envs``: already built envs of ``env_id`` to step
    together (the caller keeps and closes them; ``split``, ``batch_size`` and ``env_kwargs`` are then
    unused); by default ``batch_size`` envs are built here and closed at the end. No request is timed
    (each turn's ``latency_s`` is None), so the records are reproducible; an agent that fails ends the run
    with :class:`~sapo_gym.pool.EvaluationAborted`.
    """
    owned = envs is None
    if envs is None:
        kwargs = dict(env_kwargs or {})
        if split is not None:
            kwargs["split"] = split
        envs = [gym.make(env_id, **kwargs) for _ in range(max(1, batch_size))]
    envs = list(envs)
    ids = list(task_ids) if task_ids is not None else list(envs[0].unwrapped.task_ids)
    jobs = plan(ids, seeds, mode)
    reporter = Progress(len(jobs), label=f"evaluate {env_id}") if progress else None
    try:
        done = run_lockstep(agent, envs, jobs, progress=reporter, clock=None)
    finally:
        for env in envs if owned else ():
            env.close()
        if reporter is not None:
            reporter.close()
    return [done[job.key] for job in jobs]


def summarize(records: Sequence[EpisodeRecord]) -> dict[str, dict[str, float]]:
    """Per task type and ``all``: episodes, success rate (+ Wilson 95 % CI), mean score, steps, invalid rate.

    The interval counts tasks, not episodes (:func:`sapo_gym.intervals.clustered_rate_interval`, as a result
    bundle's aggregates do), so more seeds of a deterministic agent (the same episodes again) do not narrow it.
    """
    groups: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for rec in records:
        groups[rec.task_type].append(rec)
        groups["all"].append(rec)
    out: dict[str, dict[str, float]] = {}
    for name in sorted(groups, key=lambda k: (k == "all", k)):
        recs = groups[name]
        n = len(recs)
        by_task: dict[str, list[float]] = defaultdict(list)
        for r in recs:
            by_task[r.task_id].append(float(bool(r.success)))
        lo, hi = clustered_rate_interval(by_task)
        steps = sum(r.steps for r in recs)
        out[name] = {
            "episodes": n,
            "success": sum(r.success for r in recs) / n,
            "success_ci_low": lo,
            "success_ci_high": hi,
            "score": sum(r.score for r in recs) / n,
            "steps": steps / n,
            "invalid_rate": sum(r.invalid_actions for r in recs) / max(steps, 1),
        }
    return out


def format_table(summary: dict[str, dict[str, float]], title: str = "") -> str:
    """A plain-text table of :func:`summarize`'s output."""
    head = f"{'category':<12} {'episodes':>8} {'success':>8} {'95% CI':>15} {'score':>7} {'steps':>6} {'invalid':>8}"
    lines = [title, head, "-" * len(head)] if title else [head, "-" * len(head)]
    for name, row in summary.items():
        ci = f"[{row['success_ci_low']:.2f}, {row['success_ci_high']:.2f}]"
        lines.append(
            f"{name:<12} {int(row['episodes']):>8} {row['success']:>8.1%} {ci:>15} {row['score']:>7.3f} "
            f"{row['steps']:>6.1f} {row['invalid_rate']:>8.1%}"
        )
    return "\n".join(lines)
