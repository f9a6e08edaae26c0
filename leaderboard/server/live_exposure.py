"""Every dealing of a board's tasks, under every token: what a *live · private* mark may claim.

A private split is unseen only until a run deals its tasks: any token's run shows the agent every task it deals
(a run deals the whole split), whether it finishes, is abandoned (expires) or is refused at admission. So the
server counts dealings per board across **all** tokens, from ``live_runs`` and ``live_plans`` (both kept when a
closed run's turns are pruned):

* :func:`board_runs`: the board's live runs of every token by status, the tokens behind them and the episodes dealt
  (the board page, ``GET /api/v1/boards`` and ``GET /api/v1/live/runs?spec_hash=`` show them);
* :func:`exposure`: for one live submission, the other runs (any token, its own included) that had been opened
  before its run ended and dealt at least one episode, and how many of its tasks they had dealt. Its
  ``unseen`` is what the full *live · private* mark claims: no task of the run had been dealt by another run. A
  run whose plan is missing (a database from before plans) counts as having dealt every task.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from leaderboard.server.db import LivePlan, LiveRun, Provenance, Token, utcnow

__all__ = ["board_runs", "exposure", "exposures", "run_list"]

RUN_LIST = 200
"""Runs listed (the newest) on a board page and per API answer; the counts always cover all of them."""


def _dealt(plan: LivePlan | None) -> set[str] | None:
    """Task ids a run dealt (None: unknown, a run without a plan)."""
    if plan is None:
        return None
    return {task for task, _seed in json.loads(plan.schedule_json)[: plan.played]}


def board_runs(s: Session, spec_hash: str) -> dict[str, Any]:
    """The board's live runs of every token: ``{"runs": {status: n}, "tokens": n, "episodes_dealt": n}``."""
    by_status = dict(
        s.execute(
            select(LiveRun.status, func.count(LiveRun.id))
            .where(LiveRun.spec_hash == spec_hash)
            .group_by(LiveRun.status)
        ).all()
    )
    tokens = s.scalar(select(func.count(func.distinct(LiveRun.token_id))).where(LiveRun.spec_hash == spec_hash)) or 0
    dealt = (
        s.scalar(
            select(func.coalesce(func.sum(LivePlan.played), 0))
            .join(LiveRun, LiveRun.id == LivePlan.run_id)
            .where(LiveRun.spec_hash == spec_hash)
        )
        or 0
    )
    return {"runs": {k: int(v) for k, v in by_status.items()}, "tokens": int(tokens), "episodes_dealt": int(dealt)}


def run_list(s: Session, spec_hash: str, limit: int = RUN_LIST) -> list[dict[str, Any]]:
    """The board's newest live runs of every token (expired and refused ones included)."""
    rows = s.execute(
        select(LiveRun, LivePlan.played, Token.name)
        .outerjoin(LivePlan, LivePlan.run_id == LiveRun.id)
        .outerjoin(Token, Token.id == LiveRun.token_id)
        .where(LiveRun.spec_hash == spec_hash)
        .order_by(LiveRun.id.desc())
        .limit(limit)
    ).all()
    return [
        {
            "run_id": run.id,
            "submitter": name,
            "status": run.status,
            "dealt": played if played is not None else None,
            "episodes": run.episodes_total,
            "created_at": run.created_at.isoformat() + "Z",
            "ended_at": run.ended_at.isoformat() + "Z" if run.ended_at else None,
            "submission_id": run.submission_id,
        }
        for run, played, name in rows
    ]


def exposure(s: Session, run_id: int) -> dict[str, Any]:
    """What other runs had dealt of live run ``run_id``'s tasks before it ended (see the module's docstring)."""
    run, plan = s.get(LiveRun, run_id), s.get(LivePlan, run_id)
    own = {task for task, _seed in json.loads(plan.schedule_json)} if plan is not None else set()
    cutoff = run.ended_at or utcnow()
    others = s.execute(
        select(LiveRun.id, LiveRun.token_id, LivePlan)
        .outerjoin(LivePlan, LivePlan.run_id == LiveRun.id)
        .where(LiveRun.spec_hash == run.spec_hash, LiveRun.id != run_id, LiveRun.created_at <= cutoff)
    ).all()
    seen: set[str] = set()
    runs, tokens = 0, set()
    for _other, token_id, other_plan in others:
        dealt = _dealt(other_plan)
        if dealt is None:
            dealt = set(own)
        if not dealt:
            continue
        runs += 1
        tokens.add(token_id)
        seen |= dealt & own if own else dealt
    return {
        "unseen": not seen and plan is not None,
        "tasks": len(own),
        "tasks_seen_before": len(seen),
        "runs_before": runs,
        "tokens_before": len(tokens),
    }


def exposures(s: Session, submission_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """:func:`exposure` of each of these submissions that a live run stored."""
    ids = list(submission_ids)
    if not ids:
        return {}
    runs = s.execute(
        select(Provenance.submission_id, Provenance.live_run_id).where(
            Provenance.submission_id.in_(ids), Provenance.live_run_id.is_not(None)
        )
    ).all()
    return {sid: exposure(s, run_id) for sid, run_id in runs}
