"""The shipped nginx config (``nginx.conf`` beside this file), its settings, and the nginx process that runs it.

nginx runs as a child of the serve command, without root: ``nginx -p RUN_DIR -c RUN_DIR/nginx.conf -e stderr -g
'daemon off;'``, its pid file and temp files in the run directory, its logs on the command's own output. The public
port is bound by the serve command and handed over (nginx's ``NGINX`` environment variable names inherited
listening sockets), so ``--port 0`` takes a free port and the address announced is one already held.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "FrontConfig",
    "add_front_options",
    "front_config",
    "nginx_binary",
    "render",
    "nginx_command",
    "listen",
    "connection_limits",
    "WORKER_CONNECTIONS",
]

TEMPLATE = Path(__file__).with_name("nginx.conf")
WORKER_CONNECTIONS = 8192
"""Connections nginx holds at once, clients and the app server's together (a proxied request holds two); fewer when
the process may not open twice as many files (:func:`connection_limits`)."""
_FIELD = re.compile(r"\{\{(\w+)\}\}")


@dataclass(frozen=True)
class FrontConfig:
    """What the rendered config says (see the comments in ``nginx.conf``)."""

    listen: str
    """``host:port`` of the public side (``[v6]:port`` for IPv6)."""
    upstream: str
    """Path of the app server's Unix socket (its first process's, which also holds the HTTP sessions)."""
    max_body_bytes: int
    """Largest request body (``client_max_body_size``): Content-Length or chunked, past it a 413."""
    header_timeout: float = 20.0
    """Seconds a request line and its headers may take in all; an idle keep-alive connection's life."""
    client_timeout: float = 30.0
    """Seconds a client may pause between two reads of its body or two writes of an answer."""
    per_client: int = 256
    """Connections one client address may hold with a request in progress; one more is a 503."""
    upstream_timeout: float = 120.0
    """Seconds the app server may take over one request (or stay silent on a WebSocket)."""
    drain_seconds: float = 10.0
    """On a graceful stop, seconds the requests in progress may take to finish before their connections close."""
    peers: tuple[str, ...] = ()
    """Unix sockets of the app server's further processes: new connections go to the process with the fewest open."""

    def __post_init__(self) -> None:
        for name in ("header_timeout", "client_timeout", "upstream_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name.replace('_', '-')} must be > 0 seconds, got {getattr(self, name)}")
        if self.drain_seconds < 0:
            raise ValueError(f"drain-seconds must be >= 0, got {self.drain_seconds}")
        if self.per_client < 1 or self.max_body_bytes < 1:
            raise ValueError(
                f"per-client connections and the body limit must be >= 1, got {self.per_client}, {self.max_body_bytes}"
            )


def connection_limits() -> tuple[int, int]:
    """(open files nginx asks for, its worker_connections): :data:`WORKER_CONNECTIONS` and two files each plus some,
    within this process's hard limit on open files (nginx may raise its soft limit up to that, never past it)."""
    wanted = 2 * WORKER_CONNECTIONS + 64
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    return nofile, max(64, min(WORKER_CONNECTIONS, (nofile - 64) // 2))


def _ms(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


def render(config: FrontConfig, access_log: str = "/dev/stdout") -> str:
    """The shipped config with ``config``'s values filled in (every ``{{field}}`` of the template)."""
    nofile, connections = connection_limits()
    values = {
        "listen": config.listen,
        "upstream": config.upstream,
        "max_body_bytes": str(config.max_body_bytes),
        "peers": "\n".join(f"        server unix:{path};" for path in config.peers),
        "header_timeout": _ms(config.header_timeout),
        "client_timeout": _ms(config.client_timeout),
        "upstream_timeout": _ms(config.upstream_timeout),
        "drain": _ms(config.drain_seconds),
        "per_client": str(config.per_client),
        "worker_connections": str(connections),
        "nofile": str(nofile),
        "access_log": access_log,
        # nginx started by root would run its workers as nobody, who cannot reach the run directory
        "user": "user root;" if os.geteuid() == 0 else "",
    }
    text = TEMPLATE.read_text()
    missing = sorted(set(_FIELD.findall(text)) - set(values))
    if missing:
        raise ValueError(f"{TEMPLATE} names fields this code does not fill: {missing}")
    return _FIELD.sub(lambda m: values[m.group(1)], text)


def nginx_binary() -> str:
    """The nginx executable: on PATH, or Debian's ``/usr/sbin/nginx`` (not on a user's PATH)."""
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if found is None:
        raise FileNotFoundError(
            "nginx is not installed: the server runs behind it (Debian: apt-get install nginx, "
            "the 'nginx' package; scripts/setup.sh installs it)"
        )
    return found


def nginx_command(run_dir: Path) -> list[str]:
    """The command that runs ``run_dir/nginx.conf`` in the foreground, its prefix and logs there and on stderr."""
    return [nginx_binary(), "-p", f"{run_dir}/", "-c", str(run_dir / "nginx.conf"), "-e", "stderr", "-g", "daemon off;"]


def check(run_dir: Path) -> None:
    """``nginx -t`` on the rendered config: a bad setting fails here, before anything starts (ValueError)."""
    cmd = nginx_command(run_dir)
    result = subprocess.run([*cmd[:-2], "-t", "-q", *cmd[-2:]], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise ValueError(f"nginx refused the rendered config {run_dir / 'nginx.conf'}: {result.stderr.strip()}")


def listen(host: str, port: int) -> tuple[socket.socket, str]:
    """The public listening socket on ``host:port`` (0: a free port) and its address as nginx's ``listen`` names it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=511)
    bound = sock.getsockname()
    return sock, (f"[{bound[0]}]:{bound[1]}" if family == socket.AF_INET6 else f"{bound[0]}:{bound[1]}")


def add_front_options(p: argparse.ArgumentParser) -> None:
    """The options of the nginx in front (both serve commands take them)."""
    p.add_argument(
        "--header-timeout",
        type=float,
        default=20.0,
        help="seconds a client has to send a request's line and headers, however they trickle in; also how "
        "long an idle keep-alive connection stays open",
    )
    p.add_argument(
        "--client-timeout",
        type=float,
        default=30.0,
        help="seconds a client may pause while sending a body (between two reads) or while taking an answer "
        "(between two writes) before its connection is closed",
    )
    p.add_argument(
        "--max-connections-per-client",
        type=int,
        default=256,
        metavar="N",
        help="connections one client address may hold with a request in progress (a body still arriving "
        "included); one more is answered 503 at once",
    )
    p.add_argument(
        "--drain-seconds",
        type=float,
        default=10.0,
        help="on SIGTERM/SIGINT: stop accepting and let the requests in progress finish for at most this long",
    )


def front_config(
    args: argparse.Namespace,
    listen_address: str,
    upstreams: Sequence[Path],
    max_body_bytes: int,
    upstream_timeout: float,
) -> FrontConfig:
    """:class:`FrontConfig` from :func:`add_front_options`'s arguments; ``upstreams``: the app server's sockets, one a
    process, the first one's holding the HTTP sessions."""
    first, *peers = upstreams
    return FrontConfig(
        listen=listen_address,
        upstream=str(first),
        peers=tuple(str(path) for path in peers),
        max_body_bytes=max_body_bytes,
        header_timeout=args.header_timeout,
        client_timeout=args.client_timeout,
        per_client=args.max_connections_per_client,
        upstream_timeout=upstream_timeout,
        drain_seconds=args.drain_seconds,
    )
