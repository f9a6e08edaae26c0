"""One live run as the database holds it (see :mod:`leaderboard.server.live`): its plan, its episodes, the rules.

:class:`RunView` is read inside the transaction that locked the run's ``live_plans`` row, so what it
says holds until that transaction ends, whichever server process reads it. It decides what a deal or
a step may do (:meth:`RunView.check_deal`, :meth:`RunView.which`) and what the run looks like to its
client (:meth:`RunView.public`); :func:`episode_records` rebuilds the run's ``EpisodeRecord``\\ s from
its rows when the last episode ends; :func:`prune_closed` deletes the rows of runs closed long ago.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from leaderboard.boards import Board
from leaderboard.server.db import LiveEpisode, LivePlan, LiveRun, LiveTurn

__all__ = ["LiveError", "RunView", "answered", "episode_records", "outputs_of", "prune_closed"]


class LiveError(Exception):
    """A refused live request; ``status`` is the HTTP status."""

    def __init__(self, message: str, status: int = 409, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        """Seconds to wait before asking again (a 429's ``Retry-After``), when known."""


@dataclass
class RunView:
    """A run's rows, read under its lock: ``run`` (``live_runs``), ``plan`` (``live_plans``) and ``active``, the
    episodes in progress by index (``live_episodes`` rows not ended)."""

    run: LiveRun
    plan: LivePlan
    board: Board
    active: dict[int, LiveEpisode]

    @classmethod
    def load(cls, s: Session, run: LiveRun, plan: LivePlan, board: Board) -> RunView:
        rows = s.scalars(select(LiveEpisode).where(LiveEpisode.run_id == run.id, LiveEpisode.ended.is_(False)))
        return cls(run, plan, board, {row.episode: row for row in rows})

    @property
    def schedule(self) -> list[tuple[str, int]]:
        return [(str(t), int(s)) for t, s in json.loads(self.plan.schedule_json)]

    @property
    def seeds(self) -> list[int]:
        return [int(s) for s in json.loads(self.plan.seeds_json)]

    def public(self) -> dict[str, Any]:
        return {
            "run_id": self.run.id,
            "env_id": self.board.env_id,
            "split": self.board.split,
            "spec_hash": self.board.spec_hash,
            "seeds": len(self.seeds),
            "episodes": self.run.episodes_total,
            "played": self.plan.played,
            "parallel": self.plan.parallel,
            "in_progress": bool(self.active),
            "in_progress_episodes": sorted(self.active),
            "done": self.run.episodes_done,
            "output_bytes": self.plan.output_bytes,
        }

    def redealt(self, request_id: str | None) -> dict[str, Any] | None:
        """The answer of the reset ``request_id`` dealt an episode still in progress with, if it did."""
        if request_id is None:
            return None
        row = next((ep for ep in self.active.values() if ep.request_id == request_id), None)
        return None if row is None else json.loads(row.dealt_json)

    def check_deal(self, task_id: str | None, seed: int | None) -> tuple[str, int]:
        """The next (task, seed) to deal; refuses a reset past ``parallel`` episodes in progress, past the schedule,
        or naming another pair."""
        parallel, played, schedule = self.plan.parallel, self.plan.played, self.schedule
        if len(self.active) >= parallel:
            if parallel == 1:
                raise LiveError(
                    f"episode {next(iter(self.active))} is in progress: play it to its end "
                    "(an episode cannot be restarted)"
                )
            raise LiveError(
                f"episodes {sorted(self.active)} are in progress, this run's limit of {parallel} at once: "
                "play one to its end (an episode cannot be restarted)"
            )
        if played >= len(schedule):
            raise LiveError("every episode of this run has been played")
        if task_id is not None or seed is not None:
            if (task_id, seed) in schedule[:played]:
                raise LiveError(f"(task {task_id}, seed {seed}) was already played in this run: each is played once")
            if (task_id, seed) != schedule[played]:
                raise LiveError("the server deals the (task, seed) order: ask for the next episode without naming one")
        return schedule[played]

    def which(self, episode: int | None) -> int:
        """The episode a step is for: ``episode``, or without it the only one in progress (the last dealt if none is)."""
        if episode is not None:
            return episode
        if len(self.active) > 1:
            raise LiveError(
                f"episodes {sorted(self.active)} are in progress: say which one this step plays "
                '("episode": its index, from the reset\'s answer)'
            )
        return next(iter(self.active)) if self.active else self.plan.played - 1


def answered(s: Session, run_id: int, episode: int, turn: int | None) -> LiveTurn | None:
    """The recorded turn a retried step asks for: (``episode``, ``turn``) when it is that episode's last played turn."""
    if turn is None or turn < 0:
        return None
    row = s.get(LiveEpisode, (run_id, episode))
    if row is None or turn != row.steps - 1:
        return None
    return s.get(LiveTurn, (run_id, episode, turn))


def outputs_of(s: Session, run_id: int, episode: int) -> list[str]:
    """The agent's raw outputs of an episode's acknowledged turns, in order (what a replay of it plays)."""
    rows = s.scalars(
        select(LiveTurn.step_json).where(LiveTurn.run_id == run_id, LiveTurn.episode == episode).order_by(LiveTurn.turn)
    )
    return [json.loads(step)["output"] for step in rows]


def episode_records(s: Session, run_id: int) -> list[Any]:
    """The run's ``EpisodeRecord``\\ s, in dealing order, rebuilt from its rows."""
    from sapo_gym.records import EpisodeRecord

    turns: dict[int, list[dict[str, Any]]] = {}
    for row in s.scalars(select(LiveTurn).where(LiveTurn.run_id == run_id).order_by(LiveTurn.episode, LiveTurn.turn)):
        turns.setdefault(row.episode, []).append(json.loads(row.step_json))
    episodes = s.scalars(select(LiveEpisode).where(LiveEpisode.run_id == run_id).order_by(LiveEpisode.episode))
    return [
        EpisodeRecord.from_dict({**json.loads(ep.record_json), "turns": turns.get(ep.episode, [])}) for ep in episodes
    ]


def prune_closed(s: Session, cutoff: dt.datetime) -> int:
    """Delete the episodes and turns of the runs closed (finished, expired, rejected) at or before ``cutoff``; how many
    turns. Their rows and plans stay."""
    closed = select(LiveRun.id).where(
        LiveRun.status != "open", LiveRun.ended_at.is_not(None), LiveRun.ended_at <= cutoff
    )
    turns = s.execute(delete(LiveTurn).where(LiveTurn.run_id.in_(closed))).rowcount
    s.execute(delete(LiveEpisode).where(LiveEpisode.run_id.in_(closed)))
    return int(turns or 0)
