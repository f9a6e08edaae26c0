"""The OpenEnv server for one registered env id (``sapo-gym env serve``).

Built on OpenEnv's ``HTTPEnvServer`` and its FastAPI app factory: the WebSocket endpoint ``/ws`` (one
session per connection: what OpenEnv's ``EnvClient``, TRL's OpenEnv integration and
:class:`sapo_gym.remote.client.RemoteEnv` speak), ``/health``, ``/schema``, ``/metadata``, in OpenEnv's
*production* mode (its stateless ``/reset`` and ``/step``, which build a fresh env per request, are left
out: a multi-turn episode needs its session).

Added around it (OpenEnv 0.10 lacks them):

* HTTP sessions with 4xx on bad requests (:mod:`sapo_gym.remote.http_sessions`), sharing OpenEnv's
  session table, so ``max_sessions`` bounds WebSocket and HTTP sessions together;
* a bound on the sessions one client (peer address) holds, ``max_sessions_per_client``
  (:mod:`sapo_gym.remote.client_bound`), so that one client cannot hold every session;
* an idle reaper for HTTP sessions that checks every ``timeout / 4`` (OpenEnv's waits at least 5 s between
  checks) and closes the env;
* a guard in front of OpenEnv's ``/ws`` handler (:mod:`sapo_gym.remote.websocket`): every malformed or
  hostile frame gets an error frame and the connection plays on, and a socket idle for the timeout is
  closed and its session freed, whether the socket opened it or attached to an HTTP session;
* a request-body and WebSocket-message size bound (:data:`~sapo_gym.remote.wire_types.MAX_BODY_BYTES`), and one
  JSON parser for both (:mod:`sapo_gym.remote.strict_json`).

``sapo-gym env serve`` runs this app under uvicorn behind nginx (``sapo_cli/deploy``), which bounds the transport
(headers, bodies, connections per client address); uvicorn reads the config from :data:`CONFIG_VARIABLE`
(:func:`app_from_environment`) and each client's address from nginx's ``X-Forwarded-For``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import gc
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.types import ConcurrencyConfig, ServerMode

from sapo_gym.remote.client_bound import (
    UNKNOWN_CLIENT,
    PeerMiddleware,
    SessionOwners,
    default_per_client,
    requesting_client,
)
from sapo_gym.remote.environment import SapoEnvironment
from sapo_gym.remote.websocket import guard_websocket_route, serving_socket
from sapo_gym.remote.wire_types import SapoAction, SapoObservation, SapoState

__all__ = [
    "ServeConfig",
    "SapoEnvServer",
    "create_app",
    "app_from_environment",
    "config_json",
    "CONFIG_VARIABLE",
    "reap_interval",
    "idle_sessions",
    "per_process",
    "INLINE_BOUND_S",
]

CONFIG_VARIABLE = "SAPO_GYM_ENV_SERVE_CONFIG"
"""The :class:`ServeConfig` (JSON, :func:`config_json`) of the app uvicorn builds (:func:`app_from_environment`)."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeConfig:
    """What one server serves and how."""

    env_id: str
    env_args: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``gym.make`` for every session's env."""
    host: str = "127.0.0.1"
    port: int = 8765
    """0 picks a free port (printed on start)."""
    max_sessions: int = 8
    """Open sessions at most (WebSocket and HTTP together); one more is refused (503 / CAPACITY_REACHED)."""
    max_sessions_per_client: int | None = None
    """Open sessions one client (peer address) may hold; one more is refused (429 / CAPACITY_REACHED). None:
    :func:`~sapo_gym.remote.client_bound.default_per_client` (a quarter of ``max_sessions``, at least 1; all of
    them when ``host`` is a loopback address, where every client has the same address)."""
    idle_timeout_s: float = 600.0
    """A session idle this long is closed; 0 keeps idle sessions forever."""
    public_only: bool = False
    """Leave the privileged info keys (``expert_action``, ``pddl_params``) out of every observation."""
    max_connections: int = 64
    """Connections (HTTP requests in progress and WebSockets) the app serves at once; past it a request is answered
    503 (uvicorn's ``limit_concurrency``). At least ``max_sessions``: each session's socket is a connection."""

    def __post_init__(self) -> None:
        if self.max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {self.max_sessions}")
        if self.max_sessions_per_client is not None and self.max_sessions_per_client < 1:
            raise ValueError(f"max_sessions_per_client must be >= 1, got {self.max_sessions_per_client}")
        if self.idle_timeout_s < 0:
            raise ValueError(f"idle_timeout_s must be >= 0, got {self.idle_timeout_s}")
        if self.max_connections < self.max_sessions:
            raise ValueError(f"max_connections ({self.max_connections}) must be >= max_sessions ({self.max_sessions})")

    @property
    def per_client(self) -> int:
        """The bound on one client's open sessions (``max_sessions_per_client`` or its default)."""
        if self.max_sessions_per_client is not None:
            return self.max_sessions_per_client
        return default_per_client(self.max_sessions, self.host)


def per_process(config: ServeConfig, processes: int) -> ServeConfig:
    """The config of each of ``processes`` server processes behind one address: the bounds on sessions (in all and
    per client) and on connections divided among them, rounded up. Each process keeps its own session table, so the
    bounds hold per process; nginx sends each new connection to the process with the fewest open, which spreads
    sessions evenly."""
    if processes < 1:
        raise ValueError(f"processes must be >= 1, got {processes}")

    def share(n: int) -> int:
        return -(-n // processes)

    per_client = None if config.max_sessions_per_client is None else share(config.max_sessions_per_client)
    return dataclasses.replace(
        config,
        max_sessions=share(config.max_sessions),
        max_sessions_per_client=per_client,
        max_connections=share(config.max_connections),
    )


INLINE_BOUND_S = 0.010
"""A session whose env has short calls (``calls_are_short``: CPU only, no waiting) runs them on the event loop, saving
two thread switches a call; one of its calls that takes more CPU time than this sends the session's later calls to its
own thread, so a slow call stalls the process's other sessions once per session at most. CPU time, not wall time: on
a busy machine a short call's wall time also counts the moments the process waited for a core, which would move
sessions to their threads for nothing they did."""


def reap_interval(timeout_s: float) -> float:
    """Seconds between idle checks: a quarter of the timeout, within [0.05, 5] s (expiry within 1.25x the timeout)."""
    return min(max(timeout_s / 4.0, 0.05), 5.0)


def idle_sessions(last_activity: Mapping[str, float], now: float, timeout_s: float, exempt: set[str]) -> list[str]:
    """Session ids idle for more than ``timeout_s`` at ``now``, except ``exempt``."""
    return sorted(sid for sid, at in last_activity.items() if sid not in exempt and now - at > timeout_s)


class SapoEnvServer(HTTPEnvServer):
    """OpenEnv's server with a prompter idle reaper, which leaves sessions held by a socket to the socket's
    own idle timer, and bounds each client's sessions (see the module docstring)."""

    def __init__(self, *args: Any, max_sessions_per_client: int | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._socket_sessions: set[str] = set()
        self._threaded_sessions: set[str] = set()
        total = self._max_concurrent_envs
        self._owners = SessionOwners(min(max_sessions_per_client or total, total), total)

    def hold_for_socket(self, session_id: str) -> None:
        """A guarded socket serves ``session_id``: the reaper leaves it alone until :meth:`release_from_socket`."""
        self._socket_sessions.add(session_id)

    def release_from_socket(self, session_id: str) -> None:
        """The socket serving ``session_id`` is gone (an HTTP session it attached to is reaped as usual again)."""
        self._socket_sessions.discard(session_id)

    async def _create_session(self) -> tuple[str, Any]:
        client = requesting_client.get() or UNKNOWN_CLIENT
        self._owners.claim(client, self._sessions)  # synchronous: no other task runs between count and claim
        session_id = None
        try:
            session_id, env = await super()._create_session()
        finally:
            self._owners.settle(client, session_id)
        ws = serving_socket.get()
        if ws is not None:  # opened by OpenEnv's /ws handler for the socket this task serves
            ws.session_id = session_id
        return session_id, env

    async def _destroy_session(self, session_id: str) -> None:
        await super()._destroy_session(session_id)
        self._owners.forget(session_id)
        self._threaded_sessions.discard(session_id)

    async def _run_in_session_executor(self, session_id: str, func: Any, *args: Any, **kwargs: Any) -> Any:
        """An env call of a session: on the event loop when the env's calls are short and the session's have stayed
        under :data:`INLINE_BOUND_S` of CPU time, else in the session's own thread (OpenEnv's way)."""
        env = self._sessions.get(session_id)
        if not getattr(env, "short_calls", False) or session_id in self._threaded_sessions:
            return await super()._run_in_session_executor(session_id, func, *args, **kwargs)
        started = time.thread_time()
        try:
            return func(*args, **kwargs)
        finally:
            if time.thread_time() - started > INLINE_BOUND_S:
                self._threaded_sessions.add(session_id)

    def _factory_produces_harness_env(self) -> bool:
        # Our factory builds SapoEnvironment, never OpenEnv's HarnessEnvironment; the base class's check
        # imports openenv.core.harness, hence the openai SDK, only to find that out.
        return False

    async def _reap_idle_sessions(self) -> None:
        timeout = self._session_idle_timeout_s
        if timeout is None:
            return
        while True:
            try:
                await asyncio.sleep(reap_interval(timeout))
                async with self._session_lock:
                    last = {sid: info.last_activity_at for sid, info in self._session_info.items()}
                    held = self._socket_sessions | self._session_websocket_attachments
                    stale = idle_sessions(last, time.time(), timeout, held)
                for sid in stale:
                    log.info("closing idle session %s", sid)
                    await self._destroy_session(sid)
            except asyncio.CancelledError:
                break
            except Exception as exc:  # keep reaping: one failed close must not stop expiry
                log.warning("idle reaper: %s", exc)


def create_app(config: ServeConfig) -> Any:
    """The FastAPI app serving ``config.env_id`` (OpenEnv's routes plus the HTTP session routes)."""
    from fastapi import FastAPI

    from sapo_gym.remote.http_sessions import register_session_routes

    factory = functools.partial(SapoEnvironment, config.env_id, dict(config.env_args), config.public_only)
    factory().close()  # build one env now: a bad id or argument fails at start, not in the first session
    concurrency = ConcurrencyConfig(
        max_concurrent_envs=config.max_sessions,
        session_timeout=config.idle_timeout_s or None,
    )
    server = SapoEnvServer(
        factory,
        SapoAction,
        SapoObservation,
        concurrency_config=concurrency,
        env_name=config.env_id.replace("/", "_"),
        state_cls=SapoState,
        max_sessions_per_client=config.per_client,
    )
    app = FastAPI(title=f"sapo_gym {config.env_id} (OpenEnv)", version="1.0.0")
    server.register_routes(app, mode=ServerMode.PRODUCTION)
    guard_websocket_route(app, server, config.idle_timeout_s or None)
    register_session_routes(app, server)
    app.add_middleware(PeerMiddleware)
    app.state.env_server = server
    return app


def config_json(config: ServeConfig) -> str:
    """``config`` as :func:`app_from_environment` reads it back."""
    return json.dumps(dataclasses.asdict(config))


def app_from_environment() -> Any:
    """The app of the :class:`ServeConfig` in :data:`CONFIG_VARIABLE` (uvicorn's ``--factory``).

    Everything built so far (the imports, the app, one env) lives as long as the process: it is moved out of the
    cycle collector's reach (``gc.freeze``), so that its full passes, which stall every session of the process, go
    over the sessions' objects only (measured: the longest pass at 256 ALFWorld-Mini sessions on 3 processes,
    58-109 ms before, 45-52 ms after)."""
    fields = json.loads(os.environ[CONFIG_VARIABLE])
    app = create_app(ServeConfig(**{**fields, "env_args": dict(fields["env_args"])}))
    gc.collect()
    gc.freeze()
    return app
