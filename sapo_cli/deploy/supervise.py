"""The serve commands' process: the app server and nginx as its children, started in order and stopped in reverse.

* The app server starts first, on a Unix socket this process bound (so requests nginx passes on wait in its backlog
  while the workers boot), then nginx on the public socket; :meth:`Supervisor.wait_ready` asks the app server a
  request through its socket before the serve command announces its address.
* Each child runs in a session of its own (a Ctrl-C at the terminal reaches this process only, which then stops them
  in order) and is sent SIGTERM by the kernel if this process dies, even by ``kill -9`` (Linux's
  ``PR_SET_PDEATHSIG``), so no child outlives its supervisor.
* SIGTERM or SIGINT: nginx stops accepting and finishes the requests in progress (SIGQUIT, nginx's graceful
  shutdown), then the app server finishes its own (SIGTERM); each gets ``drain_seconds``, then SIGKILL. A further
  signal meanwhile changes nothing: the stop is bounded anyway.
* A child that exits by itself stops the other and the command (exit status 1): the operator's service manager, not
  this process, decides about restarts.
"""

from __future__ import annotations

import ctypes
import http.client
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Child", "Supervisor", "unix_listener"]

log = logging.getLogger(__name__)
_PR_SET_PDEATHSIG = 1
_POLL_SECONDS = 0.1
_UNIX_PATH_MAX = 107
"""Longest path of a Unix socket (``sun_path`` holds 108 bytes with the terminating NUL)."""


@dataclass
class Child:
    """A supervised process and how it is asked to stop gracefully."""

    name: str
    proc: subprocess.Popen
    stop_signal: signal.Signals


def unix_listener(path: Path) -> socket.socket:
    """A listening Unix socket at ``path`` (in a private run directory: only its owner can connect)."""
    if len(os.fsencode(path)) > _UNIX_PATH_MAX:
        raise ValueError(f"the socket path {path} is longer than {_UNIX_PATH_MAX} bytes: use a shorter TMPDIR")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(1024)
    return sock


def _die_with_parent(parent: int) -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux); exit at once if it already has."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return  # not Linux: the supervisor's own stop still ends its children
    if os.getppid() != parent:
        os._exit(1)


def _child_setup(parent: int, batch: bool) -> None:
    """In the child before exec: :func:`_die_with_parent`, and Linux's ``SCHED_BATCH`` when ``batch`` (kept across
    exec; an unprivileged process may take it; ignored where the platform has no such policy)."""
    _die_with_parent(parent)
    if batch and hasattr(os, "SCHED_BATCH"):
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


class Supervisor:
    """Starts children (:meth:`start`), then :meth:`run` waits for a signal or a child's exit and stops them all."""

    def __init__(self, drain_seconds: float):
        if drain_seconds < 0:
            raise ValueError(f"drain seconds must be >= 0, got {drain_seconds}")
        self.drain_seconds = drain_seconds
        self.children: list[Child] = []
        self._stop = threading.Event()
        self._signal: str | None = None
        self._previous: dict[signal.Signals, object] = {}

    def start(
        self,
        name: str,
        argv: Sequence[str],
        stop_signal: signal.Signals,
        env: dict[str, str] | None = None,
        pass_fds: Sequence[int] = (),
        batch: bool = False,
    ) -> Child:
        """Start ``argv`` as a supervised child (start the children before any thread: it forks); ``batch``: under
        Linux's ``SCHED_BATCH`` scheduling policy (:attr:`sapo_cli.deploy.serve.AppServer.batch_scheduling`)."""
        parent = os.getpid()
        try:
            proc = subprocess.Popen(
                list(argv),
                env=env,
                pass_fds=tuple(pass_fds),
                start_new_session=True,
                preexec_fn=lambda: _child_setup(parent, batch),
            )
        except subprocess.SubprocessError as exc:  # the policy refused (a sandbox's syscall filter): say so, loudly
            why = "under SCHED_BATCH (run it with --scheduling other)" if batch else "its child set-up failed"
            raise RuntimeError(f"could not start {name} {why}: {exc}") from exc
        child = Child(name, proc, stop_signal)
        self.children.append(child)
        return child

    def wait_ready(self, upstream: Path, path: str, timeout: float) -> bytes:
        """Wait until the app server answers ``GET path`` on its socket (any status below 500): the answer's body.
        RuntimeError when a child exits first or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._stop.is_set():
                raise RuntimeError(f"{self._signal} during start-up")
            self._check_children()
            conn = _UnixHTTPConnection(str(upstream), timeout=max(0.1, deadline - time.monotonic()))
            try:
                conn.request("GET", path, headers={"X-Forwarded-For": "127.0.0.1"})
                response = conn.getresponse()
                if response.status < 500:
                    return response.read()
            except (OSError, http.client.HTTPException):
                pass
            finally:
                conn.close()
            time.sleep(_POLL_SECONDS)
        raise RuntimeError(f"the app server did not answer GET {path} within {timeout:g} s")

    def _check_children(self) -> None:
        for child in self.children:
            if child.proc.poll() is not None:
                raise RuntimeError(
                    f"{child.name} exited with {child.proc.returncode} at start-up (see its output above)"
                )

    def _on_signal(self, signum: int, frame: object) -> None:
        if self._signal is None:
            self._signal = signal.Signals(signum).name
        self._stop.set()

    def __enter__(self) -> Supervisor:
        """SIGTERM and SIGINT stop the supervision from here on (:meth:`wait_ready` included)."""
        self._previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop every child, then restore the signal handlers."""
        try:
            self.stop()
        finally:
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)

    def run(self) -> int:
        """Until SIGTERM, SIGINT or a child's exit; then stop every child (see the module docstring). 0 after a
        signal, 1 after a child's exit."""
        exited = None
        while exited is None and not self._stop.wait(_POLL_SECONDS):
            exited = next((c for c in self.children if c.proc.poll() is not None), None)
        if exited is not None:
            log.error("%s exited with %s: stopping", exited.name, exited.proc.returncode)
        else:
            log.info("%s: stopping %s", self._signal, ", ".join(c.name for c in reversed(self.children)))
        self.stop()
        return 1 if exited is not None else 0

    def stop(self) -> None:
        """Stop the children, the last started first, each given ``drain_seconds`` before SIGKILL (once)."""
        while self.children:
            _stop_child(self.children.pop(), self.drain_seconds)


def _stop_child(child: Child, drain_seconds: float) -> None:
    if child.proc.poll() is None:
        try:
            child.proc.send_signal(child.stop_signal)
        except ProcessLookupError:
            pass
    try:
        child.proc.wait(drain_seconds + 5.0)  # the child's own drain is drain_seconds; 5 s to exit after it
    except subprocess.TimeoutExpired:
        log.warning("%s did not stop within %g s: killed", child.name, drain_seconds + 5.0)
        child.proc.kill()
        child.proc.wait()
