"""``sapo-gym leaderboard serve --workers N``: N server processes forked from one supervisor, on one listening socket.

The parent binds the socket (:func:`leaderboard.server.serving.listen`) and forks the workers; each builds its own
app after the fork (no database connection, lock or thread crosses a fork) and runs the bounded werkzeug server on
the inherited socket, so each keeps every per-connection limit (``--max-connections`` is per worker). The kernel
hands each new connection to one of the workers waiting on the socket.

The parent only supervises: a worker that dies (a crash, ``kill -9``) is logged and replaced, at most
``restarts_per_minute`` times a minute (a worker that dies at start-up does not spin the machine: later restarts
wait their turn); SIGTERM or SIGINT to the parent closes its copy of the socket and ends every worker (SIGTERM: each
drains the requests it serves, :func:`leaderboard.server.serving.serve`; SIGKILL after ``grace_seconds``) and waits
for them. A worker whose parent dies (even by ``kill -9``) is sent SIGTERM by the kernel (Linux's
``PR_SET_PDEATHSIG``), so no worker outlives its supervisor to serve on a stale socket.
"""

from __future__ import annotations

import collections
import ctypes
import logging
import os
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Callable

__all__ = ["Supervisor", "run"]

log = logging.getLogger(__name__)
_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGCHLD}
_PR_SET_PDEATHSIG = 1
_TICK = 1.0
"""Seconds the supervisor waits at most between checks: SIGCHLD wakes it sooner; the tick only bounds a lost wakeup."""


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # serve() stops on it and closes its server


def _die_with_parent(parent: int) -> None:
    """Ask the kernel to SIGTERM this process when its parent dies; exit now if it already has (Linux only)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return  # not Linux: the supervisor's own shutdown still ends its workers
    if os.getppid() != parent:
        os._exit(0)


def _child(index: int, worker: Callable[[int], None], parent: int, mask: set[signal.Signals]) -> None:
    """The forked process: its own signal handling, then ``worker(index)``; never returns to the caller."""
    code = 0
    try:
        signal.signal(signal.SIGTERM, _interrupt)
        signal.signal(signal.SIGINT, _interrupt)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a SIGTERM that came meanwhile is delivered now
        _die_with_parent(parent)
        worker(index)
    except KeyboardInterrupt:
        pass
    except BaseException:  # noqa: BLE001 - a worker's crash is reported and ends only this process
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class Supervisor:
    """Forks ``workers`` processes running ``worker(index)`` and keeps that many alive until SIGTERM or SIGINT."""

    def __init__(self, workers: int, worker: Callable[[int], None], restarts_per_minute: int = 10,
                 grace_seconds: float = 5.0, on_stop: Callable[[], None] | None = None):
        if workers < 1 or restarts_per_minute < 1:
            raise ValueError(f"workers and restarts_per_minute must be >= 1, got {workers} and {restarts_per_minute}")
        self.workers, self.worker = workers, worker
        self.restarts_per_minute, self.grace_seconds = restarts_per_minute, grace_seconds
        self.on_stop = on_stop
        """Called once the supervisor stops, before it signals the workers (``run`` closes the listening socket)."""
        self.pids: dict[int, int] = {}  # pid -> worker index
        self._due: dict[int, float] = {}  # worker index -> when it is restarted (monotonic)
        self._restarts: collections.deque[float] = collections.deque()  # restart times, in order

    def run(self) -> int:
        """Supervise until SIGTERM or SIGINT; then end the workers, wait for them and return 0."""
        if threading.active_count() > 1:  # a thread's locks (logging's, a pool's) would stay held in the children
            raise RuntimeError("fork the workers from a process without threads")
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)  # taken by sigtimedwait below, never mid-fork
        try:
            for index in range(self.workers):
                self._start(index, mask)
            while True:
                wait = min([_TICK, *(max(0.0, t - time.monotonic()) for t in self._due.values())])
                stop = [s for s in _take_signals(wait) if s != signal.SIGCHLD]
                if stop:  # before any restart: a SIGTERM to the whole group also ends the workers themselves
                    log.info("supervisor: %s, stopping %d worker(s)", stop[0].name, len(self.pids))
                    return 0
                self._reap()
                self._restart_due(mask)
        finally:
            if self.on_stop is not None:
                self.on_stop()
            self._stop_all()
            _take_signals(0.0)  # a second SIGTERM during the shutdown does not kill this process once unblocked
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def _start(self, index: int, mask: set[signal.Signals]) -> None:
        sys.stdout.flush()
        sys.stderr.flush()  # nothing buffered is written twice, once by each process
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            _child(index, self.worker, parent, mask)
        self.pids[pid] = index

    def _reap(self) -> None:
        """Collect the workers that died and schedule their restarts (bounded: :attr:`restarts_per_minute`)."""
        while self.pids:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
            index = self.pids.pop(pid, None)
            if index is None:
                continue
            now = time.monotonic()
            while self._restarts and self._restarts[0] <= now - 60.0:
                self._restarts.popleft()
            # no 60 s window holds more than restarts_per_minute restarts
            full = len(self._restarts) >= self.restarts_per_minute
            due = max(now, self._restarts[-self.restarts_per_minute] + 60.0) if full else now
            self._restarts.append(due)
            self._due[index] = due
            log.warning("worker %d pid %d %s; restarting it%s", index, pid, _describe(status),
                        "" if due <= now else f" in {due - now:.0f} s ({self.restarts_per_minute} restarts a minute at most)")

    def _restart_due(self, mask: set[signal.Signals]) -> None:
        now = time.monotonic()
        for index in [i for i, due in self._due.items() if due <= now]:
            del self._due[index]
            self._start(index, mask)

    def _stop_all(self) -> None:
        """SIGTERM every worker, SIGKILL those still alive after :attr:`grace_seconds`, and reap them all."""
        for pid in self.pids:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_seconds
        while self.pids and time.monotonic() < deadline:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                time.sleep(0.05)
            else:
                self.pids.pop(pid, None)
        for pid in list(self.pids):
            log.warning("worker %d pid %d did not stop within %g s: killed", self.pids[pid], pid, self.grace_seconds)
            _signal(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            del self.pids[pid]


def _take_signals(timeout: float) -> list[signal.Signals]:
    """The blocked signals that arrived, waiting at most ``timeout`` seconds for the first one."""
    taken = []
    info = signal.sigtimedwait(_SIGNALS, timeout)
    while info is not None:
        taken.append(signal.Signals(info.si_signo))
        info = signal.sigtimedwait(_SIGNALS, 0)
    return taken


def _signal(pid: int, signum: signal.Signals) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass  # already dead: the wait reaps it


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with {os.waitstatus_to_exitcode(status)}"


def run(listener: socket.socket, workers: int, worker: Callable[[int], None], restarts_per_minute: int = 10,
        grace_seconds: float = 5.0) -> int:
    """Serve with ``workers`` processes forked from this one: ``worker(index)`` runs in each (it builds the app and
    serves on ``listener``) until SIGTERM or SIGINT here. The listener is made non-blocking: a worker woken for a
    connection another worker accepted first goes back to waiting instead of blocking in ``accept``."""
    listener.setblocking(False)
    try:
        # the parent's copy of the socket closes first: while the workers drain, a new connection is refused, not queued
        return Supervisor(workers, worker, restarts_per_minute, grace_seconds, on_stop=listener.close).run()
    finally:
        listener.close()
