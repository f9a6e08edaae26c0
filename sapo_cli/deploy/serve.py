"""One way to serve: the app server on a private Unix socket, nginx in front on the public port, both supervised.

:func:`bind` takes the public port first (``--port 0``: a free one), so the caller knows the address before it builds
the app's settings; :func:`run` renders and checks the nginx config, starts the app server and nginx
(:mod:`.supervise`), waits until the app server answers, calls ``on_ready`` and supervises until stopped.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sapo_cli.deploy import nginx
from sapo_cli.deploy.supervise import Supervisor, unix_listener

__all__ = ["AppServer", "Front", "add_scheduling_option", "bind", "run"]

START_SECONDS = 120.0
"""How long the app server may take to answer its first request (importing, building its envs or boards)."""


@dataclass
class Front:
    """The public socket, bound before anything else starts."""

    sock: socket.socket
    address: str
    """As nginx's ``listen`` names it."""
    port: int


@dataclass
class AppServer:
    """The server behind nginx."""

    name: str
    command: Callable[[int], list[str]]
    """Its command line, given the file descriptor of the listening Unix socket it inherits."""
    stop_signal: signal.Signals
    """Its graceful stop (it finishes the requests in progress within the drain)."""
    ready_path: str
    """A cheap ``GET`` that answers once the server serves."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables added to this process's environment for it."""
    access_log: bool = True
    """nginx logs every request on this command's standard output (off: a client driving thousands of steps would
    fill the log, or a pipe nobody reads)."""
    processes: int = 1
    """Copies of the server started, each on a socket of its own; nginx sends each new connection to the one with the
    fewest open (the first also gets every ``/sessions`` request: see ``nginx.conf``)."""
    batch_scheduling: bool = False
    """Run the server's processes and nginx under Linux's ``SCHED_BATCH``: the scheduler takes them for CPU-bound work
    and does not preempt a running process for their wake-ups, so each runs longer and takes more of its sockets'
    events a wake-up (for a server that keeps the cores busy; docs/remote.md "The server under load")."""

    def __post_init__(self) -> None:
        if self.processes < 1:
            raise ValueError(f"an app server needs at least 1 process, got {self.processes}")

    def child_name(self, index: int) -> str:
        """The supervised child's name: the server's, numbered when there are several."""
        return self.name if self.processes == 1 else f"{self.name}-{index}"


def add_scheduling_option(p: argparse.ArgumentParser) -> None:
    """``--scheduling``: :attr:`AppServer.batch_scheduling` (``batch``, the default) or Linux's default policy."""
    p.add_argument(
        "--scheduling",
        choices=("batch", "other"),
        default="batch",
        help="Linux CPU scheduling policy of the server's processes and nginx: batch (SCHED_BATCH: no preemption "
        "at a wake-up, so a process runs longer and serves more sessions' frames a wake-up; the most steps a second "
        "on busy cores) or other (SCHED_OTHER, Linux's default: quicker to run at a wake-up on cores shared with "
        "interactive work)",
    )


def bind(host: str, port: int) -> Front:
    """The public listening socket (nginx is checked for first, so its absence is the first thing said)."""
    nginx.nginx_binary()
    sock, address = nginx.listen(host, port)
    return Front(sock, address, sock.getsockname()[1])


def run(
    front: Front,
    app: AppServer,
    args: argparse.Namespace,
    max_body_bytes: int,
    upstream_timeout: float,
    on_ready: Callable[[bytes], None],
) -> int:
    """Serve ``app`` behind nginx on ``front`` until SIGTERM or SIGINT (0) or a child's exit (1); ``args`` holds
    :func:`~sapo_cli.deploy.nginx.add_front_options`'s settings. ``on_ready`` gets the answer to ``app.ready_path``."""
    with tempfile.TemporaryDirectory(prefix="sapo-serve-") as tmp:
        run_dir = Path(tmp)
        (run_dir / "temp").mkdir()
        upstream_paths = [run_dir / ("app.sock" if i == 0 else f"app-{i}.sock") for i in range(app.processes)]
        config = nginx.front_config(args, front.address, upstream_paths, max_body_bytes, upstream_timeout)
        (run_dir / "nginx.conf").write_text(nginx.render(config, "/dev/stdout" if app.access_log else "off"))
        nginx.check(run_dir)
        with Supervisor(args.drain_seconds) as supervisor:
            try:
                _start(supervisor, app, upstream_paths, front, run_dir)
                answer = [supervisor.wait_ready(path, app.ready_path, START_SECONDS) for path in upstream_paths][0]
            except RuntimeError as exc:
                print(f"error: {exc}", file=sys.stderr, flush=True)
                return 1
            on_ready(answer)
            return supervisor.run()


def _start(supervisor: Supervisor, app: AppServer, upstream_paths: list[Path], front: Front, run_dir: Path) -> None:
    """The app server's processes, each on its Unix socket, then nginx on the public socket."""
    for index, path in enumerate(upstream_paths):
        with unix_listener(path) as upstream:
            fd = upstream.fileno()
            supervisor.start(
                app.child_name(index),
                app.command(fd),
                app.stop_signal,
                env={**os.environ, **app.env},
                pass_fds=[fd],
                batch=app.batch_scheduling,
            )
    with front.sock:  # nginx takes the socket over (its NGINX variable names inherited sockets)
        fd = front.sock.fileno()
        supervisor.start(
            "nginx",
            nginx.nginx_command(run_dir),
            signal.SIGQUIT,
            env={**os.environ, "NGINX": f"{fd};"},
            pass_fds=[fd],
            batch=app.batch_scheduling,
        )
