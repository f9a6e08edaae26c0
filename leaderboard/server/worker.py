"""The replay verifier: a background thread (or ``sapo-gym leaderboard verify``) draining the queue.

Each :meth:`Verifier.run_once` leases the job whose turn it is (:mod:`leaderboard.server.queue`),
replays one *slice* of its episodes (``slice_seconds`` of work, at most ``slice_episodes``)
while a heartbeat thread renews the lease (for ``stall_seconds`` at most: a hung env does not hold a
submission forever), then records the verdict or its progress and puts the
job at the back of the line. A worker that lost its lease (it stalled past ``lease_seconds``)
writes nothing. Episodes are read from the stored chunks of 50 (:mod:`leaderboard.server.summaries`),
never the whole bundle at once; the last few chunks and one env per board are kept between slices.

A verdict is the submission's, never the worker's set-up: a worker that cannot build a board's env as the board
has it (:class:`leaderboard.replay.SetupError`: a backend, data or the private seed missing, another private task
count or noun rule, hence another spec hash) records no verdict: the submission stays pending, marked
"not verifiable here", and this worker leaves that board's jobs to others for ``retry_seconds``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from leaderboard import private
from leaderboard.replay import SETUP_ERRORS, SetupError, board_env, replay_episode
from leaderboard.server import queue, summaries
from leaderboard.server.db import Submission
from leaderboard.server.store import Store

__all__ = ["Verifier"]

log = logging.getLogger(__name__)


class Verifier:
    """Replays pending submissions slice by slice and records verified/failed with the reason."""

    def __init__(
        self,
        store: Store,
        poll_seconds: float = 1.0,
        lease_seconds: float = 60.0,
        slice_seconds: float = 5.0,
        slice_episodes: int | None = None,
        stall_seconds: float = 300.0,
        retry_seconds: float = 600.0,
    ):
        self.store = store
        self.poll_seconds = poll_seconds
        self.lease_seconds = lease_seconds
        self.slice_seconds = slice_seconds
        self.slice_episodes = slice_episodes
        self.stall_seconds = stall_seconds
        """A slice still running after this long is taken as hung: its lease is no longer renewed (it then expires)."""
        self.retry_seconds = retry_seconds
        """After a board's env could not be built here, its jobs are left to other workers this long."""
        self._unbuildable: dict[str, float] = {}
        """spec hash -> when this worker tries to build that board's env again (monotonic seconds)."""
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        """This worker's name on its leases."""
        self.wake = threading.Event()
        """Set by the API after a submission, so the worker does not wait a full poll interval."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._chunks: OrderedDict[tuple[int, int], list[dict[str, Any]]] = OrderedDict()
        self._envs: dict[tuple[str, str], Any] = {}

    # ---------------------------------------------------------------- caches
    def _episode(self, sid: int, index: int) -> dict[str, Any]:
        key = (sid, index // summaries.CHUNK)
        if key not in self._chunks:
            self._chunks[key] = summaries.chunk(self.store, sid, key[1])
            while len(self._chunks) > 4:
                self._chunks.popitem(last=False)
        self._chunks.move_to_end(key)
        return self._chunks[key][index % summaries.CHUNK]

    def _env(self, row: Submission) -> Any:
        """The env of the row's board (:class:`SetupError` when this machine cannot build it as the board has it)."""
        key = (row.env_id, row.split)
        if key not in self._envs:
            self._envs[key] = board_env(row.env_id, row.split, row.spec_hash)
        elif self._envs[key].unwrapped.spec_hash() != row.spec_hash:  # the board's env was rebuilt otherwise since
            raise SetupError(
                f"this verifier's {row.env_id}:{row.split} env has spec hash "
                f"{self._envs[key].unwrapped.spec_hash()}, the board's is {row.spec_hash}"
            )
        return self._envs[key]

    def _skipped(self) -> list[str]:
        """Boards whose env this worker could not build lately (their jobs are left to other workers)."""
        now = time.monotonic()
        self._unbuildable = {h: t for h, t in self._unbuildable.items() if t > now}
        return sorted(self._unbuildable)

    def _drop_env(self, row: Submission) -> None:
        env = self._envs.pop((row.env_id, row.split), None)
        if env is not None:
            env.close()

    @contextmanager
    def _heartbeat(self, sid: int) -> Iterator[threading.Event]:
        """Renew the lease every third of its length while the body runs (up to ``stall_seconds``);
        the event is set if it was lost or given up."""
        lost, done, start = threading.Event(), threading.Event(), time.monotonic()

        def beat() -> None:
            while not done.wait(self.lease_seconds / 3):
                if time.monotonic() - start > self.stall_seconds:  # an env hangs: let another worker take over
                    log.warning(
                        "verifier: slice of submission %s runs past %.0f s; its lease is left to expire",
                        sid,
                        self.stall_seconds,
                    )
                    lost.set()
                    return
                try:
                    if not queue.renew(self.store, sid, self.owner, self.lease_seconds):
                        lost.set()
                        return
                except Exception:  # the database is briefly unavailable: try again at the next beat
                    log.exception("verifier: lease renewal of submission %s failed", sid)

        thread = threading.Thread(target=beat, name=f"sapo-gym-lease-{sid}", daemon=True)
        thread.start()
        try:
            yield lost
        finally:
            done.set()
            thread.join()

    # ---------------------------------------------------------------- one slice
    def _replay_slice(self, row: Submission, start: int) -> tuple[str | None, int]:
        """Replay episodes from ``start`` for one slice; (the first mismatch or None, the next episode)."""
        env = self._env(row)  # the row's board: admission checked it is the bundle's
        index = start
        deadline = time.monotonic() + self.slice_seconds
        while index < row.episodes:
            ep = self._episode(row.id, index)
            try:
                problem = replay_episode(env, ep)
            except SETUP_ERRORS as exc:  # a module, a file or memory missing here: not the episode's doing
                raise SetupError(f"this verifier failed to run the env: {type(exc).__name__}: {exc}") from None
            if problem is not None:
                return f"episode {index} (task {ep['task_id']}, seed {ep['seed']}): {problem}", index
            index += 1
            if time.monotonic() >= deadline or (self.slice_episodes and index - start >= self.slice_episodes):
                break
        return None, index

    def run_once(self) -> int | None:
        """Replay one slice of the submission whose turn it is; its id, or None when nothing is free."""
        claimed = queue.claim(self.store, self.owner, self.lease_seconds, skip=self._skipped())
        if claimed is None:
            return None
        sid, row = claimed.submission_id, self.store.get(claimed.submission_id)
        assert row is not None
        total, setup = row.episodes, None
        with self._heartbeat(sid) as lost:
            try:
                problem, next_index = self._replay_slice(row, claimed.start)
            except SetupError as exc:  # this worker cannot reproduce the board's env: no verdict from it
                setup, problem, next_index = str(exc), None, claimed.start
                self._drop_env(row)
            except Exception as exc:  # a crash in an env is a failed verification, never a dead worker
                log.exception("replay of submission %s crashed", sid)
                problem, next_index = f"replay crashed: {type(exc).__name__}: {exc}", claimed.start
                self._drop_env(row)
        if lost.is_set():
            log.warning("verifier: lost the lease of submission %s; its result is not recorded", sid)
        if setup is not None:
            self._unbuildable[row.spec_hash] = time.monotonic() + self.retry_seconds
            log.warning(
                "verifier: submission %s is not verifiable here (left pending): %s",
                sid,
                private.redact(row.split, setup),
            )
            queue.defer(self.store, sid, self.owner, private.redact(row.split, setup))
            return sid
        if problem is None and next_index < total:
            queue.release(self.store, sid, self.owner, next_index)
            return sid
        for key in [k for k in self._chunks if k[0] == sid]:
            del self._chunks[key]
        message = private.redact(row.split, problem or f"all {total} episodes reproduced exactly")  # no private text
        if queue.finish(self.store, sid, self.owner, problem is None, message):
            log.info("submission %s: %s (%s)", sid, "verified" if problem is None else "failed", message)
        return sid

    def drain(self) -> int:
        """Verify until no job is free; how many submissions were finished."""
        finished = 0
        while (sid := self.run_once()) is not None:
            row = self.store.get(sid)
            finished += row is not None and row.status in ("verified", "failed")
        return finished

    def _loop(self) -> None:
        try:
            queue.reopen_setup_failures(self.store)  # failed by an older verifier's set-up, not by their episodes
        except Exception:
            log.exception("verifier: could not reopen submissions failed by a verifier's set-up")
        while not self._stop.is_set():
            try:
                if self.run_once() is not None:
                    continue
            except Exception:  # e.g. the database is briefly unavailable
                log.exception("verifier: queue error")
            self.wake.wait(self.poll_seconds)
            self.wake.clear()

    def start(self) -> Verifier:
        self._thread = threading.Thread(target=self._loop, name="sapo-gym-verifier", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self.wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for env in self._envs.values():
            env.close()
        self._envs.clear()
