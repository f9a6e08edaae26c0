"""``sapo-gym leaderboard serve|token|seed|verify|boards``: run and administer a leaderboard server."""

from __future__ import annotations

import argparse
import os

from sapo_cli.leaderboard_private import activate_from_args, add_seed_options, register_private
from sapo_cli.leaderboard_serve import register_serve

DEFAULT_DB = os.environ.get("SAPO_GYM_LEADERBOARD_DB", "sqlite:///leaderboard.db")


def _db_url(value: str) -> str:
    """A SQLAlchemy URL, or a plain file path for SQLite."""
    return value if "://" in value else f"sqlite:///{os.path.abspath(value)}"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("leaderboard", help="run and administer a leaderboard server")
    p.add_argument(
        "--db",
        type=_db_url,
        default=DEFAULT_DB,
        help="database: SQLAlchemy URL (postgresql://...) or SQLite file (default: $SAPO_GYM_LEADERBOARD_DB or ./leaderboard.db)",
    )
    p.add_argument(
        "--board",
        action="append",
        default=None,
        metavar="ENV_ID:SPLIT",
        help="host only these boards (repeatable; ENV_ID alone: each of its evaluation splits; default: every registered env, see leaderboard.boards)",
    )
    cmds = p.add_subparsers(dest="leaderboard_command", required=True, metavar="ACTION")

    register_serve(cmds)

    t = cmds.add_parser("token", help="API tokens (only their hashes are stored)")
    t.add_argument("token_action", choices=("create", "list", "revoke"))
    t.add_argument("value", nargs="?", help="create: the submitter's name; revoke: the token id")
    t.set_defaults(func=_token)

    d = cmds.add_parser("seed", help="add the expert and random baselines to every board")
    d.add_argument(
        "--agents",
        default="expert,random,search",
        help="comma-separated built-in agents (search plays ALFWorld boards only)",
    )
    d.add_argument("--verify", action="store_true", help="replay-verify them right away")
    d.set_defaults(func=_seed)

    v = cmds.add_parser("verify", help="replay-verify pending submissions (a worker outside the server)")
    v.add_argument("--forever", action="store_true", help="keep polling instead of stopping when the queue is empty")
    add_seed_options(v)  # replaying a private board's runs needs its seed
    v.set_defaults(func=_verify)

    b = cmds.add_parser("boards", help="list the hosted boards, their spec hashes, and the unavailable ones")
    b.set_defaults(func=_boards)
    register_private(cmds)


def _store(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from leaderboard.server.store import Store

    return Store(args.db)


def _registry(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from leaderboard.boards import BoardRegistry

    return BoardRegistry(args.board)


def _token(args: argparse.Namespace) -> int:
    store = _store(args)
    if args.token_action == "create":
        if not args.value or len(args.value) > 80:
            raise ValueError("token create needs the submitter's name (at most 80 characters)")
        token_id, token = store.create_token(args.value)
        print(f"token {token_id} for {args.value} (shown once, store it now):\n{token}")
    elif args.token_action == "list":
        for row in store.tokens():
            print(
                f"{row.id:>4}  {row.name:<30} created {row.created_at:%Y-%m-%d %H:%M}{'  REVOKED' if row.revoked else ''}"
            )
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
