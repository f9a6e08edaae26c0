"""One open live run's state (see :mod:`leaderboard.server.live`): its schedule, its envs and the episodes in progress.

A run plays up to ``parallel`` episodes at once (chosen at start, 1 by default): each in-progress
:class:`Episode` holds an env of the run's own (built when first needed, reused by the next episode
dealt, all closed when the run ends), its record and the answer to its last step (a retried step gets
that answer again, the env is not stepped twice). The run's memory: ``parallel`` envs, the records
(outputs bounded by ``LiveLimits.max_output_bytes``) and the last answers of its latest
``2 * parallel`` ended episodes.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from leaderboard.boards import Board

__all__ = ["Episode", "LiveError", "Run", "jsonable"]


class LiveError(Exception):
    """A refused live request; ``status`` is the HTTP status."""

    def __init__(self, message: str, status: int = 409, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        """Seconds to wait before asking again (a 429's ``Retry-After``), when known."""


def jsonable(value: Any) -> Any:
    """``info`` values as JSON (numpy arrays and scalars to lists and numbers; anything else unknown to text)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


Answer = tuple[int, dict[str, Any]]
"""(turn, response) of an episode's last step."""


@dataclass
class Episode:
    """An episode in progress: the ``index``-th dealt of its run, on ``env``."""

    index: int
    env: Any
    record: Any
    """Its EpisodeRecord."""
    last: Answer | None = None
    request_id: str | None = None
    """The reset request that dealt it (the client's idempotency key), and :attr:`dealt` its answer: a retried
    reset whose answer was lost gets the same episode back instead of a second deal."""
    dealt: dict[str, Any] | None = None


@dataclass
class Run:
    id: int
    token_id: int
    submitter: str
    board: Board
    agent: dict[str, Any]
    seeds: list[int]
    schedule: list[tuple[str, int]]
    make_env: Callable[[], Any]
    """Builds one more env of the board (the private split's kwargs included)."""
    envs: list[Any]
    """Every env built for this run (at most ``parallel``); closed when the run ends."""
    parallel: int = 1
    started: float = field(default_factory=time.monotonic)
    touched: float = field(default_factory=time.monotonic)
    played: int = 0
    """Episodes dealt so far (those in progress included)."""
    active: dict[int, Episode] = field(default_factory=dict)
    """The episodes in progress, by index."""
    records: list[Any] = field(default_factory=list)
    ended: OrderedDict[int, Answer] = field(default_factory=OrderedDict)
    """The last answers of the latest ended episodes (``2 * parallel`` of them), by episode: a retried step still gets it."""
    output_bytes: int = 0
    """UTF-8 bytes of the outputs recorded so far (bounded by ``LiveLimits.max_output_bytes``)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def public(self) -> dict[str, Any]:
        return {"run_id": self.id, "env_id": self.board.env_id, "split": self.board.split, "spec_hash": self.board.spec_hash,
                "seeds": len(self.seeds), "episodes": len(self.schedule), "played": self.played, "parallel": self.parallel,
                "in_progress": bool(self.active), "in_progress_episodes": sorted(self.active), "done": len(self.records),
                "output_bytes": self.output_bytes}

    def free_env(self) -> Any:
        """An env no episode in progress holds (a new one while fewer than ``parallel`` were built)."""
        busy = {id(e.env) for e in self.active.values()}
        for env in self.envs:
            if id(env) not in busy:
                return env
        env = self.make_env()
        self.envs.append(env)
        return env

    def redealt(self, request_id: str | None) -> dict[str, Any] | None:
        """The answer of the reset ``request_id`` dealt an episode still in progress with, if it did."""
        if request_id is None:
            return None
        return next((ep.dealt for ep in self.active.values() if ep.request_id == request_id), None)

    def check_deal(self, task_id: str | None, seed: int | None) -> None:
        """Refuse a reset past ``parallel`` episodes in progress, past the schedule, or naming another pair."""
        if len(self.active) >= self.parallel:
            if self.parallel == 1:
                raise LiveError(f"episode {next(iter(self.active))} is in progress: play it to its end "
                                "(an episode cannot be restarted)")
            raise LiveError(f"episodes {sorted(self.active)} are in progress, this run's limit of {self.parallel} at once: "
                            "play one to its end (an episode cannot be restarted)")
        if self.played >= len(self.schedule):
            raise LiveError("every episode of this run has been played")
        wanted = (task_id, seed)
        if task_id is not None or seed is not None:
            if wanted in self.schedule[: self.played]:
                raise LiveError(f"(task {task_id}, seed {seed}) was already played in this run: each is played once")
            if wanted != self.schedule[self.played]:
                raise LiveError("the server deals the (task, seed) order: ask for the next episode without naming one")

    def which(self, episode: int | None) -> int:
        """The episode a step is for: ``episode``, or without it the only one in progress (the last dealt if none is)."""
        if episode is not None:
            return episode
        if len(self.active) > 1:
            raise LiveError(f"episodes {sorted(self.active)} are in progress: say which one this step plays "
                            "(\"episode\": its index, from the reset's answer)")
        return next(iter(self.active)) if self.active else self.played - 1

    def retried(self, episode: int, turn: int | None) -> dict[str, Any] | None:
        """The answer already given to (episode, turn), if that step was played."""
        if turn is None:
            return None
        ep = self.active.get(episode)
        last = ep.last if ep is not None else self.ended.get(episode)
        return last[1] if last is not None and last[0] == turn else None

    def end_episode(self, ep: Episode) -> None:
        del self.active[ep.index]
        self.records.append(ep.record)
        assert ep.last is not None
        self.ended[ep.index] = ep.last
        while len(self.ended) > 2 * self.parallel:
            self.ended.popitem(last=False)

    def close_envs(self) -> None:
        errors = []
        for env in self.envs:
            try:
                env.close()
            except Exception as exc:  # every env is closed; the first failure is raised after
                errors.append(exc)
        if errors:
            raise errors[0]
