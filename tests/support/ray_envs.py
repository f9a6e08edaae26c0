"""Envs and clusters for the Ray env-worker tests (``tests/sapo_gym/test_ray_vector*.py``, the trainer's).

Import this module before ``ray``: it keeps Ray on the loopback interface (:func:`loopback_only`).

``tests.support.ray_envs:Stalling-v0`` is ``sapo/Vault-v0`` whose step never answers in time when the action
contains ``stall``: the hung worker a step timeout must catch. gymnasium's ``module:id`` form makes the worker
import this module (registering the id) in its own process.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym

import sapo_gym  # noqa: F401  (registers sapo/Vault-v0)

STALL_S = 3600.0
"""How long a stalled step sleeps: far past any step timeout the tests set."""

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # read by Ray at import: every Ray server on 127.0.0.1

ROOT = str(Path(__file__).resolve().parents[2])

RAY_INIT = dict(
    include_dashboard=False,
    object_store_memory=100 * 1024**2,
    log_to_driver=False,
    runtime_env={"env_vars": {"PYTHONPATH": ROOT}},
)
"""ray.init arguments of the tests' small clusters: a 100 MiB object store (observations are small strings), and
the checkout on the workers' path so they import ``tests.support`` (sapo_gym itself is installed)."""


class _Stall(gym.Wrapper):
    def step(self, action: Any) -> Any:
        if "stall" in str(action):
            time.sleep(STALL_S)
        return self.env.step(action)


def _stalling(**kwargs: Any) -> gym.Env:
    return _Stall(gym.make("sapo/Vault-v0", **kwargs))


if "Stalling-v0" not in gym.registry:
    gym.register("Stalling-v0", entry_point=_stalling, disable_env_checker=True)


def expert_actions(infos: dict[str, Any], n: int) -> list[str]:
    """The oracle's next action per env of a batched info, 'look' where it has none (after an episode's end)."""
    has = infos.get("_expert_action", [False] * n)
    return [f"<think></think><action>{infos['expert_action'][i] if has[i] else 'look'}</action>" for i in range(n)]


def loopback_only() -> None:
    """Make Ray give this machine the address 127.0.0.1, so its servers (GCS, raylets, object stores, workers)
    listen on the loopback only; the env variable above does it for a Ray imported after this module, this line
    for one imported before (the driver reads the flag at each call, the processes it starts the variable)."""
    import ray._private.ray_constants as constants

    constants.ENABLE_RAY_CLUSTER = False


@contextlib.contextmanager
def local_ray(num_cpus: int = 2) -> Iterator[None]:
    """A one-node Ray of ``num_cpus`` CPUs for the block, always shut down."""
    import ray

    loopback_only()
    ray.init(num_cpus=num_cpus, **RAY_INIT)
    try:
        yield
    finally:
        ray.shutdown()


@contextlib.contextmanager
def two_node_cluster() -> Iterator[Any]:
    """A head and a second node of one CPU each on this machine (``ray.cluster_utils.Cluster``), with this
    process connected; always shut down."""
    import ray
    from ray.cluster_utils import Cluster

    loopback_only()
    node = dict(num_cpus=1, object_store_memory=RAY_INIT["object_store_memory"])
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        cluster.add_node(**node)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, runtime_env=RAY_INIT["runtime_env"])
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def kill(actor: Any, seconds: float = 30.0) -> None:
    """``ray.kill`` the actor and wait until it no longer answers. ``ray.kill`` is asynchronous: a call sent right
    after it can still be served (CI saw a killed member play its next turn, and a reset answered by a worker
    killed "before" it). Bounded: a loaded machine, not a timing test."""
    import ray

    ray.kill(actor, no_restart=True)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            ray.get(actor.__ray_ready__.remote(), timeout=5)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            return
        time.sleep(0.05)
    raise AssertionError(f"the killed actor still answers after {seconds} s")
