"""Live evaluation: the submitter's agent plays through the server, which holds the env.

The server draws the seeds and the order of the (task, seed) pairs, deals each pair once per run
(an episode in progress cannot be abandoned or restarted), passes the agent only
:func:`sapo_gym.core.public_info`, steps the env itself and records every turn. When the last
episode ends, the run's bundle is built from the server's own records, admitted like any bundle and
stored as a submission marked *live* (the verifier still replays it).

A run may play up to ``parallel`` episodes at once (chosen at start, 1 by default, at most
``max_parallel``): each has an env of its own (:mod:`leaderboard.server.live_run`), a reset deals the
next pair into a free slot and answers its ``episode`` index, a step names the ``episode`` it plays
(it may leave it out while one episode is in progress).

Bounded: at most ``max_open`` open runs on the server and ``max_open_per_token`` per token, each
holding at most ``max_parallel`` envs (the server's bound: ``max_open * max_parallel`` envs); a run
expires after ``idle_seconds`` without progress (a reset that deals an episode or a step that plays a
turn; reading the run's status, a refused or a retried request is no progress) or ``max_seconds`` in
all (its envs are closed; the run stays in ``live_runs`` as *expired*: abandoned runs are counted on
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
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, update

from leaderboard import private
from leaderboard.boards import Board
from leaderboard.server.db import LiveRun, utcnow
from leaderboard.server.live_run import Episode, LiveError, Run, jsonable
from leaderboard.server.live_waitlist import Waitlist

__all__ = ["LiveError", "LiveLimits", "LiveManager", "jsonable"]

log = logging.getLogger(__name__)
_rng = secrets.SystemRandom()


@dataclass(frozen=True)
class LiveLimits:
    max_open: int = 4
    """Open runs on the server at once (each holds up to ``max_parallel`` envs in memory)."""
    max_open_per_token: int = 1
    """Open runs per token."""
    max_seeds: int = 4
    """Seeds (passes over the split) a run may ask for."""
    max_parallel: int = 8
    """Episodes a run may play at once (``parallel`` at start), each on an env of its own: the server holds at most
    ``max_open * max_parallel`` envs."""
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


class LiveManager:
    """Open live runs of one server process, and their rows in ``live_runs``."""

    def __init__(self, store: Any, boards: Any, verifier: Any = None, limits: LiveLimits | None = None):
        self.store, self.boards, self.verifier = store, boards, verifier
        self.limits = limits or LiveLimits()
        self._runs: dict[int, Run] = {}
        self._answered: dict[int, tuple[int, int, dict[int, tuple[int, dict[str, Any]]]]] = {}
        """Finished runs' last step answers (run id -> token id, the last episode, {episode: (turn, answer)} of its
        latest ended episodes), the latest 64 runs: a retried last step still gets its answer (with the submission)
        after the run is closed."""
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

    def _end(self, run: Run, status: str, message: str, submission_id: int | None = None) -> None:
        log.info("live run %s: %s (%s)", run.id, status, message)
        with self._lock:
            self._runs.pop(run.id, None)
        try:
            run.close_envs()
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
    def start(self, token: Any, board: Board, agent: dict[str, Any], seeds: int, parallel: int = 1) -> dict[str, Any]:
        """Open a run: draw ``seeds`` seeds and the order of every (task, seed) pair; up to ``parallel`` episodes at once."""
        self.sweep()
        if not 1 <= seeds <= self.limits.max_seeds:
            raise LiveError(f"seeds must be 1 to {self.limits.max_seeds}", 400)
        if type(parallel) is not int or not 1 <= parallel <= self.limits.max_parallel:
            raise LiveError(f"parallel (episodes in progress at once) must be an integer 1 to {self.limits.max_parallel}", 400)
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
            make_env = _env_factory(board)
            env = make_env()  # the first env now (its spec is checked); the others when a second episode is dealt
            if env.unwrapped.spec_hash() != board.spec_hash:
                env.close()
                raise LiveError(f"this server's {board.env_id} env no longer matches board {board.spec_hash}", 503)
            try:
                with self.store.session.begin() as s:
                    row = LiveRun(token_id=token.id, spec_hash=board.spec_hash, agent_json=json.dumps(agent), status="open",
                                  episodes_total=len(schedule))
                    s.add(row)
                    s.flush()
                    run_id = row.id
            except BaseException:
                env.close()
                raise
            run = Run(run_id, token.id, token.name, board, agent, sorted(drawn), schedule, make_env, [env], parallel)
            self._runs[run_id] = run
            self._waitlist.opened(token.id)
        return {**run.public(), "idle_seconds": self.limits.idle_seconds, "max_seconds": self.limits.max_seconds,
                "max_output_bytes": self.limits.max_output_bytes}

    def limits_public(self) -> dict[str, Any]:
        """What a client may ask for (``GET /api/v1/live/limits``)."""
        limits = self.limits
        return {"max_parallel": limits.max_parallel, "max_seeds": limits.max_seeds, "idle_seconds": limits.idle_seconds,
                "max_seconds": limits.max_seconds, "max_output_bytes": limits.max_output_bytes}

    def _run(self, run_id: int, token: Any) -> Run:
        self.sweep()
        with self._lock:
            run = self._runs.get(run_id)
        if run is None or run.token_id != token.id:
            raise LiveError(f"no open live run {run_id} for this token (finished, expired or never started)", 404)
        return run  # not touched: only progress (a dealt episode, a played turn) keeps a run open

    def status(self, run_id: int, token: Any) -> dict[str, Any]:
        return self._run(run_id, token).public()

    def reset(self, run_id: int, token: Any, task_id: str | None = None, seed: int | None = None,
              request_id: str | None = None) -> dict[str, Any]:
        """Deal the run's next (task, seed) into a free slot; past ``parallel`` episodes in progress, asking for another
        pair, or for one already played, is refused. A retried reset (the same ``request_id``) whose episode is still
        in progress gets its answer again, not a second deal."""
        from sapo_gym.core import public_info
        from sapo_gym.evaluation import new_record

        run = self._run(run_id, token)
        with run.lock:
            again = run.redealt(request_id)
            if again is not None:
                return again
            run.check_deal(task_id, seed)
            task, episode_seed = run.schedule[run.played]
            env = run.free_env()
            obs, info = env.reset(seed=episode_seed, options={"task_id": task})
            index = run.played
            answer = {"episode": index, "task_id": task, "seed": episode_seed, "slot": run.board.task_ids.index(task),
                      "observation": obs, "info": jsonable(public_info(info))}
            run.active[index] = Episode(index, env, new_record(info, task, episode_seed), request_id=request_id, dealt=answer)
            run.played += 1
            run.touched = time.monotonic()  # progress
            return answer

    def _answered_before(self, run_id: int, token: Any, episode: int | None, turn: int | None) -> dict[str, Any] | None:
        """A closed run's answer to a retried step (its latest ended episodes' last steps, the run's last one included)."""
        with self._lock:
            done = self._answered.get(run_id) if run_id not in self._runs else None
        if done is None or done[0] != token.id or turn is None:
            return None
        last = done[2].get(done[1] if episode is None else episode)
        return last[1] if last is not None and last[0] == turn else None

    def step(self, run_id: int, token: Any, output: str, turn: int | None = None, episode: int | None = None) -> dict[str, Any]:
        """Step ``episode`` (without it, the only one in progress) with the agent's raw output; the last step of the run
        submits it."""
        from sapo_gym.core import public_info
        from sapo_gym.evaluation import record_step

        again = self._answered_before(run_id, token, episode, turn)
        if again is not None:
            return again
        run = self._run(run_id, token)
        with run.lock:
            index = run.which(episode)
            again = run.retried(index, turn)
            if again is not None:
                return again  # a retried request: the same answer, the env is not stepped twice
            ep = run.active.get(index)
            if ep is None:
                raise LiveError("no episode in progress: ask for the next one first" if not run.active else
                                f"episode {index} is not in progress (in progress: {sorted(run.active)})")
            if turn is not None and turn != ep.record.steps:
                raise LiveError(f"turn {turn} is not the episode's next turn ({ep.record.steps})")
            size = len(output.encode("utf-8", "surrogatepass"))
            if run.output_bytes + size > self.limits.max_output_bytes:
                raise LiveError(f"this run has recorded {run.output_bytes} bytes of outputs; {size} more would pass its "
                                f"limit of {self.limits.max_output_bytes} (send a shorter output)", 413)
            obs, reward, terminated, truncated, info = ep.env.step(output)
            record_step(ep.record, output, reward, info)
            run.output_bytes += size
            run.touched = time.monotonic()  # progress
            body: dict[str, Any] = {"episode": index, "turn": ep.record.steps - 1, "observation": obs, "reward": float(reward),
                                    "terminated": bool(terminated), "truncated": bool(truncated), "info": jsonable(public_info(info))}
            ep.last = (body["turn"], body)
            if terminated or truncated:
                run.end_episode(ep)
                if len(run.records) == len(run.schedule):
                    with self._lock:  # before _finish closes the run: a retry of this step must find its answer
                        self._answered[run.id] = (run.token_id, index, dict(run.ended))
                        while len(self._answered) > 64:
                            self._answered.pop(next(iter(self._answered)))
                    body["submission"] = self._finish(run)
            return body

    def _finish(self, run: Run) -> dict[str, Any]:
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


def _env_factory(board: Board) -> Any:
    """Builds one env of ``board`` (a private split's env with its kwargs)."""
    import gymnasium as gym

    kwargs = private.env_kwargs(board.env_id, board.split)
    return lambda: gym.make(board.env_id, split=board.split, **kwargs)
