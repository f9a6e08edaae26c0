"""HTTP sessions on the OpenEnv server, for clients without WebSockets (and ``curl``).

OpenEnv 0.10 keeps a session only per WebSocket connection (its HTTP ``/reset`` and ``/step`` build a
fresh env per request). These routes open sessions in the same session table (so ``max_sessions``
and idle expiry cover both transports) and answer bad requests with 4xx and a JSON
``{"error": ..., "message": ...}``; the bodies of ``reset`` and ``step`` and their answers have
OpenEnv's shapes (``ResetRequest`` fields, ``{"action": {...}}``; ``{"observation", "reward", "done"}``).

======================================  =======================================================
``POST /sessions``                      open a session -> 201 ``{"session_id": ...}`` (503 when full, 429 when
                                        the client holds ``max_sessions_per_client``)
``GET /sessions``                       ``{"active_sessions", "max_sessions"}``
``POST /sessions/{id}/reset``           ``{"seed"?, "episode_id"?, "options"?: {"task_id" | "task_index"}}``
``POST /sessions/{id}/step``            ``{"action": {"text": "<raw model output>"}}``
``GET /sessions/{id}/state``            the session's :class:`~sapo_gym.remote.wire_types.SapoState`
``DELETE /sessions/{id}``               close it
======================================  =======================================================

Status codes: 400 body not JSON by :mod:`sapo_gym.remote.strict_json`'s rules (NaN, Infinity, a float
overflow, an integer literal over 64 digits, nesting over 64 levels, a lone surrogate; or not an object)
or a reset the env refuses (unknown task id); 404 unknown session; 409 step before reset, or a session
held by a WebSocket; 410 session closed meanwhile; 413 body over
:data:`~sapo_gym.remote.wire_types.MAX_BODY_BYTES`; 422 wrong fields or types
(an action over :data:`~sapo_gym.remote.wire_types.ACTION_LIMIT_CHARS` characters included); 500 the env
raised (that session only; it stays open); 429 the client already holds its bound of open sessions
(:mod:`sapo_gym.remote.client_bound`); 503 at capacity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from openenv.core.env_server.exceptions import EnvironmentFactoryError, SessionCapacityError
from openenv.core.env_server.serialization import serialize_observation
from pydantic import BaseModel, ConfigDict, ValidationError

from sapo_gym.remote import strict_json
from sapo_gym.remote.client_bound import ClientSessionLimit
from sapo_gym.remote.environment import BadRequest, NotStarted, SapoEnvironment, SessionClosed, validation_message
from sapo_gym.remote.wire_types import MAX_BODY_BYTES, ResetRequest, SapoAction

__all__ = ["register_session_routes", "HTTPError", "StepBody"]


class StepBody(BaseModel):
    """``POST /sessions/{id}/step``: OpenEnv's step request shape."""

    model_config = ConfigDict(extra="forbid")
    action: SapoAction


class HTTPError(Exception):
    """An answer other than 2xx, with a machine-readable ``error`` and a sentence."""

    def __init__(self, status: int, error: str, message: str, detail: Any = None):
        super().__init__(message)
        self.status, self.error, self.message, self.detail = status, error, message, detail

    def response(self) -> JSONResponse:
        body: dict[str, Any] = {"error": self.error, "message": self.message}
        if self.detail is not None:
            body["detail"] = self.detail
        return JSONResponse(body, status_code=self.status)


async def read_json(request: Request, limit: int = MAX_BODY_BYTES, empty: Any = None) -> Any:
    """The request's JSON body, refusing an oversized body (413) without keeping it, then non-JSON (400).

    An oversized body is read to its end (up to 4x the limit) and dropped, so that a client that sends
    it all before reading the answer gets the 413 instead of a reset connection."""
    body = bytearray()
    seen = 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen <= limit:
            body += chunk
        elif seen > 4 * limit:
            break
    if seen > limit:
        raise HTTPError(413, "too_large", f"request body of {seen}+ bytes is over the limit of {limit} bytes")
    if not body.strip():
        return empty
    try:
        return strict_json.loads(bytes(body))
    except strict_json.NotJSON as exc:
        raise HTTPError(400, "not_json", f"request body is not JSON: {exc}") from None


def validate(model: type[BaseModel], data: Any) -> Any:
    """``model`` from a decoded body: 400 unless it is a JSON object, 422 on wrong fields or types."""
    if not isinstance(data, dict):
        raise HTTPError(400, "not_an_object", f"request body must be a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise HTTPError(422, "invalid", f"invalid {model.__name__}", validation_message(exc)) from None


def error_of(exc: Exception) -> HTTPError:
    """The answer for an exception raised by a session's env."""
    if isinstance(exc, HTTPError):
        return exc
    if isinstance(exc, ValidationError):
        return HTTPError(422, "invalid", "invalid request", validation_message(exc))
    if isinstance(exc, BadRequest):
        return HTTPError(400, "bad_request", str(exc))
    if isinstance(exc, NotStarted):
        return HTTPError(409, "not_started", str(exc))
    if isinstance(exc, SessionClosed):
        return HTTPError(410, "session_closed", str(exc))
    return HTTPError(500, "env_error", f"the env raised {type(exc).__name__}: {exc} (this session only; it stays open)")


class SessionRoutes:
    """The handlers, over one OpenEnv ``HTTPEnvServer``'s session table."""

    def __init__(self, server: Any):
        self.server = server

    async def session(self, session_id: str) -> SapoEnvironment:
        server = self.server
        async with server._session_lock:
            env = server._sessions.get(session_id)
            held = session_id in server._session_websocket_attachments
        if env is None:
            raise HTTPError(404, "unknown_session", f"unknown session {session_id!r} (closed, expired or never opened)")
        if held:
            raise HTTPError(409, "session_busy", f"session {session_id!r} is held by a WebSocket")
        return env

    async def call(self, session_id: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` as the server runs a session's env calls: in its own executor thread, or on the event loop for an
        env whose calls are short (:meth:`~sapo_gym.remote.server.SapoEnvServer._run_in_session_executor`)."""
        try:
            result = await self.server._run_in_session_executor(session_id, fn, *args, **kwargs)
        except Exception as exc:
            raise error_of(exc) from None
        self.server._update_session_activity(session_id, increment_step=fn.__name__ == "step")
        return result

    async def open(self, request: Request) -> JSONResponse:
        try:
            session_id, _ = await self.server._create_session()
        except ClientSessionLimit as exc:
            raise HTTPError(
                429, "client_limit", str(exc), {"held": exc.active_sessions, "limit": exc.max_sessions}
            ) from None
        except SessionCapacityError as exc:
            raise HTTPError(503, "capacity", str(exc)) from None
        except EnvironmentFactoryError as exc:
            raise HTTPError(500, "env_error", f"{exc}: {exc.__cause__}") from None
        return JSONResponse({"session_id": session_id}, status_code=201)

    async def capacity(self, request: Request) -> JSONResponse:
        return JSONResponse(self.server.get_capacity_status().model_dump())

    async def reset(self, request: Request) -> JSONResponse:
        session_id = request.path_params["session_id"]
        env = await self.session(session_id)
        args = validate(ResetRequest, await read_json(request, empty={}))
        payload = args.model_dump(exclude_none=True)
        obs = await self.call(session_id, env.reset, **payload)
        return JSONResponse(serialize_observation(obs))

    async def step(self, request: Request) -> JSONResponse:
        session_id = request.path_params["session_id"]
        env = await self.session(session_id)
        body = validate(StepBody, await read_json(request))
        obs = await self.call(session_id, env.step, body.action)
        return JSONResponse(serialize_observation(obs))

    async def state(self, request: Request) -> JSONResponse:
        session_id = request.path_params["session_id"]
        env = await self.session(session_id)
        self.server._update_session_activity(session_id)
        return JSONResponse(env.state.model_dump())

    async def close(self, request: Request) -> JSONResponse:
        session_id = request.path_params["session_id"]
        await self.session(session_id)
        await self.server._destroy_session(session_id)
        return JSONResponse({"session_id": session_id, "closed": True})


def register_session_routes(app: FastAPI, server: Any) -> None:
    """Add the ``/sessions`` routes to ``app`` (see the module docstring)."""
    routes = SessionRoutes(server)

    def guarded(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> JSONResponse:
            try:
                return await handler(request)
            except HTTPError as exc:
                return exc.response()

        return endpoint

    app.add_api_route("/sessions", guarded(routes.open), methods=["POST"], status_code=201, tags=["HTTP sessions"])
    app.add_api_route("/sessions", guarded(routes.capacity), methods=["GET"], tags=["HTTP sessions"])
    app.add_api_route("/sessions/{session_id}/reset", guarded(routes.reset), methods=["POST"], tags=["HTTP sessions"])
    app.add_api_route("/sessions/{session_id}/step", guarded(routes.step), methods=["POST"], tags=["HTTP sessions"])
    app.add_api_route("/sessions/{session_id}/state", guarded(routes.state), methods=["GET"], tags=["HTTP sessions"])
    app.add_api_route("/sessions/{session_id}", guarded(routes.close), methods=["DELETE"], tags=["HTTP sessions"])
