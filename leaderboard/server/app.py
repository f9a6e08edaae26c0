"""The leaderboard's flask application factory."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from flask import Flask, jsonify, render_template, request
from werkzeug.exceptions import HTTPException

from leaderboard.boards import BoardRegistry
from leaderboard.server import security
from leaderboard.server.db import DEFAULT_POOL
from leaderboard.server.limits import RateLimiter
from leaderboard.server.store import Store
from leaderboard.server.worker import Verifier

__all__ = ["ServerConfig", "create_app"]


@dataclass
class ServerConfig:
    """Settings of one app (``sapo-gym leaderboard serve`` builds one in each gunicorn worker)."""

    db_url: str = "sqlite:///leaderboard.db"
    """SQLAlchemy URL: ``sqlite:///path.db`` (WAL) or ``postgresql://user@host/db``."""
    db_pool: int = DEFAULT_POOL
    """PostgreSQL connections this process may hold at once (``serve --workers N``: N times as many)."""
    max_upload_mb: float = 64.0
    """Largest accepted upload (and largest gzip-decompressed bundle), in MiB."""
    boards: tuple[str, ...] | None = None
    """Hosted boards as ``env_id:split``; None = every registered env (see leaderboard.boards)."""
    verify: bool = True
    """Run the replay verifier in a background thread of the server."""
    poll_seconds: float = 1.0
    """How often the verifier looks for pending submissions when idle."""
    base_url: str = "http://127.0.0.1:8000"
    """Public URL of the app's root: absolute URLs in responses start with it (never with the Host header)."""
    rate_per_minute: float = 60.0
    """Per-token rate limit: units refilled a minute (a request costs 1 + its MiB); <= 0 disables it."""
    rate_burst: float = 300.0
    """Per-token bucket size (that many small submissions can arrive at once)."""
    live_max_open: int = 4
    """Live evaluation: open runs on the server at once (each holds up to ``live_max_parallel`` envs); one per token."""
    live_max_parallel: int = 8
    """Live evaluation: episodes a run may play at once (an env each): the server holds at most
    ``live_max_open * live_max_parallel`` envs."""
    live_idle_seconds: float = 300.0
    """Live evaluation: a run without progress (a reset or a step) for this long expires (abandoned)."""
    live_keep_closed_seconds: float = 24 * 3600.0
    """Live evaluation: a closed run's episodes and turns are deleted this long after it closed."""
    private_seed: str | None = field(default=None, repr=False)
    """The secret of the private boards (hex; :mod:`leaderboard.private`); None: no private boards."""
    private_envs: tuple[str, ...] | None = None
    """Envs given a private board (default: every env with a private split)."""
    private_tasks: int | None = None
    """Tasks of each private split (None: the env's default, 24 ALFWorld-Mini games, 100 WebShop goals)."""


def _json_errors(app: Flask) -> None:
    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):  # type: ignore[no-untyped-def]
        if request.path.startswith("/api/"):
            message = exc.description or exc.name
            if exc.code == 413:
                message = f"upload too large: the limit is {app.config['MAX_CONTENT_LENGTH'] // (1 << 20)} MiB"
            response = jsonify(error=exc.name.lower().replace(" ", "_"), message=message, status=exc.code)
            response.status_code = exc.code or 500
            if exc.code == 401:
                response.headers["WWW-Authenticate"] = 'Bearer realm="sapo-gym"'
            return response
        return render_template("error.html", code=exc.code, name=exc.name, message=exc.description), exc.code

    @app.errorhandler(Exception)
    def _crash(exc: Exception):  # type: ignore[no-untyped-def]
        logging.getLogger(__name__).exception("unhandled error")
        if request.path.startswith("/api/"):
            return jsonify(error="internal_error", message=f"{type(exc).__name__}: the server failed", status=500), 500
        return render_template("error.html", code=500, name="Internal error", message="the server failed"), 500


def create_app(config: ServerConfig | None = None) -> Flask:
    """Build the app; ``app.extensions["sapo_gym"]`` holds the store, boards and verifier."""
    from leaderboard.server.api import api
    from leaderboard.server.live import LiveLimits, LiveManager
    from leaderboard.server.live_api import live_api
    from leaderboard.server.pages import pages

    config = config or ServerConfig()
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = int(config.max_upload_mb * (1 << 20))
    app.json.sort_keys = False  # type: ignore[attr-defined]
    security.install(app, config.base_url)  # before the blueprints: it bounds their <int:...> ids
    store = Store(config.db_url, config.db_pool)
    verifier = Verifier(store, config.poll_seconds)
    keys = config.boards
    if config.private_seed is not None:  # the private boards join the hosted ones (this process holds the seed)
        from leaderboard import private
        from leaderboard.boards import default_board_keys

        active = private.activate(config.private_seed, config.private_envs, config.private_tasks)
        keys = tuple(config.boards or default_board_keys()) + tuple(active.board_keys())
    app.extensions["sapo_gym"] = {
        "store": store,
        "boards": BoardRegistry(keys),
        "verifier": verifier,
        "config": config,
        "limiter": RateLimiter(config.rate_per_minute, config.rate_burst, store),
    }
    boards = app.extensions["sapo_gym"]["boards"]
    app.extensions["sapo_gym"]["live"] = LiveManager(
        store,
        boards,
        verifier,
        LiveLimits(
            max_open=config.live_max_open,
            max_parallel=config.live_max_parallel,
            idle_seconds=config.live_idle_seconds,
            keep_closed_seconds=config.live_keep_closed_seconds,
            max_output_bytes=int(config.max_upload_mb * (1 << 20)),
        ),
    )
    app.register_blueprint(api)
    app.register_blueprint(live_api)
    app.register_blueprint(pages)
    _json_errors(app)
    if config.verify:
        verifier.start()
    return app
