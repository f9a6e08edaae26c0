"""``sapo-gym env serve ENV_ID``: serve a registered env over OpenEnv (WebSocket and HTTP sessions), under uvicorn
behind nginx (:mod:`sapo_cli.deploy`)."""

from __future__ import annotations

import argparse
import signal
import sys

from sapo_cli.deploy.nginx import add_front_options
from sapo_cli.deploy.serve import add_scheduling_option


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("env", help="serve a registered env to remote clients (OpenEnv)")
    cmds = p.add_subparsers(dest="env_command", required=True, metavar="COMMAND")
    s = cmds.add_parser(
        "serve",
        help="one env instance per session, over OpenEnv's WebSocket protocol and HTTP sessions",
        description="Clients: gym.make('sapo/Remote-v0', url=..., env_id=...), any OpenEnv EnvClient "
        "(ws://HOST:PORT/ws), or HTTP /sessions. See docs/remote.md.",
    )
    s.add_argument("env_id", help="a registered id, e.g. sapo/ALFWorld-v0")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1 keeps it local)")
    s.add_argument("--port", type=int, default=8765, help="TCP port (0: any free port, printed on start)")
    s.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="K=V",
        help="gym.make keyword argument for every session's env (repeatable; JSON values: 10, true, null)",
    )
    s.add_argument("--max-sessions", type=int, default=8, help="open sessions at most; one more is refused (503)")
    s.add_argument(
        "--max-sessions-per-client",
        type=int,
        default=None,
        metavar="N",
        help="open sessions one client (peer address) may hold; one more is refused (429 / CAPACITY_REACHED). "
        "Default: a quarter of --max-sessions (at least 1); all of them when --host is a loopback address",
    )
    s.add_argument(
        "--idle-timeout", type=float, default=600.0, help="seconds before an idle session is closed (0: never)"
    )
    s.add_argument(
        "--max-connections",
        type=int,
        default=64,
        help="HTTP requests in progress and WebSockets the app serves at once (>= --max-sessions); past it a "
        "request gets 503",
    )
    s.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="server processes behind the one address (nginx sends each new session to the one with the "
        "fewest open); --max-sessions, --max-sessions-per-client and --max-connections are divided "
        "among them, and HTTP sessions live in the first",
    )
    add_front_options(s)
    add_scheduling_option(s)
    s.add_argument(
        "--public-only",
        action="store_true",
        help="leave the privileged info keys (expert_action, pddl_params) out of observations",
    )
    s.set_defaults(func=serve)


def serve(args: argparse.Namespace) -> int:
    import sapo_gym  # noqa: F401  (registers the ids)
    from sapo_gym.registration import ENVS, parse_env_args

    if args.env_id not in ENVS:
        raise ValueError(f"unknown env id {args.env_id!r}; valid choices: {sorted(ENVS)}")
    try:
        import httptools  # noqa: F401  (uvicorn's --http httptools, in a process of its own: fail here, not there)
        import uvloop  # noqa: F401  (uvicorn's --loop uvloop)

        from sapo_gym.remote.server import CONFIG_VARIABLE, ServeConfig, config_json, per_process
        from sapo_gym.remote.websocket import FRAME_READ_LIMIT
    except ModuleNotFoundError as exc:
        raise ValueError(
            f"the OpenEnv server needs the serve extra ({exc.name} is missing): "
            'pip install "sapo-gym[serve]" && pip install --no-deps openenv==0.10.0'
        ) from None
    from sapo_cli.deploy import serve as deploy

    config = ServeConfig(
        args.env_id,
        parse_env_args(args.env_arg),
        host=args.host,
        port=args.port,
        max_sessions=args.max_sessions,
        max_sessions_per_client=args.max_sessions_per_client,
        idle_timeout_s=args.idle_timeout,
        public_only=args.public_only,
        max_connections=args.max_connections,
    )
    each = per_process(config, args.workers)
    front = deploy.bind(config.host, config.port)
    app = deploy.AppServer(
        "uvicorn",
        lambda fd: uvicorn_command(fd, each.max_connections, args.drain_seconds),
        signal.SIGTERM,
        "/health",
        {CONFIG_VARIABLE: config_json(each)},
        access_log=False,
        processes=args.workers,
        batch_scheduling=args.scheduling == "batch",
    )

    def ready(answer: bytes) -> None:
        host, port = args.host, front.port
        print(
            f"serving {config.env_id} on http://{host}:{port} (OpenEnv WebSocket: ws://{host}:{port}/ws; "
            f"max {config.max_sessions} sessions, {config.per_client} per client, idle timeout "
            f"{config.idle_timeout_s or 'none'} s; {args.workers} process{'es' if args.workers > 1 else ''}, "
            f"{args.scheduling} scheduling)",
            flush=True,
        )

    return deploy.run(front, app, args, FRAME_READ_LIMIT, UPSTREAM_TIMEOUT_S, ready)


UPSTREAM_TIMEOUT_S = 120.0
"""Longest an HTTP request may take in the app (a reset that loads a game), and a WebSocket's longest silence from
the app (uvicorn pings every 20 s)."""


def uvicorn_command(fd: int, max_connections: int, drain_seconds: float) -> list[str]:
    """uvicorn on the inherited Unix socket ``fd``: the client's address from nginx's ``X-Forwarded-For`` (only nginx
    reaches the socket), WebSocket frames up to the read limit and never compressed (permessage-deflate is declined
    when a client offers it: nginx passes the offer and the answer through, and compressing observations of a few
    KB cost a tenth of the server's CPU), the drain as its graceful shutdown. uvicorn's standard pieces, named
    rather than left to what happens to be installed: uvloop as the event loop, httptools as the HTTP parser and
    the ``websockets`` library's sans-I/O protocol for WebSockets (of uvicorn's three, the one that cost the least
    CPU a frame here, docs/remote.md "The server under load")."""
    from sapo_gym.remote.websocket import FRAME_READ_LIMIT

    return [
        sys.executable,
        "-m",
        "uvicorn",
        "--fd",
        str(fd),
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--ws",
        "websockets-sansio",
        "--factory",
        "sapo_gym.remote.server:app_from_environment",
        "--proxy-headers",
        "--forwarded-allow-ips",
        "*",
        "--limit-concurrency",
        str(max_connections),
        "--ws-max-size",
        str(FRAME_READ_LIMIT),
        "--ws-per-message-deflate",
        "false",
        "--timeout-graceful-shutdown",
        f"{max(1, round(drain_seconds))}",
        "--lifespan",
        "on",
        "--log-level",
        "warning",
    ]
