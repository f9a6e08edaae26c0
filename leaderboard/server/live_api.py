"""The live-evaluation endpoints (bearer token on every request; see :mod:`leaderboard.server.live`).

``GET /api/v1/live/limits`` → ``{"max_parallel", "max_seeds", ...}`` (no token needed) ·
``POST /api/v1/live/runs`` ``{"env_id", "split", "seeds": 1, "parallel": 1, "agent": {"name", ...}, "request_id"}`` → the
run (a retried start with the same optional ``request_id`` gets its run back while it is open) ·
``GET /api/v1/live/runs/<id>`` · ``POST /api/v1/live/runs/<id>/reset`` (the server deals the next
(task, seed) into a free slot; naming one already played, or ``parallel`` episodes in progress, is a 409)
→ ``{"episode", "task_id", "seed", "slot", "observation", "info"}`` ·
``POST /api/v1/live/runs/<id>/step`` ``{"output", "turn", "episode"}`` (``episode`` may be left out while one episode
is in progress) → ``{"episode", "turn", "observation", "reward", "terminated", "truncated", "info"}``, plus
``"submission"`` after the run's last step.
"""

from __future__ import annotations

import math
import re
from typing import Any

from flask import Blueprint, Response, current_app, jsonify

from leaderboard.server.limits import read_body
from leaderboard.server.live import LiveError, LiveManager
from sapo_gym.bundle import BundleError, parse_bundle
from sapo_gym.core import ACTION_MAX_LENGTH

__all__ = ["live_api", "validate_agent"]

live_api = Blueprint("live_api", __name__, url_prefix="/api/v1/live")


def _error(status: int, message: str, error: str = "live_refused") -> Response:
    response = jsonify(error=error, message=message, status=status)
    response.status_code = status
    return response


def _manager() -> LiveManager:
    return current_app.extensions["sapo_gym"]["live"]


def _token() -> Any:
    from leaderboard.server.api import _authenticate

    return _authenticate()


LIVE_BODY_LIMIT = 12 * ACTION_MAX_LENGTH + (1 << 16)
"""Bytes of a live request body: an output of the action space's most characters, each written as JSON's
longest escape (a ``\\uXXXX`` surrogate pair, 12 bytes for 2 characters, or 6 for one), plus 64 KiB of the rest."""


def _json() -> dict[str, Any]:
    data = read_body(LIVE_BODY_LIMIT)  # 413 past it
    if not data:
        return {}
    try:  # the bundle's strict rules: UTF-8, no NaN/Infinity, no huge integer literal, no lone surrogate
        return parse_bundle(data)
    except BundleError as exc:  # parse_bundle also answers nesting too deep and a top level that is no object
        raise LiveError(f"the body is not strict JSON: {str(exc).replace('bundle', 'body')}", 400) from None


def validate_agent(agent: Any) -> dict[str, Any]:
    """The agent metadata, checked against the bundle schema's ``agent`` and the reserved names."""
    import jsonschema

    from leaderboard.server.provenance import reserved_name
    from sapo_gym.bundle import load_schema

    schema = load_schema()
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/agent"}).iter_errors(agent)
    )
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path)
        raise LiveError(f"agent{'.' + where if where else ''}: {error.message[:300]}", 422)
    taken = reserved_name(agent["name"])
    if taken is not None:
        raise LiveError(f"the name {agent['name']!r} is reserved for the seeded baseline {taken!r}", 403)
    return dict(agent)


def _handle(fn: Any) -> Response:
    try:
        return jsonify(fn())
    except LiveError as exc:
        response = _error(exc.status, str(exc))
        if exc.retry_after is not None:
            response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
        return response


def _check_name(name: str, token_id: int) -> None:
    """A 409 before the run when another token owns the agent's display name (its bundle would be refused at the end)."""
    from leaderboard.server.names import NameTaken, check

    with current_app.extensions["sapo_gym"]["store"].session() as s:
        try:
            check(s, name, token_id)
        except NameTaken as exc:
            raise LiveError(str(exc), 409) from None


_REQUEST_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A start's or a reset's idempotency key: a retry with the same key gets the same run (while it is open) or the same
episode (while it is in progress)."""


@live_api.post("/runs")
def start() -> Response:
    token = _token()

    def go() -> dict[str, Any]:
        from leaderboard.server.limits import RateLimited

        try:  # opening a run builds an env: it costs what a submission does on the token's rate limit
            current_app.extensions["sapo_gym"]["limiter"].charge(token.id, 1.0)
        except RateLimited as exc:
            raise LiveError(str(exc), 429, retry_after=exc.retry_after) from None
        body = _json()
        board = current_app.extensions["sapo_gym"]["boards"].find(
            str(body.get("env_id", "")), str(body.get("split", ""))
        )
        if board is None:
            raise LiveError(f"no board for env {body.get('env_id')!r} split {body.get('split')!r}", 404)
        seeds, parallel = body.get("seeds", 1), body.get("parallel", 1)
        if type(seeds) is not int:
            raise LiveError("seeds is an integer (how many passes over the split; the server draws their values)", 400)
        if type(parallel) is not int:
            raise LiveError("parallel is an integer (how many episodes may be in progress at once)", 400)
        request_id = body.get("request_id")
        if request_id is not None and not (isinstance(request_id, str) and _REQUEST_ID.fullmatch(request_id)):
            raise LiveError(
                "request_id is 1 to 64 letters, digits, '-' or '_' (the client's key for retrying a start)", 400
            )
        agent = validate_agent(body.get("agent"))
        _check_name(agent["name"], token.id)
        return _manager().start(token, board, agent, seeds, parallel, request_id)

    response = _handle(go)
    if response.status_code == 200:
        response.status_code = 201
    return response


@live_api.get("/runs")
def runs() -> Response:
    """Every token's live runs on board ``spec_hash`` (no token needed): counts by status and the newest runs, abandoned
    and refused ones included (a run shows its agent every task it deals: :mod:`leaderboard.server.live_exposure`)."""
    from flask import request

    spec_hash = request.args.get("spec_hash", "")
    if current_app.extensions["sapo_gym"]["boards"].get(spec_hash) is None:
        return _error(404, f"no board with spec hash {spec_hash[:32]!r}", "not_found")
    return jsonify(current_app.extensions["sapo_gym"]["store"].live_board(spec_hash))


@live_api.get("/limits")
def limits() -> Response:
    return _handle(lambda: _manager().limits_public())


@live_api.get("/runs/<int:run_id>")
def status(run_id: int) -> Response:
    token = _token()
    return _handle(lambda: _manager().status(run_id, token))


@live_api.post("/runs/<int:run_id>/reset")
def reset(run_id: int) -> Response:
    token = _token()

    def go() -> dict[str, Any]:
        body = _json()
        task_id, seed, request_id = body.get("task_id"), body.get("seed"), body.get("request_id")
        if (task_id is not None and not isinstance(task_id, str)) or (seed is not None and type(seed) is not int):
            raise LiveError("task_id is a string and seed an integer (or leave both out)", 400)
        if request_id is not None and not (isinstance(request_id, str) and _REQUEST_ID.fullmatch(request_id)):
            raise LiveError(
                "request_id is 1 to 64 letters, digits, '-' or '_' (the client's key for retrying a reset)", 400
            )
        return _manager().reset(run_id, token, task_id, seed, request_id)

    return _handle(go)


@live_api.post("/runs/<int:run_id>/step")
def step(run_id: int) -> Response:
    token = _token()

    def go() -> dict[str, Any]:
        body = _json()
        output, turn, episode = body.get("output"), body.get("turn"), body.get("episode")
        if not isinstance(output, str) or any(v is not None and type(v) is not int for v in (turn, episode)):
            raise LiveError(
                'send {"output": the agent\'s raw text, "turn": the turn index, "episode": the episode\'s index}', 400
            )
        if len(output) > ACTION_MAX_LENGTH:  # the env's action space: what no env step accepts is no turn
            raise LiveError(
                f"the output has {len(output)} characters; the action space allows {ACTION_MAX_LENGTH}", 413
            )
        return _manager().step(run_id, token, output, turn, episode)

    return _handle(go)
