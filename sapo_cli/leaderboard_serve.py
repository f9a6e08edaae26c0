"""``sapo-gym leaderboard serve``: the board's gunicorn workers behind nginx, and the replay verifier beside them.

This process binds the public port, creates the tables once, starts gunicorn (gthread workers, each building its
own app from this command's arguments: :func:`application`) on a private Unix socket and nginx in front of it
(:mod:`sapo_cli.deploy`), then runs the replay verifier (and ``--seed``) in its own threads while it supervises
both. nginx bounds the transport (headers, bodies, connections); the app checks what the requests say.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from typing import Any

from sapo_cli.leaderboard_private import activate_from_args, add_seed_options

__all__ = ["register_serve", "server_config", "application", "SERVE_VARIABLE"]

SERVE_VARIABLE = "SAPO_GYM_LEADERBOARD_SERVE"
"""The serve command's arguments (JSON) as its gunicorn workers read them (:func:`application`)."""
_LOG_FORMAT = "%(asctime)s [%(process)d] %(name)s %(message)s"
"""The pid on every line: it says which process (supervisor or worker) wrote it."""


def positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {number}")
    return number


def register_serve(cmds: argparse._SubParsersAction) -> None:
    s = cmds.add_parser("serve", help="serve the pages and the JSON API behind nginx (and verify submissions)")
    _add_site_arguments(s)
    _add_capacity_arguments(s)
    _add_live_arguments(s)
    s.add_argument(
        "--seed",
        action="store_true",
        help="seed the expert and random baselines (in the background) when the database is empty",
    )
    add_seed_options(s)
    s.set_defaults(func=_serve)


def _add_site_arguments(s: argparse.ArgumentParser) -> None:
    """Where it listens and what it accepts: address, upload size, the verifier, its public URL, the nginx front."""
    from sapo_cli.deploy.nginx import add_front_options

    s.add_argument("--host", default="127.0.0.1")
    s.add_argument(
        "--port", type=int, default=8000, help="0: a free port, announced on the 'sapo-gym leaderboard on' line"
    )
    s.add_argument("--max-upload-mb", type=float, default=64.0, help="largest accepted bundle upload, MiB")
    s.add_argument("--no-verify", action="store_true", help="do not run the replay verifier in this process")
    s.add_argument(
        "--base-url",
        default=None,
        help="public URL of the server's root, used for the absolute URLs in responses (default: http://HOST:PORT)",
    )
    add_front_options(s)


def _add_capacity_arguments(s: argparse.ArgumentParser) -> None:
    """How much it serves at once: worker processes and threads, the app's time per request, database connections,
    and the per-token rate limit."""
    s.add_argument(
        "--workers",
        type=positive_int,
        default=2,
        help="gunicorn worker processes, each with its own app and --db-pool connections. PostgreSQL is the "
        "production database; SQLite (WAL) works but every write waits for the one before",
    )
    s.add_argument("--threads", type=positive_int, default=4, help="requests each worker serves at once (gthread)")
    s.add_argument(
        "--app-timeout",
        type=float,
        default=120.0,
        help="seconds a request may spend in the app before nginx answers 504",
    )
    s.add_argument(
        "--db-pool",
        type=positive_int,
        default=30,
        help="PostgreSQL connections each process may hold at once (10 kept open, the rest when busy); "
        "--workers N opens up to N times as many, plus the verifier's, which the database's "
        "max_connections must hold",
    )
    s.add_argument(
        "--rate-per-minute",
        type=float,
        default=60.0,
        help="per-token rate limit: units a minute, a submission costs 1 + its MiB (<= 0: off)",
    )
    s.add_argument("--rate-burst", type=float, default=300.0, help="per-token rate limit: bucket size (units)")


def _add_live_arguments(s: argparse.ArgumentParser) -> None:
    """Live evaluation's bounds: open runs, episodes per run at once, idle expiry, how long closed runs are kept."""
    s.add_argument(
        "--live-max-open",
        type=int,
        default=4,
        help="live evaluation: open runs at once (each holds up to --live-max-parallel envs in memory)",
    )
    s.add_argument(
        "--live-max-parallel",
        type=int,
        default=8,
        help="live evaluation: episodes a run may play at once, an env each (each process holds at most "
        "--live-max-open x this many envs)",
    )
    s.add_argument(
        "--live-idle-seconds",
        type=float,
        default=300.0,
        help="live evaluation: a run without progress (a reset or a step) this long expires",
    )
    s.add_argument(
        "--live-keep-closed-seconds",
        type=float,
        default=24 * 3600.0,
        help="live evaluation: a closed run's episodes and turns are deleted this long after it closed "
        "(its bundle is a submission by then; a request retried later is a 404)",
    )


def server_config(args: argparse.Namespace, port: int):  # type: ignore[no-untyped-def]
    """``serve``'s arguments as the app's :class:`~leaderboard.server.app.ServerConfig` (the workers' own verifier
    is off: this command runs the one verifier)."""
    from leaderboard.server.app import ServerConfig

    return ServerConfig(
        db_url=args.db,
        db_pool=args.db_pool,
        max_upload_mb=args.max_upload_mb,
        boards=tuple(args.board) if args.board else None,
        verify=False,
        base_url=args.base_url or f"http://{args.host}:{port}",
        rate_per_minute=args.rate_per_minute,
        rate_burst=args.rate_burst,
        live_max_open=args.live_max_open,
        live_max_parallel=args.live_max_parallel,
        live_idle_seconds=args.live_idle_seconds,
        live_keep_closed_seconds=args.live_keep_closed_seconds,
        private_seed=activate_from_args(args),
        private_tasks=args.private_tasks,
        private_envs=tuple(args.private_env) if args.private_env else None,
    )


def application() -> Any:
    """The flask app of one gunicorn worker, from the arguments its serve command put in :data:`SERVE_VARIABLE`
    (each worker builds its own after gunicorn forks it: no database connection crosses a fork)."""
    from leaderboard.server.app import create_app

    line = os.environ.get(SERVE_VARIABLE)
    if line is None:
        raise RuntimeError(
            f"{SERVE_VARIABLE} is unset: the board's gunicorn is started by 'sapo-gym leaderboard serve'"
        )
    logging.basicConfig(level=logging.INFO, format=_LOG_FORMAT)
    args = argparse.Namespace(**json.loads(line))
    return create_app(server_config(args, args.port))


def gunicorn_command(args: argparse.Namespace, fd: int) -> list[str]:
    """gunicorn on the inherited Unix socket ``fd``: gthread workers, the drain as its graceful timeout, request lines
    as long as nginx passes on."""
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "--bind",
        f"fd://{fd}",
        "--workers",
        str(args.workers),
        "--worker-class",
        "gthread",
        "--threads",
        str(args.threads),
        "--timeout",
        f"{args.app_timeout:g}",
        "--graceful-timeout",
        f"{args.drain_seconds:g}",
        "--limit-request-line",
        "8190",
        "--log-level",
        "info",
        "--error-logfile",
        "-",
        "sapo_cli.leaderboard_serve:application()",
    ]


def _serve(args: argparse.Namespace) -> int:
    from leaderboard.server.db import shown_url
    from leaderboard.server.store import Store
    from sapo_cli.deploy import serve

    logging.basicConfig(level=logging.INFO, format=_LOG_FORMAT)
    front = serve.bind(args.host, args.port)  # bound first: --port 0 picks a free port, announced below
    config = server_config(args, front.port)
    Store(
        config.db_url, config.db_pool
    ).engine.dispose()  # the tables, once: workers racing create_all fail on PostgreSQL
    settings = {k: v for k, v in vars(args).items() if k != "func"} | {"port": front.port}
    app = serve.AppServer(
        "gunicorn",
        lambda fd: gunicorn_command(args, fd),
        signal.SIGTERM,
        "/api/v1/boards",
        {SERVE_VARIABLE: json.dumps(settings)},
    )
    background: list[Any] = []

    def ready(answer: bytes) -> None:
        boards = json.loads(answer)
        for b in boards["boards"]:
            print(f"board {b['env_id']}:{b['split']}: {b['tasks']} tasks, spec {b['spec_hash']}", flush=True)
        for key, why in boards["unavailable"].items():
            print(f"board {key} unavailable: {why}", flush=True)
        print(f"sapo-gym leaderboard on http://{args.host}:{front.port}/ (database {shown_url(args.db)})", flush=True)
        background.extend(_background(args, config))

    try:
        return serve.run(front, app, args, int(args.max_upload_mb * (1 << 20)), args.app_timeout + 5.0, ready)
    finally:
        for stop in background:
            stop()


def _background(args: argparse.Namespace, config: Any) -> list[Any]:
    """This process's own work beside the workers: the replay verifier (one for the server) and ``--seed`` on an empty
    database. Returns what stops them."""
    import threading

    from leaderboard.server.store import Store
    from leaderboard.server.worker import Verifier

    store = Store(config.db_url, config.db_pool)
    stops = [store.engine.dispose]
    if args.seed and store.counts()["submissions"] == 0:
        threading.Thread(target=_seed_baselines, args=(store, args.board), name="sapo-gym-seed", daemon=True).start()
    if not args.no_verify:
        verifier = Verifier(store, config.poll_seconds).start()
        stops.insert(0, verifier.stop)
    return stops


def _seed_baselines(store: Any, board_keys: list[str] | None) -> None:
    from leaderboard.boards import BoardRegistry
    from leaderboard.seed import seed_store

    boards = BoardRegistry(board_keys)
    ids = seed_store(store, boards, ["expert", "random", "search"], progress=True)
    print(f"seeded submissions {ids} on {len(boards)} board(s)", flush=True)
