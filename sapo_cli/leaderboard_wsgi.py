"""The leaderboard as a WSGI application for another server (gunicorn), with ``serve``'s own settings.

``serve --workers N`` is the one-command production server (:mod:`leaderboard.server.prefork`). To run the
board under gunicorn instead (pinned in the ``leaderboard`` extra), give it the arguments you would give
``sapo-gym leaderboard ... serve``, in ``SAPO_GYM_LEADERBOARD_ARGS``; they are parsed by the same parser
and turned into the same :class:`~leaderboard.server.app.ServerConfig`, so no setting is declared twice::

    SAPO_GYM_LEADERBOARD_ARGS="--db postgresql://board@db/board serve --no-verify --base-url https://board.example" \\
        gunicorn --workers 4 --worker-class gthread --threads 8 --bind 127.0.0.1:8000 \\
        'sapo_cli.leaderboard_wsgi:application()'

Each gunicorn worker builds its own app (no ``--preload``: no database connection crosses a fork). Run the
verifier beside it (``sapo-gym leaderboard --db ... verify --forever``, on any machine that reaches the
database), since every worker would otherwise start one. What ``serve``'s own server adds and gunicorn
does not: the per-connection deadlines on a request's headers and body (``--header-timeout``,
``--body-timeout``) and the connection bound with its immediate 503; under gunicorn its ``--timeout``,
``--keep-alive`` and ``--limit-request-*`` apply, and a slow client is best kept off by a buffering proxy.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

__all__ = ["application", "ARGS_VARIABLE"]

ARGS_VARIABLE = "SAPO_GYM_LEADERBOARD_ARGS"


def application(argv: str | None = None) -> Any:
    """The flask app for ``sapo-gym leaderboard`` arguments ``argv`` (default: ``$SAPO_GYM_LEADERBOARD_ARGS``), whose
    action must be ``serve``; its host and port only make the default ``--base-url`` (gunicorn binds the socket)."""
    from leaderboard.server.app import create_app
    from sapo_cli import build_parser
    from sapo_cli.leaderboard import server_config

    line = argv if argv is not None else os.environ.get(ARGS_VARIABLE)
    if line is None:
        raise RuntimeError(f"set {ARGS_VARIABLE} to the arguments of 'sapo-gym leaderboard ... serve'")
    args = build_parser().parse_args(["leaderboard", *shlex.split(line)])
    if args.leaderboard_command != "serve":
        raise RuntimeError(f"{ARGS_VARIABLE} must name the 'serve' action, not {args.leaderboard_command!r}")
    if args.workers != 1:
        raise RuntimeError("--workers is serve's own process count: with gunicorn, use its --workers")
    return create_app(server_config(args, args.port))
