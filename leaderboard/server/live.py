"""Live evaluation: the submitter's agent plays through the server, which holds the env.

The server draws the seeds and the order of the (task, seed) pairs, deals each pair once per run
(an episode in progress cannot be abandoned or restarted), passes the agent only
:func:`sapo_gym.core.public_info`, steps the env itself and records every turn. When the last
episode ends, the run's bundle is built from the server's own records, admitted like any bundle and
stored as a submission marked *live* (the verifier still replays it).

A run may play up to ``parallel`` episodes at once (chosen at start, 1 by default, at most
``max_parallel``): a reset deals the next pair and answers its ``episode`` index, a step names the
``episode`` it plays (it may leave it out while one episode is in progress).

**Everything a run is lives in the database**, written before the request is answered: its plan
(``live_plans``: the schedule, the seeds, progress and clocks), each dealt episode (``live_episodes``)
and each played turn with the answer the client got (``live_turns``). A request locks the run's plan
row, so one run's requests take turns whichever server process gets them; an acknowledged step is
committed. Envs are a per-process cache (:mod:`leaderboard.server.live_envs`), rebuilt by replaying the
recorded outputs when a process lacks the current one. So after a ``kill -9`` of the server, a
restarted one, or any other process on the same database, continues the run from its last
acknowledged step, a retried request gets its recorded answer, and the finished bundle is the one an
uninterrupted run gives (its ``created`` is the run's start).

Bounded: at most ``max_open`` open runs on the database and ``max_open_per_token`` per token (counted
in the database, under a start lock: a PostgreSQL advisory lock, SQLite's write lock), each holding at
most ``max_parallel`` envs per process that plays it; a run expires after ``idle_seconds`` without
progress (a reset that deals an episode or a step that plays a turn; reading the run's status, a
refused or a retried request is no progress) or ``max_seconds`` in all (the run stays in ``live_runs``
as *expired*: abandoned runs are counted on the submission page; a day later its episodes and turns are pruned). A
start refused because the server is full is a 429 with ``Retry-After`` and puts the token in line for the next freed
slot (:mod:`leaderboard.server.live_waitlist`, a table too).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import func, not_, or_, select, text, update
from sqlalchemy.orm import Session

from leaderboard.boards import Board
from leaderboard.server import live_waitlist as waitlist
from leaderboard.server.db import LiveEpisode, LivePlan, LiveRun, LiveTurn, utcnow
from leaderboard.server.live_envs import EnvCache
from leaderboard.server.live_run import LiveError, RunView, answered, episode_records, outputs_of, prune_closed

__all__ = ["LiveError", "LiveLimits", "LiveManager"]

log = logging.getLogger(__name__)
_rng = secrets.SystemRandom()
_START_LOCK = 0x5A90_11FE
"""PostgreSQL advisory lock key of live starts (slot accounting and the waiting line)."""


@dataclass(frozen=True)
class LiveLimits:
    max_open: int = 4
    """Open runs on the database at once (each holds up to ``max_parallel`` envs in a process that plays it)."""
    max_open_per_token: int = 1
    """Open runs per token."""
    max_seeds: int = 4
    """Seeds (passes over the split) a run may ask for."""
    max_parallel: int = 8
    """Episodes a run may play at once (``parallel`` at start), each on an env of its own: a process holds at most
    ``max_open * max_parallel`` envs (its cache's capacity)."""
    idle_seconds: float = 300.0
    """A run without progress (a reset or a step that plays a turn) for this long expires."""
    max_seconds: float = 4 * 3600.0
    """A run expires this long after it started, finished or not."""
    retry_seconds: float = 5.0
    """``Retry-After`` of a start refused because the server is full."""
    hold_seconds: float = 30.0
    """A token refused while the server was full keeps its place in line while it asks again this often."""
    keep_closed_seconds: float = 24 * 3600.0
    """A closed run's episodes and turns are deleted this long after it closed (:func:`prune_closed`; its bundle is a
    submission by then, and a request retried later is a 404): the turn tables hold open and recent runs only."""
    prune_every_seconds: float = 60.0
    """How often (at most) a process looks for closed runs to prune, on its next request."""
    max_output_bytes: int = 64 << 20
    """Outputs (UTF-8 bytes) a run may record in all: the largest bundle a submitter could upload instead. ``serve``
    sets it to ``--max-upload-mb``. A step past it is a 413 that costs no turn."""


def _end_row(s: Session, run_id: int, status: str, message: str, submission_id: int | None = None) -> None:
    """Close run ``run_id``'s row (``finished``, ``rejected`` or ``expired``) unless another process closed it first."""
    s.execute(
        update(LiveRun)
        .where(LiveRun.id == run_id, LiveRun.status == "open")
        .values(status=status, status_message=message[:2000], ended_at=utcnow(), submission_id=submission_id)
    )


def _header(record: Any) -> str:
    """An ``EpisodeRecord`` without its turns (those are rows of their own), as JSON."""
    return json.dumps({k: v for k, v in asdict(record).items() if k != "turns"})


def _open_run(
    s: Session,
    token: Any,
    board: Board,
    agent: dict[str, Any],
    drawn: list[int],
    schedule: list[tuple[str, int]],
    parallel: int,
    request_id: str | None,
) -> int:
    """Add an open run's row and its plan (the ``drawn`` seeds, the ``schedule`` of (task, seed) pairs) and take the
    token out of the waiting line, under the start lock (the caller commits); the run's id."""
    now = time.time()
    row = LiveRun(
        token_id=token.id,
        spec_hash=board.spec_hash,
        agent_json=json.dumps(agent),
        status="open",
        episodes_total=len(schedule),
    )
    s.add(row)
    s.flush()
    s.add(
        LivePlan(
            run_id=row.id,
            env_id=board.env_id,
            split=board.split,
            submitter=token.name,
            seeds_json=json.dumps(sorted(drawn)),
            schedule_json=json.dumps(schedule),
            parallel=parallel,
            request_id=request_id,
            played=0,
            output_bytes=0,
            started_at=now,
            touched_at=now,
        )
    )
    waitlist.opened(s, token.id)
    return row.id


class LiveManager:
    """Live runs on one database, as one server process serves them (any number of processes may)."""

    def __init__(self, store: Any, boards: Any, verifier: Any = None, limits: LiveLimits | None = None):
        self.store, self.boards, self.verifier = store, boards, verifier
        self.limits = limits or LiveLimits()
        self.envs = EnvCache(self.limits.max_open * self.limits.max_parallel)
        self._next_prune = 0.0
        with self.store.session.begin() as s:  # open runs of a server from before runs were kept in the database
            s.execute(
                update(LiveRun)
                .where(
                    LiveRun.status == "open",
                    not_(select(LivePlan.run_id).where(LivePlan.run_id == LiveRun.id).exists()),
                )
                .values(
                    status="expired",
                    status_message="the server restarted (this run's plan was not kept)",
                    ended_at=utcnow(),
                )
            )

    # ------------------------------------------------------------------ bookkeeping
    def sweep(self, run_id: int | None = None) -> int:
        """Expire idle and overlong open runs (only ``run_id`` when given); how many. Their envs here are closed."""
        now, limits = time.time(), self.limits
        stale = or_(LivePlan.touched_at < now - limits.idle_seconds, LivePlan.started_at < now - limits.max_seconds)
        query = (
            select(LiveRun.id, LiveRun.episodes_done, LiveRun.episodes_total, LivePlan.touched_at)
            .join(LivePlan, LivePlan.run_id == LiveRun.id)
            .where(LiveRun.status == "open", stale)
        )
        if run_id is not None:
            query = query.where(LiveRun.id == run_id)
        with self.store.session() as s:
            rows = s.execute(query).all()
        for row in rows:
            why = "idle" if row.touched_at < now - limits.idle_seconds else "over time"
            with self.store.session.begin() as s:
                still = s.execute(select(LivePlan.run_id).where(LivePlan.run_id == row.id, stale)).first()
                if still is not None:
                    _end_row(
                        s,
                        row.id,
                        "expired",
                        f"abandoned after {row.episodes_done} of {row.episodes_total} episodes ({why})",
                    )
            log.info("live run %s: expired (%s)", row.id, why)
            self.envs.drop_run(row.id)
        if time.monotonic() >= self._next_prune:
            self.prune()
        return len(rows)

    def prune(self) -> int:
        """Delete the episodes and turns of runs closed more than ``keep_closed_seconds`` ago; how many turns."""
        self._next_prune = time.monotonic() + self.limits.prune_every_seconds
        cutoff = utcnow() - dt.timedelta(seconds=self.limits.keep_closed_seconds)
        with self.store.session.begin() as s:
            turns = prune_closed(s, cutoff)
        if turns:
            log.info("live runs: pruned %d turns of runs closed before %s", turns, cutoff.isoformat(timespec="seconds"))
        return turns

    def counts(self, token_id: int, spec_hash: str) -> dict[str, int]:
        """This token's live runs on a board, by status (best-of-N over runs shows as abandoned ones)."""
        with self.store.session() as s:
            rows = s.execute(
                select(LiveRun.status, func.count(LiveRun.id))
                .where(LiveRun.token_id == token_id, LiveRun.spec_hash == spec_hash)
                .group_by(LiveRun.status)
            ).all()
        return {status: n for status, n in rows}

    def limits_public(self) -> dict[str, Any]:
        """What a client may ask for (``GET /api/v1/live/limits``)."""
        limits = self.limits
        return {
            "max_parallel": limits.max_parallel,
            "max_seeds": limits.max_seeds,
            "idle_seconds": limits.idle_seconds,
            "max_seconds": limits.max_seconds,
            "max_output_bytes": limits.max_output_bytes,
        }

    # ------------------------------------------------------------------ start
    def start(
        self,
        token: Any,
        board: Board,
        agent: dict[str, Any],
        seeds: int,
        parallel: int = 1,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Open a run: draw ``seeds`` seeds and the order of every (task, seed) pair; up to ``parallel`` episodes at once.
        A retried start (the same ``request_id``) whose run is still open gets that run back, not a refusal."""
        if not 1 <= seeds <= self.limits.max_seeds:
            raise LiveError(f"seeds must be 1 to {self.limits.max_seeds}", 400)
        if type(parallel) is not int or not 1 <= parallel <= self.limits.max_parallel:
            raise LiveError(
                f"parallel (episodes in progress at once) must be an integer 1 to {self.limits.max_parallel}", 400
            )
        self.sweep()
        drawn = _rng.sample(range(2**31), seeds)
        schedule = [(t, s) for s in drawn for t in board.task_ids]
        _rng.shuffle(schedule)
        with self.store.session.begin() as s:
            if s.get_bind().dialect.name == "postgresql":  # the start lock (SQLite: BEGIN IMMEDIATE already is)
                s.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _START_LOCK})
            run_id = self._started(s, token, request_id)
            opened = run_id is None
            refusal = self._refusal(s, token) if opened else None  # committed with the waiting line's update
            if opened and refusal is None:
                run_id = _open_run(s, token, board, agent, drawn, schedule, parallel, request_id)
        if refusal is not None:
            raise refusal
        if opened:
            self._check_spec(board, run_id)
        with self.store.session() as s:
            view = self._view(s, run_id, token, lock=False)
        return {
            **view.public(),
            "idle_seconds": self.limits.idle_seconds,
            "max_seconds": self.limits.max_seconds,
            "max_output_bytes": self.limits.max_output_bytes,
        }

    @staticmethod
    def _started(s: Session, token: Any, request_id: str | None) -> int | None:
        """The open run this token's start ``request_id`` already opened (its answer was lost), if any."""
        if request_id is None:
            return None
        return s.scalar(
            select(LiveRun.id)
            .join(LivePlan, LivePlan.run_id == LiveRun.id)
            .where(LiveRun.token_id == token.id, LiveRun.status == "open", LivePlan.request_id == request_id)
        )

    def _check_spec(self, board: Board, run_id: int) -> None:
        """Build the run's first env now (it waits in the pool for the first deal) and check the board's spec on it."""
        env = self.envs.fresh(board)  # the first env now (its spec is checked); it waits in the pool for the first deal
        if env.unwrapped.spec_hash() != board.spec_hash:
            self.envs.discard(env)
            self._close(run_id, "rejected", f"this server's {board.env_id} env no longer matches the board")
            raise LiveError(f"this server's {board.env_id} env no longer matches board {board.spec_hash}", 503)
        self.envs.release(board, env)

    def _refusal(self, s: Session, token: Any) -> LiveError | None:
        """Why ``token`` may not open a run now (None: it may), under the start lock."""
        limits, now = self.limits, time.time()
        owners = list(s.scalars(select(LiveRun.token_id).where(LiveRun.status == "open")))
        mine = owners.count(token.id)
        if mine >= limits.max_open_per_token:
            return LiveError(
                f"token {token.name!r} already has {mine} open live run(s); finish it or let it expire",
                429,
                retry_after=limits.retry_seconds,
            )
        free = limits.max_open - len(owners)
        if waitlist.may_open(s, token.id, free, now, limits.hold_seconds):
            return None
        place = waitlist.refused(s, token.id, now, limits.hold_seconds)
        return LiveError(
            f"the server runs {len(owners)} live runs, its limit of {limits.max_open}"
            f"{'' if free <= 0 else ', and the free slots go to tokens refused before you'}; you are "
            f"number {place} in line for the next free slot: ask again within "
            f"{limits.hold_seconds:g} s to keep your place",
            429,
            retry_after=limits.retry_seconds,
        )

    # ------------------------------------------------------------------ one run
    def _view(self, s: Session, run_id: int, token: Any, lock: bool = True, closed_ok: bool = False) -> RunView:
        """The token's run ``run_id``, its plan row locked (``lock``) until ``s`` ends; a 404 unless it is open
        (or ``closed_ok``)."""
        query = select(LivePlan).where(LivePlan.run_id == run_id)
        plan = s.scalar(query.with_for_update() if lock else query) if 0 <= run_id < 2**63 else None
        run = s.get(LiveRun, run_id) if plan is not None else None
        if run is None or run.token_id != token.id or (run.status != "open" and not closed_ok):
            raise LiveError(f"no open live run {run_id} for this token (finished, expired or never started)", 404)
        board = self.boards.find(plan.env_id, plan.split)
        if board is None:
            raise LiveError(f"this server does not host board {plan.env_id}:{plan.split} of live run {run_id}", 503)
        return RunView.load(s, run, plan, board)

    def status(self, run_id: int, token: Any) -> dict[str, Any]:
        self.sweep(run_id)
        with self.store.session() as s:
            return self._view(s, run_id, token, lock=False).public()

    def reset(
        self,
        run_id: int,
        token: Any,
        task_id: str | None = None,
        seed: int | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Deal the run's next (task, seed); past ``parallel`` episodes in progress, asking for another pair, or for one
        already played, is refused. A retried reset (the same ``request_id``) whose episode is still in progress gets its
        answer again, not a second deal."""
        from sapo_gym.core import public_info, to_jsonable
        from sapo_gym.records import new_record

        self.sweep(run_id)
        env = None
        try:
            with self.store.session.begin() as s:
                view = self._view(s, run_id, token)
                again = view.redealt(request_id)
                if again is not None:
                    return again
                task, episode_seed = view.check_deal(task_id, seed)
                env = self.envs.fresh(view.board)
                obs, info = env.reset(seed=episode_seed, options={"task_id": task})
                index = view.plan.played
                answer = {
                    "episode": index,
                    "task_id": task,
                    "seed": episode_seed,
                    "slot": view.board.task_ids.index(task),
                    "observation": obs,
                    "info": to_jsonable(public_info(info)),
                }
                s.add(
                    LiveEpisode(
                        run_id=run_id,
                        episode=index,
                        request_id=request_id,
                        dealt_json=json.dumps(answer),
                        record_json=_header(new_record(info, task, episode_seed)),
                        steps=0,
                        ended=False,
                    )
                )
                view.plan.played, view.plan.touched_at = index + 1, time.time()  # progress
        except BaseException:
            if env is not None:
                self.envs.discard(env)  # reset, but not dealt: the database does not hold it
            raise
        self.envs.keep((run_id, index), env, 0)
        return answer

    def step(
        self, run_id: int, token: Any, output: str, turn: int | None = None, episode: int | None = None
    ) -> dict[str, Any]:
        """Step ``episode`` (without it, the only one in progress) with the agent's raw output; the step that ends the
        run's last episode submits it. A retried step (its episode's last played turn) gets its recorded answer."""
        self.sweep(run_id)
        env, key = None, None
        try:
            with self.store.session.begin() as s:
                view = self._view(s, run_id, token, closed_ok=True)
                index = (
                    view.which(episode)
                    if view.run.status == "open"
                    else (episode if episode is not None else view.plan.played - 1)
                )
                prior = answered(s, run_id, index, turn)
                if prior is not None:  # a retried request: the same answer, the env is not stepped twice
                    finish = view.run.status == "open" and view.run.episodes_done == view.run.episodes_total
                    if not finish:
                        return json.loads(prior.answer_json)
                    body, finish_at = (
                        json.loads(prior.answer_json),
                        (index, prior.turn),
                    )  # its server died before it submitted
                else:
                    if view.run.status != "open":
                        raise LiveError(
                            f"no open live run {run_id} for this token (finished, expired or never started)", 404
                        )
                    key = (run_id, index)
                    env, body, ended = self._play(s, view, index, output, turn)
                    finish_at = (index, body["turn"]) if view.run.episodes_done == view.run.episodes_total else None
        except BaseException:
            if env is not None:
                self.envs.discard(env)  # stepped, but not acknowledged: the database does not hold that turn
            raise
        if env is not None:
            if ended:
                self.envs.release(view.board, env)
            else:
                self.envs.keep(key, env, body["turn"] + 1)
        if finish_at is not None:
            body["submission"] = self._finish(run_id, *finish_at)
        return body

    def _play(
        self, s: Session, view: RunView, index: int, output: str, turn: int | None
    ) -> tuple[Any, dict[str, Any], bool]:
        """Play one turn of episode ``index`` and write it (the caller commits): (its env, the answer, whether it ended)."""
        from sapo_gym.core import public_info, to_jsonable
        from sapo_gym.records import EpisodeRecord, record_step

        ep, size = self._playable(view, index, output, turn)
        record = EpisodeRecord.from_dict({**json.loads(ep.record_json), "turns": []})
        env = self.envs.take(
            (view.run.id, index),
            view.board,
            record.task_id,
            record.seed,
            lambda: outputs_of(s, view.run.id, index),
            ep.steps,
        )
        try:
            obs, reward, terminated, truncated, info = env.step(output)
            record_step(record, output, reward, info)
            body: dict[str, Any] = {
                "episode": index,
                "turn": ep.steps,
                "observation": obs,
                "reward": float(reward),
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "info": to_jsonable(public_info(info)),
            }
            s.add(
                LiveTurn(
                    run_id=view.run.id,
                    episode=index,
                    turn=ep.steps,
                    step_json=json.dumps(asdict(record.turns[-1])),
                    answer_json=json.dumps(body),
                )
            )
            ended = bool(terminated or truncated)
            ep.steps, ep.record_json, ep.ended = ep.steps + 1, _header(record), ended
            view.plan.output_bytes += size
            view.plan.touched_at = time.time()  # progress
            view.run.episodes_done += int(ended)
            s.flush()
        except BaseException:
            self.envs.discard(env)
            raise
        return env, body, ended

    def _playable(self, view: RunView, index: int, output: str, turn: int | None) -> tuple[LiveEpisode, int]:
        """Episode ``index``'s row, if ``output`` may be its turn ``turn`` (it is in progress, the turn is its next,
        and the run's outputs stay within their byte limit), and the output's size in bytes; else a refusal."""
        ep = view.active.get(index)
        if ep is None:
            raise LiveError(
                "no episode in progress: ask for the next one first"
                if not view.active
                else f"episode {index} is not in progress (in progress: {sorted(view.active)})"
            )
        if turn is not None and turn != ep.steps:
            raise LiveError(f"turn {turn} is not the episode's next turn ({ep.steps})")
        size = len(output.encode("utf-8", "surrogatepass"))
        if view.plan.output_bytes + size > self.limits.max_output_bytes:
            raise LiveError(
                f"this run has recorded {view.plan.output_bytes} bytes of outputs; {size} more would pass its "
                f"limit of {self.limits.max_output_bytes} (send a shorter output)",
                413,
            )
        return ep, size

    # ------------------------------------------------------------------ the end
    def _finish(self, run_id: int, episode: int, turn: int) -> dict[str, Any]:
        """The run's bundle, from its rows, through admission into the store; the answer's ``submission``. Any process
        may finish a run (twice at once too: the store keeps one copy of an identical bundle)."""
        from leaderboard.checks import admit
        from leaderboard.server.provenance import EpisodesClaimed
        from sapo_gym.bundle import AgentInfo, BundleError, build_bundle, parse_bundle

        with self.store.session() as s:
            run, plan = s.get(LiveRun, run_id), s.get(LivePlan, run_id)
            records = episode_records(s, run_id)
        board = self.boards.find(plan.env_id, plan.split)
        seeds, agent = json.loads(plan.seeds_json), json.loads(run.agent_json)
        records.sort(key=lambda r: (r.seed, r.task_id))
        created = run.created_at.replace(tzinfo=dt.timezone.utc).isoformat(timespec="seconds")
        bundle = build_bundle(
            records,
            board.spec_fields,
            board.spec_hash,
            AgentInfo(**agent),
            seeds,
            batch_size=1,
            command=f"live run {run_id} on the leaderboard server",
            created=created,
        )
        try:
            bundle = parse_bundle(json.dumps(bundle, allow_nan=False))
            admit(bundle, self.boards)
            added = self.store.add(bundle, board, submitter=plan.submitter, token_id=run.token_id, live_run_id=run_id)
            status, message, submission = (
                "finished",
                f"all {len(records)} episodes played",
                {"id": added.id, "status": added.status},
            )
        except (BundleError, EpisodesClaimed) as exc:
            status, message, submission = "rejected", str(exc), {"id": None, "status": "rejected", "message": str(exc)}
        with self.store.session.begin() as s:
            s.scalar(select(LivePlan).where(LivePlan.run_id == run_id).with_for_update())
            row = s.get(LiveTurn, (run_id, episode, turn))
            answer = json.loads(row.answer_json)
            answer.setdefault("submission", submission)  # another process that finished first answered already
            row.answer_json = json.dumps(answer)
            _end_row(s, run_id, status, message, submission["id"])
        log.info("live run %s: %s (%s)", run_id, status, message)
        self.envs.drop_run(run_id)
        if self.verifier is not None and status == "finished":
            self.verifier.wake.set()
        return answer["submission"]

    def _close(self, run_id: int, status: str, message: str) -> None:
        with self.store.session.begin() as s:
            _end_row(s, run_id, status, message)
        self.envs.drop_run(run_id)
