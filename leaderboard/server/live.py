"""Live evaluation: the submitter's agent plays through the server, which holds the env.

The server draws the seeds and the order of the (task, seed) pairs, deals each pair once per run
(an episode in progress cannot be abandoned or restarted), passes the agent only
:func:`sapo_gym.core.public_info`, steps the env itself and records every turn. When the last
episode ends, the run's bundle is built from the server's own records, admitted like any bundle and
stored as a submission marked *live* (the verifier still replays it).

Bounded: at most ``max_open`` open runs on the server and ``max_open_per_token`` per token, a run
expires after ``idle_seconds`` without progress (a reset that deals an episode or a step that plays a
turn; reading the run's status, a refused or a retried request is no progress) or ``max_seconds`` in
all (its env is closed; the run stays in ``live_runs`` as *expired*: abandoned runs are counted on
the submission page). A start refused because the server is full is a 429 with ``Retry-After`` and
puts the token in line for the next freed slot (:mod:`leaderboard.server.live_waitlist`). Open
runs live in this process's memory: a restart expires them (``serve`` runs one process).
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import func, select, update

from leaderboard import private
from leaderboard.boards import Board
from leaderboard.server.db import LiveRun, utcnow
from leaderboard.server.live_waitlist import Waitlist

__all__ = ["LiveError", "LiveLimits", "LiveManager"]

log = logging.getLogger(__name__)
_rng = secrets.SystemRandom()


class LiveError(Exception):
    """A refused live request; ``status`` is the HTTP status."""

    def __init__(self, message: str, status: int = 409, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        """Seconds to wait before asking again (a 429's ``Retry-After``), when known."""


@dataclass(frozen=True)
class LiveLimits:
    max_open: int = 4
    """Open runs on the server at once (each holds an env in memory)."""
    max_open_per_token: int = 1
    """Open runs per token."""
    max_seeds: int = 4
    """Seeds (passes over the split) a run may ask for."""
    idle_seconds: float = 300.0
    """A run without progress (a reset or a step that plays a turn) for this long expires."""
    max_seconds: float = 4 * 3600.0
    """A run expires this long after it started, finished or not."""
    retry_seconds: float = 5.0
    """``Retry-After`` of a start refused because the server is full."""
    hold_seconds: float = 30.0
    """A token refused while the server was full keeps its place in line while it asks again this often."""
    max_output_bytes: int = 64 << 20
    """Outputs (UTF-8 bytes) a run may record in all: the run's memory bound (the server's is ``max_open`` times it,
    beside the envs). ``serve`` sets it to ``--max-upload-mb``: the largest bundle a submitter could upload instead.
    A step past it is a 413 that costs no turn."""


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


@dataclass
class _Run:
    id: int
    token_id: int
    submitter: str
    board: Board
    agent: dict[str, Any]
    seeds: list[int]
    schedule: list[tuple[str, int]]
    env: Any
    started: float = field(default_factory=time.monotonic)
    touched: float = field(default_factory=time.monotonic)
    played: int = 0
    """Episodes dealt so far (the one in progress included)."""
    record: Any = None
    """The episode in progress (an EpisodeRecord), or None between episodes."""
    records: list[Any] = field(default_factory=list)
    last: tuple[int, int, dict[str, Any]] | None = None
    """(episode, turn, response) of the last step: a retried step gets the same answer."""
    output_bytes: int = 0
    """UTF-8 bytes of the outputs recorded so far (bounded by ``LiveLimits.max_output_bytes``)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def public(self) -> dict[str, Any]:
        return {"run_id": self.id, "env_id": self.board.env_id, "split": self.board.split, "spec_hash": self.board.spec_hash,
                "seeds": len(self.seeds), "episodes": len(self.schedule), "played": self.played,
                "in_progress": self.record is not None, "done": len(self.records), "output_bytes": self.output_bytes}


class LiveManager:
    """Open live runs of one server process, and their rows in ``live_runs``."""

    def __init__(self, store: Any, boards: Any, verifier: Any = None, limits: LiveLimits | None = None):
        self.store, self.boards, self.verifier = store, boards, verifier
        self.limits = limits or LiveLimits()
        self._runs: dict[int, _Run] = {}
        self._answered: dict[int, tuple[int, tuple[int, int, dict[str, Any]]]] = {}
        """Finished runs' last step answers (run id -> token id, (episode, turn, answer)), the latest 64:
        a retried last step still gets its answer (with the submission) after the run is closed."""
        self._lock = threading.Lock()
        self._waitlist = Waitlist(self.limits.hold_seconds)
        self._expire_rows(select(LiveRun.id).where(LiveRun.status == "open"), "the server restarted")

    # ------------------------------------------------------------------ bookkeeping
    def _expire_rows(self, ids_query: Any, message: str) -> None:
        with self.store.session.begin() as s:
            ids = list(s.scalars(ids_query))
            if ids:
                s.execute(update(LiveRun).where(LiveRun.id.in_(ids), LiveRun.status == "open")
                          .values(status="expired", status_message=message, ended_at=utcnow()))

    def _end(self, run: _Run, status: str, message: str, submission_id: int | None = None) -> None:
        log.info("live run %s: %s (%s)", run.id, status, message)
        with self._lock:
            self._runs.pop(run.id, None)
        try:
            run.env.close()
        finally:
            with self.store.session.begin() as s:
                s.execute(update(LiveRun).where(LiveRun.id == run.id).values(
                    status=status, status_message=message[:2000], ended_at=utcnow(), episodes_done=len(run.records),
                    submission_id=submission_id))

    def sweep(self) -> int:
        """Expire idle and overlong runs; how many."""
        now = time.monotonic()
        with self._lock:
            stale = [r for r in self._runs.values()
                     if now - r.touched > self.limits.idle_seconds or now - r.started > self.limits.max_seconds]
        for run in stale:
            idle = now - run.touched > self.limits.idle_seconds
            self._end(run, "expired", f"abandoned after {len(run.records)} of {len(run.schedule)} episodes "
                                      f"({'idle' if idle else 'over time'})")
        return len(stale)

    def counts(self, token_id: int, spec_hash: str) -> dict[str, int]:
        """This token's live runs on a board, by status (best-of-N over runs shows as abandoned ones)."""
        with self.store.session() as s:
            rows = s.execute(select(LiveRun.status, func.count(LiveRun.id)).where(
                LiveRun.token_id == token_id, LiveRun.spec_hash == spec_hash).group_by(LiveRun.status)).all()
        return {status: n for status, n in rows}

    # ------------------------------------------------------------------ requests
    def start(self, token: Any, board: Board, agent: dict[str, Any], seeds: int) -> dict[str, Any]:
        """Open a run: draw ``seeds`` seeds and the order of every (task, seed) pair."""
        import gymnasium as gym

        self.sweep()
        if not 1 <= seeds <= self.limits.max_seeds:
            raise LiveError(f"seeds must be 1 to {self.limits.max_seeds}", 400)
        with self._lock:
            mine = sum(1 for r in self._runs.values() if r.token_id == token.id)
            if mine >= self.limits.max_open_per_token:
                raise LiveError(f"token {token.name!r} already has {mine} open live run(s); finish it or let it expire", 429,
                                retry_after=self.limits.retry_seconds)
            now, free = time.monotonic(), self.limits.max_open - len(self._runs)
            if not self._waitlist.may_open(token.id, free, now):  # full, or the free slots are for tokens refused earlier
                place = self._waitlist.refused(token.id, now)
                raise LiveError(f"the server runs {len(self._runs)} live runs, its limit of {self.limits.max_open}"
                                f"{'' if free <= 0 else ', and the free slots go to tokens refused before you'}; you are "
                                f"number {place} in line for the next free slot: ask again within "
                                f"{self.limits.hold_seconds:g} s to keep your place", 429, retry_after=self.limits.retry_seconds)
            drawn = _rng.sample(range(2**31), seeds)
            schedule = [(t, s) for s in drawn for t in board.task_ids]
            _rng.shuffle(schedule)
            env = gym.make(board.env_id, split=board.split, **private.env_kwargs(board.env_id, board.split))
            if env.unwrapped.spec_hash() != board.spec_hash:
                env.close()
                raise LiveError(f"this server's {board.env_id} env no longer matches board {board.spec_hash}", 503)
            with self.store.session.begin() as s:
                row = LiveRun(token_id=token.id, spec_hash=board.spec_hash, agent_json=json.dumps(agent), status="open",
                              episodes_total=len(schedule))
                s.add(row)
                s.flush()
                run_id = row.id
            run = _Run(run_id, token.id, token.name, board, agent, sorted(drawn), schedule, env)
            self._runs[run_id] = run
            self._waitlist.opened(token.id)
        return {**run.public(), "idle_seconds": self.limits.idle_seconds, "max_seconds": self.limits.max_seconds,
                "max_output_bytes": self.limits.max_output_bytes}

    def _run(self, run_id: int, token: Any) -> _Run:
        self.sweep()
        with self._lock:
            run = self._runs.get(run_id)
        if run is None or run.token_id != token.id:
            raise LiveError(f"no open live run {run_id} for this token (finished, expired or never started)", 404)
        return run  # not touched: only progress (a dealt episode, a played turn) keeps a run open

    def status(self, run_id: int, token: Any) -> dict[str, Any]:
        return self._run(run_id, token).public()

    def reset(self, run_id: int, token: Any, task_id: str | None = None, seed: int | None = None) -> dict[str, Any]:
        """Deal the run's next (task, seed); asking for another pair, or for one already played, is refused."""
        from sapo_gym.core import public_info
        from sapo_gym.evaluation import new_record

        run = self._run(run_id, token)
        with run.lock:
            if run.record is not None:
                raise LiveError(f"episode {run.played - 1} is in progress: play it to its end (an episode cannot be restarted)")
            if run.played >= len(run.schedule):
                raise LiveError("every episode of this run has been played")
            wanted = (task_id, seed)
            if task_id is not None or seed is not None:
                if wanted in run.schedule[: run.played]:
                    raise LiveError(f"(task {task_id}, seed {seed}) was already played in this run: each is played once")
                if wanted != run.schedule[run.played]:
                    raise LiveError("the server deals the (task, seed) order: ask for the next episode without naming one")
            task, episode_seed = run.schedule[run.played]
            obs, info = run.env.reset(seed=episode_seed, options={"task_id": task})
            run.record = new_record(info, task, episode_seed)
            run.played += 1
            run.touched = time.monotonic()  # progress
            return {"episode": run.played - 1, "task_id": task, "seed": episode_seed, "observation": obs,
                    "info": jsonable(public_info(info))}

    def step(self, run_id: int, token: Any, output: str, turn: int | None = None) -> dict[str, Any]:
        """Step the episode in progress with the agent's raw output; the last step of the run submits it."""
        from sapo_gym.core import public_info
        from sapo_gym.evaluation import record_step

        with self._lock:
            done = self._answered.get(run_id) if run_id not in self._runs else None
        if done is not None and done[0] == token.id and turn is not None and done[1][1] == turn:
            return done[1][2]
        run = self._run(run_id, token)
        with run.lock:
            episode = run.played - 1
            if run.last is not None and turn is not None and run.last[:2] == (episode, turn):
                return run.last[2]  # a retried request: the same answer, the env is not stepped twice
            if run.record is None:
                raise LiveError("no episode in progress: ask for the next one first")
            if turn is not None and turn != run.record.steps:
                raise LiveError(f"turn {turn} is not the episode's next turn ({run.record.steps})")
            size = len(output.encode("utf-8", "surrogatepass"))
            if run.output_bytes + size > self.limits.max_output_bytes:
                raise LiveError(f"this run has recorded {run.output_bytes} bytes of outputs; {size} more would pass its "
                                f"limit of {self.limits.max_output_bytes} (send a shorter output)", 413)
            obs, reward, terminated, truncated, info = run.env.step(output)
            record_step(run.record, output, reward, info)
            run.output_bytes += size
            run.touched = time.monotonic()  # progress
            body: dict[str, Any] = {"episode": episode, "turn": run.record.steps - 1, "observation": obs, "reward": float(reward),
                                    "terminated": bool(terminated), "truncated": bool(truncated), "info": jsonable(public_info(info))}
            run.last = (episode, body["turn"], body)
            if terminated or truncated:
                run.records.append(run.record)
                run.record = None
                if len(run.records) == len(run.schedule):
                    with self._lock:  # before _finish closes the run: a retry of this step must find its answer
                        self._answered[run.id] = (run.token_id, run.last)
                        while len(self._answered) > 64:
                            self._answered.pop(next(iter(self._answered)))
                    body["submission"] = self._finish(run)
            return body

    def _finish(self, run: _Run) -> dict[str, Any]:
        """The run's bundle, from the server's own records, through admission into the store."""
        from leaderboard.bundle import AgentInfo, BundleError, build_bundle, parse_bundle
        from leaderboard.checks import admit
        from leaderboard.server.provenance import EpisodesClaimed

        order = {pair: i for i, pair in enumerate(sorted(run.schedule, key=lambda p: (p[1], p[0])))}
        records = sorted(run.records, key=lambda r: order[(r.task_id, r.seed)])
        bundle = build_bundle(records, run.board.spec_fields, run.board.spec_hash, AgentInfo(**run.agent), run.seeds,
                              batch_size=1, command=f"live run {run.id} on the leaderboard server")
        try:
            bundle = parse_bundle(json.dumps(bundle, allow_nan=False))
            admit(bundle, self.boards)
            added = self.store.add(bundle, run.board, submitter=run.submitter, token_id=run.token_id, live_run_id=run.id)
        except (BundleError, EpisodesClaimed) as exc:
            self._end(run, "rejected", str(exc))
            return {"id": None, "status": "rejected", "message": str(exc)}
        self._end(run, "finished", f"all {len(records)} episodes played", submission_id=added.id)
        if self.verifier is not None:
            self.verifier.wake.set()
        return {"id": added.id, "status": added.status}
