"""``sapo-gym env serve ENV_ID``: serve a registered env over OpenEnv (WebSocket and HTTP sessions)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("env", help="serve a registered env to remote clients (OpenEnv)")
    cmds = p.add_subparsers(dest="env_command", required=True, metavar="COMMAND")
    s = cmds.add_parser("serve", help="one env instance per session, over OpenEnv's WebSocket protocol and HTTP sessions",
                        description="Clients: gym.make('sapo/Remote-v0', url=..., env_id=...), any OpenEnv EnvClient "
                                    "(ws://HOST:PORT/ws), or HTTP /sessions. See docs/remote.md.")
    s.add_argument("env_id", help="a registered id, e.g. sapo/ALFWorld-v0")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1 keeps it local)")
    s.add_argument("--port", type=int, default=8765, help="TCP port (0: any free port, printed on start)")
    s.add_argument("--env-arg", action="append", default=[], metavar="K=V",
                   help="gym.make keyword argument for every session's env (repeatable; JSON values: 10, true, null)")
    s.add_argument("--max-sessions", type=int, default=8, help="open sessions at most; one more is refused (503)")
    s.add_argument("--max-sessions-per-client", type=int, default=None, metavar="N",
                   help="open sessions one client (peer address) may hold; one more is refused (429 / CAPACITY_REACHED). "
                        "Default: a quarter of --max-sessions (at least 1); all of them when --host is a loopback address")
    s.add_argument("--idle-timeout", type=float, default=600.0, help="seconds before an idle session is closed (0: never)")
    s.add_argument("--max-connections", type=int, default=64,
                   help="HTTP and WebSocket connections served at once (>= --max-sessions); past it a request gets 503")
    s.add_argument("--body-timeout", type=float, default=30.0,
                   help="seconds an HTTP request body may take to arrive in full (else 408; 0: no deadline)")
    s.add_argument("--public-only", action="store_true",
                   help="leave the privileged info keys (expert_action, pddl_params) out of observations")
    s.set_defaults(func=serve)


def serve(args: argparse.Namespace) -> int:
    import sapo_gym  # noqa: F401  (registers the ids)
    from sapo_gym.registration import ENVS, parse_env_args

    if args.env_id not in ENVS:
        raise ValueError(f"unknown env id {args.env_id!r}; valid choices: {sorted(ENVS)}")
    try:
        from sapo_gym.remote.server import ServeConfig, serve as run_server
    except ModuleNotFoundError as exc:
        raise ValueError(f"the OpenEnv server needs the serve extra ({exc.name} is missing): "
                         'pip install "sapo-gym[serve]" && pip install --no-deps openenv==0.10.0') from None
    config = ServeConfig(args.env_id, parse_env_args(args.env_arg), host=args.host, port=args.port,
                         max_sessions=args.max_sessions, max_sessions_per_client=args.max_sessions_per_client,
                         idle_timeout_s=args.idle_timeout, public_only=args.public_only,
                         body_timeout_s=args.body_timeout, max_connections=args.max_connections)
    run_server(config)
    return 0
