"""``sapo-gym leaderboard serve|token|seed|verify|boards``: run and administer a leaderboard server."""

from __future__ import annotations

import argparse
import os

from sapo_cli.leaderboard_private import activate_from_args, add_seed_options, register_private

DEFAULT_DB = os.environ.get("SAPO_GYM_LEADERBOARD_DB", "sqlite:///leaderboard.db")


def _db_url(value: str) -> str:
    """A SQLAlchemy URL, or a plain file path for SQLite."""
    return value if "://" in value else f"sqlite:///{os.path.abspath(value)}"


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {number}")
    return number


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("leaderboard", help="run and administer a leaderboard server")
    p.add_argument("--db", type=_db_url, default=DEFAULT_DB,
                   help="database: SQLAlchemy URL (postgresql://...) or SQLite file (default: $SAPO_GYM_LEADERBOARD_DB or ./leaderboard.db)")
    p.add_argument("--board", action="append", default=None, metavar="ENV_ID:SPLIT",
                   help="host only these boards (repeatable; ENV_ID alone: each of its evaluation splits; default: every registered env, see leaderboard.boards)")
    cmds = p.add_subparsers(dest="leaderboard_command", required=True, metavar="ACTION")

    _register_serve(cmds)

    t = cmds.add_parser("token", help="API tokens (only their hashes are stored)")
    t.add_argument("token_action", choices=("create", "list", "revoke"))
    t.add_argument("value", nargs="?", help="create: the submitter's name; revoke: the token id")
    t.set_defaults(func=_token)

    d = cmds.add_parser("seed", help="add the expert and random baselines to every board")
    d.add_argument("--agents", default="expert,random,search",
                   help="comma-separated built-in agents (search plays ALFWorld boards only)")
    d.add_argument("--verify", action="store_true", help="replay-verify them right away")
    d.set_defaults(func=_seed)

    v = cmds.add_parser("verify", help="replay-verify pending submissions (a worker outside the server)")
    v.add_argument("--forever", action="store_true", help="keep polling instead of stopping when the queue is empty")
    add_seed_options(v)  # replaying a private board's runs needs its seed
    v.set_defaults(func=_verify)

    b = cmds.add_parser("boards", help="list the hosted boards, their spec hashes, and the unavailable ones")
    b.set_defaults(func=_boards)
    register_private(cmds)


def _register_serve(cmds: argparse._SubParsersAction) -> None:
    s = cmds.add_parser("serve", help="serve the pages and the JSON API (and verify submissions in the background)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000, help="0: a free port, announced on the 'sapo-gym leaderboard on' line")
    s.add_argument("--max-upload-mb", type=float, default=64.0, help="largest accepted bundle upload, MiB")
    s.add_argument("--no-verify", action="store_true", help="do not run the replay verifier in this process")
    s.add_argument("--base-url", default=None,
                   help="public URL of the server's root, used for the absolute URLs in responses (default: http://HOST:PORT)")
    s.add_argument("--request-timeout", type=float, default=30.0, help="seconds a stalled client may hold a connection")
    s.add_argument("--header-timeout", type=float, default=20.0,
                   help="seconds a client has to send a request's line and headers, however they trickle in, and that an "
                        "idle keep-alive connection stays open (0: only --request-timeout per read)")
    s.add_argument("--drain-seconds", type=float, default=10.0,
                   help="on SIGTERM/SIGINT: stop accepting and let the requests in service finish for at most this long")
    s.add_argument("--max-connections", type=int, default=128,
                   help="connections served at once (a thread each) by each worker; one more is answered 503 at once")
    s.add_argument("--workers", type=_positive_int, default=1,
                   help="server processes on one listening socket and one database (default 1: this process serves). "
                        "N > 1: this process supervises N forked workers (a dead one is replaced); each has its own "
                        "--max-connections and timeouts; the replay verifier runs in worker 0 only (with --no-verify "
                        "in none: run 'leaderboard verify --forever' beside it). PostgreSQL is the production database; "
                        "SQLite (WAL) works but every write waits for the one before")
    s.add_argument("--db-pool", type=_positive_int, default=30,
                   help="PostgreSQL connections each server process may hold at once (10 kept open, the rest when busy); "
                        "--workers N opens up to N times as many (plus one for the parent at start-up), which the "
                        "database's max_connections must hold")
    s.add_argument("--body-timeout", type=float, default=None,
                   help="seconds a client has to send a request body, however it trickles in (408 past it; default: "
                        "10 + the max upload at 1 MiB/s, 74 for 64 MiB)")
    s.add_argument("--rate-per-minute", type=float, default=60.0,
                   help="per-token rate limit: units a minute, a submission costs 1 + its MiB (<= 0: off)")
    s.add_argument("--rate-burst", type=float, default=300.0, help="per-token rate limit: bucket size (units)")
    s.add_argument("--live-max-open", type=int, default=4,
                   help="live evaluation: open runs at once (each holds up to --live-max-parallel envs in memory)")
    s.add_argument("--live-max-parallel", type=int, default=8,
                   help="live evaluation: episodes a run may play at once, an env each (the server holds at most "
                        "--live-max-open x this many envs)")
    s.add_argument("--live-idle-seconds", type=float, default=300.0,
                   help="live evaluation: a run without progress (a reset or a step) this long expires")
    s.add_argument("--live-keep-closed-seconds", type=float, default=24 * 3600.0,
                   help="live evaluation: a closed run's episodes and turns are deleted this long after it closed "
                        "(its bundle is a submission by then; a request retried later is a 404)")
    s.add_argument("--seed", action="store_true", help="seed the expert and random baselines (in the background) when the database is empty")
    add_seed_options(s)
    s.set_defaults(func=_serve)


def _store(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from leaderboard.server.store import Store

    return Store(args.db)


def _registry(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from leaderboard.boards import BoardRegistry

    return BoardRegistry(args.board)


def server_config(args: argparse.Namespace, port: int):  # type: ignore[no-untyped-def]
    """``serve``'s arguments as the app's :class:`~leaderboard.server.app.ServerConfig` (also for gunicorn: sapo_cli.leaderboard_wsgi)."""
    from leaderboard.server.app import ServerConfig

    return ServerConfig(db_url=args.db, db_pool=args.db_pool, max_upload_mb=args.max_upload_mb, boards=tuple(args.board) if args.board else None,
                        verify=not args.no_verify, base_url=args.base_url or f"http://{args.host}:{port}",
                        rate_per_minute=args.rate_per_minute, rate_burst=args.rate_burst,
                        live_max_open=args.live_max_open, live_max_parallel=args.live_max_parallel,
                        live_idle_seconds=args.live_idle_seconds, live_keep_closed_seconds=args.live_keep_closed_seconds,
                        private_seed=activate_from_args(args), private_tasks=args.private_tasks,
                        private_envs=tuple(args.private_env) if args.private_env else None, body_seconds=args.body_timeout)


def _boards_ready(args: argparse.Namespace, app) -> None:  # type: ignore[no-untyped-def]
    """Print the app's boards (built now, so the first request is fast and a broken env shows at start-up) and, with
    ``--seed`` on an empty database, seed the baselines in the background (the pages are up at once)."""
    import threading

    boards = app.extensions["sapo_gym"]["boards"]
    for b in boards:
        print(f"board {b.key}: {len(b.task_ids)} tasks, spec {b.spec_hash}", flush=True)
    for key, why in boards.skipped.items():
        print(f"board {key} unavailable: {why}", flush=True)
    if args.seed and app.extensions["sapo_gym"]["store"].counts()["submissions"] == 0:
        seed_args = argparse.Namespace(**{**vars(args), "agents": "expert,random,search", "verify": False})
        threading.Thread(target=_seed, args=(seed_args,), name="sapo-gym-seed", daemon=True).start()


def _serve(args: argparse.Namespace) -> int:
    import logging

    from leaderboard.server.app import create_app
    from leaderboard.server.db import shown_url
    from leaderboard.server.serving import listen, serve

    # the pid on every line: with --workers, it says which worker served a request
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [%(process)d] %(name)s %(message)s")
    listener = listen(args.host, args.port)  # bound first: --port 0 picks a free port, announced below
    port = listener.getsockname()[1]
    config = server_config(args, port)
    if args.workers > 1:
        return _serve_workers(args, listener, config)
    app = create_app(config)
    _boards_ready(args, app)
    print(f"sapo-gym leaderboard on http://{args.host}:{port}/ (database {shown_url(args.db)})", flush=True)
    serve(app, listener, args.request_timeout, args.header_timeout, args.max_connections, args.drain_seconds)
    return 0


def _serve_workers(args: argparse.Namespace, listener, config) -> int:  # type: ignore[no-untyped-def]
    """``serve --workers N``: this process creates the tables, then forks and supervises N workers
    (:mod:`leaderboard.server.prefork`); each builds its own app after the fork and serves on ``listener``."""
    import dataclasses
    import sys

    from leaderboard.server import prefork
    from leaderboard.server.app import create_app
    from leaderboard.server.db import shown_url
    from leaderboard.server.serving import serve
    from leaderboard.server.store import Store

    Store(config.db_url, config.db_pool).engine.dispose()  # the tables, once: fresh processes racing create_all fail on PostgreSQL
    print(f"sapo-gym leaderboard on http://{args.host}:{listener.getsockname()[1]}/ (database {shown_url(args.db)})", flush=True)

    def worker(index: int) -> None:
        app = create_app(dataclasses.replace(config, verify=config.verify and index == 0))  # one verifier thread
        if index == 0:
            _boards_ready(args, app)
        sys.stdout.write(f"worker {index} pid {os.getpid()} serving\n")  # one write: print() under python -u makes two,
        sys.stdout.flush()  # and another worker's line could land between them
        serve(app, listener, args.request_timeout, args.header_timeout, args.max_connections, args.drain_seconds)

    return prefork.run(listener, args.workers, worker, grace_seconds=args.drain_seconds + 5.0)  # a worker drains first


def _token(args: argparse.Namespace) -> int:
    store = _store(args)
    if args.token_action == "create":
        if not args.value or len(args.value) > 80:
            raise ValueError("token create needs the submitter's name (at most 80 characters)")
        token_id, token = store.create_token(args.value)
        print(f"token {token_id} for {args.value} (shown once, store it now):\n{token}")
    elif args.token_action == "list":
        for row in store.tokens():
            print(f"{row.id:>4}  {row.name:<30} created {row.created_at:%Y-%m-%d %H:%M}{'  REVOKED' if row.revoked else ''}")
    else:
        if not args.value or not args.value.isdigit():
            raise ValueError("token revoke needs a token id (see 'token list')")
        if not store.revoke_token(int(args.value)):
            raise ValueError(f"no token {args.value}")
        print(f"revoked token {args.value}")
    return 0


def _seed(args: argparse.Namespace) -> int:
    from leaderboard.seed import seed_store
    from leaderboard.server.worker import Verifier

    store, boards = _store(args), _registry(args)
    ids = seed_store(store, boards, [a.strip() for a in args.agents.split(",") if a.strip()], progress=True)
    print(f"seeded submissions {ids} on {len(boards)} board(s)")
    for key, why in boards.skipped.items():
        print(f"skipped board {key}: {why}")
    if args.verify:
        print(f"verified {Verifier(store).drain()} submission(s)")
    return 0


def _verify(args: argparse.Namespace) -> int:
    import time

    from leaderboard.server.worker import Verifier

    activate_from_args(args)
    verifier = Verifier(_store(args))
    verifier.store.requeue_stale()
    while True:
        done = verifier.drain()
        print(f"verified {done} submission(s)", flush=True)
        if not args.forever:
            return 0
        time.sleep(verifier.poll_seconds)


def _boards(args: argparse.Namespace) -> int:
    boards = _registry(args)
    width = max((len(b.split) for b in boards), default=0)
    for b in boards:
        print(f"{b.env_id:<26} {b.split:<{width}} {len(b.task_ids):>5} tasks  spec {b.spec_hash}")
    for key, why in boards.skipped.items():
        print(f"unavailable: {key}: {why}")
    return 0
