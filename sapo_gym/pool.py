"""Running an evaluation's episodes: a continuous pool for agents that answer one env at a time, lockstep batches
for batch agents; resumable (episodes already done are skipped) and reported as each episode ends.

The plan (:func:`plan`) lists every episode as a :class:`Job` ``(seed, slot, task_id)``: per seed, the tasks
the :class:`~sapo_gym.records.EvaluationMode` picks, ``slot`` being the index among them.
:func:`run_episodes` plays the jobs not done yet and returns every record in plan order, so the result
does not depend on which request came back first.

* **Pool** (:func:`run_pool`), for a :class:`~sapo_gym.interfaces.TurnResponder` (``respond(observation, info,
  turn_seed) -> {"output", ...}``, thread-safe: :class:`agents.openai_agent.OpenAIChatAgent`, or an isolated agent
  whose child has one):
  one worker thread per env keeps up to ``len(envs)`` requests in flight; the envs are reset and stepped
  in the calling thread, and an env's next turn is sent as soon as it has stepped, whatever the others
  do. ``turn_seed`` (:func:`turn_seed`) is a function of the episode's seed, slot, task and turn, so a
  seeded request is the same whichever order requests are sent in.
* **Lockstep** (:func:`run_lockstep`), for a :class:`~sapo_gym.interfaces.BatchActor` (``act`` on a batch; HF
  models): the envs of a batch act together (:func:`run_batch`); :func:`sapo_gym.evaluation.evaluate` plays this way.

Both report to one :class:`~sapo_gym.interfaces.EpisodeProgress`, when given: ``in_flight`` (episodes in progress)
is set, ``turn()`` is called per env step and ``episode(turns)`` per ended episode (:class:`sapo_gym.accounting.Progress`).

A failed request (the agent raised: a server that stayed down past the retry budget) ends the run with
:class:`EvaluationAborted`, naming the episode; the episodes that ended before it were reported already.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from sapo_gym.bounds import bound_output, clean_usage
from sapo_gym.core import public_info
from sapo_gym.interfaces import BatchActor, EpisodeProgress, TurnResponder
from sapo_gym.records import EVERY_TASK, EpisodeRecord, EvaluationMode, is_privileged, new_record, record_step

__all__ = [
    "Job",
    "plan",
    "turn_seed",
    "as_reply",
    "run_pool",
    "run_batch",
    "batches",
    "run_lockstep",
    "run_episodes",
    "EvaluationAborted",
]


@dataclass(frozen=True)
class Job:
    """One episode of the plan: the ``slot``-th episode of ``seed`` plays ``task_id``."""

    seed: int
    slot: int
    task_id: str

    @property
    def key(self) -> tuple[int, int]:
        return (self.seed, self.slot)


class EvaluationAborted(RuntimeError):
    """The agent failed on ``job`` (``cause``: its exception); the episodes reported before it stay done."""

    def __init__(self, job: Job, cause: BaseException):
        super().__init__(f"episode (task {job.task_id!r}, seed {job.seed}) failed: {type(cause).__name__}: {cause}")
        self.job, self.cause = job, cause


def plan(task_ids: Sequence[str], seeds: Iterable[int], mode: EvaluationMode = EVERY_TASK) -> list[Job]:
    """Every episode, in (seed, slot) order."""
    return [
        Job(int(seed), slot, task) for seed in seeds for slot, task in enumerate(mode.task_ids(task_ids, int(seed)))
    ]


def turn_seed(job: Job, turn: int) -> int:
    """A 31-bit seed for the request of ``turn`` (0-based) of ``job``: the same in every run and resume."""
    return zlib.crc32(f"{job.seed}|{job.slot}|{job.task_id}|{turn}".encode()) & 0x7FFFFFFF


def as_reply(reply: Any) -> dict[str, Any]:
    """``respond``'s answer as a dict (a bare string is its ``output``); TypeError without an ``output`` string.
    The output is bounded and the accounting cleaned as :mod:`sapo_gym.bounds` says (OutputError for an output no
    log could hold)."""
    reply = dict(reply) if isinstance(reply, dict) else {"output": reply}
    if not isinstance(reply.get("output"), str):
        raise TypeError(f"respond returned no 'output' string: {str(reply)[:200]}")
    return {**reply, "output": bound_output(reply["output"]), **clean_usage(reply)}


def _worker(agent: TurnResponder, work: queue.Queue, results: queue.Queue, clock: Callable[[], float]) -> None:
    while True:
        item = work.get()
        if item is None:
            return
        index, observation, info, seed = item
        start = clock()
        try:
            reply = as_reply(agent.respond(observation, info, seed))
            if reply["latency_s"] is None:
                reply["latency_s"] = clock() - start
            results.put((index, reply, None))
        except BaseException as exc:  # handed to the calling thread, which ends the run
            results.put((index, None, exc))


def _next_result(results: queue.Queue) -> tuple[int, Any, BaseException | None]:
    while True:  # a timeout keeps the calling thread responsive to Ctrl-C
        try:
            return results.get(timeout=0.2)
        except queue.Empty:
            continue


def run_pool(
    agent: TurnResponder,
    envs: Sequence[gym.Env],
    jobs: Sequence[Job],
    on_end: Callable[[Job, EpisodeRecord], None] | None = None,
    progress: EpisodeProgress | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> dict[tuple[int, int], EpisodeRecord]:
    """Play ``jobs`` with up to ``len(envs)`` requests in flight (see the module docstring)."""
    shown = (lambda info: info) if is_privileged(agent) else public_info
    work: queue.Queue = queue.Queue()
    results: queue.Queue = queue.Queue()
    threads = [
        threading.Thread(target=_worker, args=(agent, work, results, clock), daemon=True, name=f"pool-{i}")
        for i in range(min(len(envs), len(jobs)))
    ]
    for thread in threads:
        thread.start()
    waiting, free = deque(jobs), list(range(len(threads)))[::-1]
    state: dict[int, tuple[Job, EpisodeRecord]] = {}
    done: dict[tuple[int, int], EpisodeRecord] = {}
    try:
        while waiting or state:
            while free and waiting:
                index, job = free.pop(), waiting.popleft()
                obs, info = envs[index].reset(seed=job.seed, options={"task_id": job.task_id})
                state[index] = (job, new_record(info, job.task_id, job.seed, is_privileged(agent)))
                work.put((index, obs, shown(info), turn_seed(job, 0)))
            if progress is not None:
                progress.in_flight = len(state)
            index, reply, error = _next_result(results)
            job, rec = state[index]
            if error is not None:
                raise EvaluationAborted(job, error) from error
            obs, reward, terminated, truncated, info = envs[index].step(reply["output"])
            record_step(rec, reply["output"], reward, info, reply)
            if progress is not None:
                progress.turn()
            if terminated or truncated:
                del state[index]
                free.append(index)
                done[job.key] = rec
                if on_end is not None:
                    on_end(job, rec)
                if progress is not None:
                    progress.episode(rec.steps)
            else:
                work.put((index, obs, shown(info), turn_seed(job, rec.steps)))
    finally:
        for _ in threads:
            work.put(None)
    return done


class _ReportFailed(Exception):
    """``on_end`` raised ``cause``: it ends the run as it is, not as a failure of the agent."""

    def __init__(self, cause: Exception):
        super().__init__(str(cause))
        self.cause = cause


def run_batch(
    agent: BatchActor,
    envs: Sequence[gym.Env],
    task_ids: Sequence[str],
    seed: int,
    progress: EpisodeProgress | None = None,
    on_end: Callable[[int, EpisodeRecord], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> list[EpisodeRecord]:
    """Play one episode of each of ``task_ids`` (seeded ``seed``) in lockstep on ``envs``: the agent acts on the
    active envs together. ``on_end(i, record)`` is called as episode ``i`` ends, then ``progress`` hears of it;
    with a ``clock`` each turn's ``latency_s`` is its batch call's (without one, none is recorded: the records
    are then reproducible)."""
    privileged = is_privileged(agent)
    shown = (lambda info: info) if privileged else public_info
    records: list[EpisodeRecord] = []
    obs: list[str] = []
    infos: list[dict[str, Any]] = []
    for env, task_id in zip(envs, task_ids):
        o, info = env.reset(seed=seed, options={"task_id": task_id})
        obs.append(o)
        infos.append(info)
        records.append(new_record(info, task_id, seed, privileged))
    agent.reset(len(envs))
    active = list(range(len(envs)))
    while active:
        start = clock() if clock is not None else 0.0
        outputs = agent.act([obs[i] for i in active], [shown(infos[i]) for i in active])
        latency = clock() - start if clock is not None else None
        if not isinstance(outputs, (list, tuple)) or len(outputs) != len(active):
            raise TypeError(f"act must return one output per observation ({len(active)}), got {str(outputs)[:200]}")
        outputs = [bound_output(out) for out in outputs]  # what the env steps is what the records hold
        still = []
        for i, out in zip(active, outputs):
            o, r, term, trunc, info = envs[i].step(out)
            record_step(records[i], out, r, info, {"latency_s": latency})
            obs[i], infos[i] = o, info
            if progress is not None:
                progress.turn()
            if term or trunc:
                if on_end is not None:
                    on_end(i, records[i])
                if progress is not None:
                    progress.episode(records[i].steps)
            else:
                still.append(i)
        active = still
    return records


def batches(task_ids: Sequence[str], size: int) -> Iterable[list[str]]:
    """Consecutive batches of at most ``size`` tasks, none holding a task twice (agents may keep per-task memory)."""
    batch: list[str] = []
    for task_id in task_ids:
        if len(batch) == size or task_id in batch:
            yield batch
            batch = []
        batch.append(task_id)
    if batch:
        yield batch


def _chunks(jobs: Sequence[Job], size: int) -> Iterable[list[Job]]:
    """Consecutive batches of one seed, as :func:`batches` cuts that seed's tasks."""
    for _, group in itertools.groupby(jobs, key=lambda job: job.seed):
        rest = list(group)
        for batch in batches([job.task_id for job in rest], size):
            chunk, rest = rest[: len(batch)], rest[len(batch) :]
            yield chunk


def run_lockstep(
    agent: BatchActor,
    envs: Sequence[gym.Env],
    jobs: Sequence[Job],
    on_end: Callable[[Job, EpisodeRecord], None] | None = None,
    progress: EpisodeProgress | None = None,
    clock: Callable[[], float] | None = time.monotonic,
) -> dict[tuple[int, int], EpisodeRecord]:
    """Play ``jobs`` in lockstep batches of ``len(envs)`` (batch agents); ``clock`` None times no request."""
    done: dict[tuple[int, int], EpisodeRecord] = {}
    for chunk in _chunks(jobs, len(envs)):

        def ended(i: int, rec: EpisodeRecord, chunk: list[Job] = chunk) -> None:
            done[chunk[i].key] = rec
            try:
                if on_end is not None:
                    on_end(chunk[i], rec)
            except Exception as exc:  # the report failed (the log's disk is full): not the agent's failure
                raise _ReportFailed(exc) from exc

        if progress is not None:
            progress.in_flight = len(chunk)
        try:
            run_batch(
                agent,
                envs[: len(chunk)],
                [j.task_id for j in chunk],
                chunk[0].seed,
                progress,
                on_end=ended,
                clock=clock,
            )
        except _ReportFailed as failed:
            raise failed.cause from None
        except Exception as exc:  # the first episode of the batch that had not ended names the failure
            failed = next((j for j in chunk if j.key not in done), chunk[-1])
            raise EvaluationAborted(failed, exc) from exc
    return done


def run_episodes(
    agent: BatchActor | TurnResponder,
    envs: Sequence[gym.Env],
    jobs: Sequence[Job],
    *,
    done: dict[tuple[int, int], EpisodeRecord] | None = None,
    on_end: Callable[[Job, EpisodeRecord], None] | None = None,
    progress: EpisodeProgress | None = None,
    pool: bool | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> list[EpisodeRecord]:
    """Every job's record in plan order: ``done`` ones as given, the others played (pool when the agent answers one
    env at a time and ``pool`` is not False; lockstep otherwise)."""
    done = dict(done or {})
    pending = [job for job in jobs if job.key not in done]
    responds = isinstance(agent, TurnResponder)
    use_pool = responds if pool is None else pool
    if use_pool and not responds:
        raise ValueError(
            f"agent {getattr(agent, 'name', agent)!r} acts on batches only (no respond): it cannot run in the pool"
        )
    if pending:
        runner = run_pool if use_pool else run_lockstep
        done.update(runner(agent, envs, pending, on_end, progress, clock))
    return [done[job.key] for job in jobs]
