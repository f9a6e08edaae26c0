"""Joining a Ray cluster for the env workers (``RayWorkers.address``, ``--ray-address``), whatever its auth mode.

Ray 2.60 has token auth: ``ray start --head`` turns it on when it finds a token (:data:`TOKEN_SOURCES`) and
``RAY_AUTH_MODE`` is unset (``RAY_AUTH_MODE=token`` forces it, ``disabled`` turns it off). A driver must then run
in token mode with the same token, and a driver in token mode refuses the calls of a cluster without auth (its
own servers want the token too). ``ray.init("auto")`` turns token mode on when a token is found; an explicit
address does not, so the ``HOST:PORT`` that ``ray start`` prints fails against a token cluster (``InvalidAuthToken``
in the log, then a bare ``ConnectionError`` some 20 s later), as does ``ray://`` against its Ray Client server.

:func:`connect` asks the cluster first: one unauthenticated gRPC call (the GCS's ``GetClusterId`` for
``HOST:PORT``, the client server's ``ClusterInfo`` ping for ``ray://``) that a token cluster answers with
``UNAUTHENTICATED``. It then runs this process in the cluster's mode when ``RAY_AUTH_MODE`` is unset, and says at
once what to change when ``RAY_AUTH_MODE`` or the token here cannot match. Ray is imported only when called.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["TOKEN_SOURCES", "connect", "cluster_wants_token", "has_token", "import_ray"]

TOKEN_SOURCES = "$RAY_AUTH_TOKEN, the file $RAY_AUTH_TOKEN_PATH names, or ~/.ray/auth_token"
"""Where Ray looks for its auth token, in its order."""
PROBE_TIMEOUT_S = 10.0
"""Longest wait for the cluster's answer to the auth probe (it takes milliseconds when the cluster is up)."""


def import_ray() -> Any:
    """The ``ray`` module, imported on first use (``import sapo_gym`` never imports it); an ImportError that names
    the extra to install when Ray is missing."""
    try:
        import ray
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError("vectorization='ray' needs Ray: pip install 'sapo-gym[ray]'") from err
    return ray


def has_token() -> bool:
    """Ray finds an auth token in this process (whatever ``RAY_AUTH_MODE`` says); False on a Ray without token auth."""
    try:
        from ray._raylet import AuthenticationTokenLoader
    except ImportError:  # pragma: no cover - a Ray before token auth
        return False
    return bool(AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True))


def cluster_wants_token(address: str) -> bool | None:
    """Whether the cluster at ``address`` (``HOST:PORT`` of its GCS, or ``ray://HOST:PORT``) runs with token auth:
    True when it refuses an unauthenticated call as such, False when it answers it, None when that says nothing
    (unreachable, not a Ray server, or no grpcio here)."""
    try:
        import grpc
        from ray._private.ray_constants import GLOBAL_GRPC_OPTIONS
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc, ray_client_pb2, ray_client_pb2_grpc
    except ImportError:
        return None
    client = address.startswith("ray://")
    target = address[len("ray://") :] if client else address
    with grpc.insecure_channel(target, options=list(GLOBAL_GRPC_OPTIONS)) as channel:  # Ray's proxy setting
        try:
            if client:
                ping = ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING)
                ray_client_pb2_grpc.RayletDriverStub(channel).ClusterInfo(ping, timeout=PROBE_TIMEOUT_S)
            else:
                stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
                stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=PROBE_TIMEOUT_S)
        except grpc.RpcError as err:  # UNAUTHENTICATED: a token cluster; anything else says nothing about auth
            return True if err.code() == grpc.StatusCode.UNAUTHENTICATED else None
        return False


def _enable_token_auth() -> None:
    """Token mode for this process and the ones it starts (what ``ray.init("auto")`` does when it finds a token)."""
    from ray._raylet import Config

    os.environ["RAY_AUTH_MODE"] = "token"
    Config.initialize("")  # Ray reads its config once: read it again so this process sends (and wants) the token


def _settle_auth_mode(address: str) -> None:
    """Put this process in the auth mode of the cluster at ``address``, or raise what to change."""
    wants, mode = cluster_wants_token(address), os.environ.get("RAY_AUTH_MODE")
    mode = mode.lower() if mode is not None else None  # Ray reads it case-insensitively
    if wants is None:
        return  # not asked: ray.init decides, and a failure is explained by connect
    if wants and mode is None and has_token():
        _enable_token_auth()
    elif wants and (mode != "token" or not has_token()):
        raise ConnectionError(
            f"the Ray cluster at {address} uses token auth: this process needs its token ({TOKEN_SOURCES}; "
            f"{'one is' if has_token() else 'none is'} here) and RAY_AUTH_MODE=token or unset (it is "
            f"{mode if mode is not None else 'unset'}); `ray get-auth-token` on the head prints the token"
        )
    elif not wants and mode == "token" and not address.startswith("ray://"):
        raise ConnectionError(
            f"the Ray cluster at {address} runs without auth but RAY_AUTH_MODE=token here, and a token-mode driver "
            "refuses the cluster's calls: unset RAY_AUTH_MODE (or set it to disabled), or start the cluster with "
            "RAY_AUTH_MODE=token"
        )


CLIENT_START_ATTEMPTS = 3
"""Tries at a ``ray://`` connection whose server-side session fails to start: Ray's client server forks that
session's process from a gRPC-threaded process, and on a loaded machine it sometimes dies at once (seen here about
one time in three with both cores busy, on a head's first session; the client gets "Initialization failure from
server" with "Starting Ray client server failed" or psutil's ZombieProcess)."""


def _init(ray: Any, address: str | None) -> None:
    for attempt in range(1, CLIENT_START_ATTEMPTS + 1):
        try:
            ray.init(address=address, include_dashboard=False)
            return
        except ConnectionAbortedError as err:
            if not str(err).startswith("Initialization failure from server") or attempt == CLIENT_START_ATTEMPTS:
                raise
            ray.shutdown()


def connect(address: str | None) -> None:
    """``ray.init`` for ``RayWorkers.address``: None or '' a new local Ray, 'auto' the cluster on this machine,
    'HOST:PORT' (what ``ray start --head`` prints) or 'ray://HOST:PORT' (its Ray Client server) in the cluster's
    auth mode (see the module docstring)."""
    ray = import_ray()
    address = address or None
    if address not in (None, "auto"):
        _settle_auth_mode(address)
    try:
        _init(ray, address)
    except ValueError as err:
        if "ray[client]" in str(err):
            raise ImportError(
                f"{address} is a Ray Client address: it needs ray[client] (grpcio), which the ray "
                "extra installs: pip install 'sapo-gym[ray]'"
            ) from err
        raise
    except ConnectionError as err:
        mode = os.environ.get("RAY_AUTH_MODE")
        raise ConnectionError(
            f"could not join the Ray cluster at {address} ({err}). Check the address (the HOST:PORT `ray start "
            "--head` printed, 'auto' on the head's machine, or ray://HOST:10001 for its Ray Client server) and, if "
            f"the cluster uses token auth, the token here ({TOKEN_SOURCES}: {'found' if has_token() else 'none'}) "
            f"with RAY_AUTH_MODE unset or token (it is {mode if mode is not None else 'unset'})"
        ) from err
