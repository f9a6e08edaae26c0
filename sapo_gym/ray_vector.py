"""Env workers on Ray: each member of a vector env lives in its own Ray actor, on any node with the resources.

``make_vec(env_id, n, g, vectorization="ray", ray_workers=RayWorkers(...))`` builds a :class:`RayVectorEnv`:
member ``w`` is one actor (:class:`EnvWorker`) holding the same ``TaskSchedule``-wrapped env the sync vector env
holds, so its tasks, seeds and group are the ones member ``w`` has there, and its episodes are the same. Where the
actors run is Ray's choice under the resources each asks for (:class:`RayWorkers`: CPUs, custom resources, spread
over the nodes), so workers can live on other machines of the cluster.

Two APIs, as :class:`sapo_gym.vector.RaggedSyncVectorEnv`:

* gymnasium's ``VectorEnv`` (``reset``/``step`` over all members, next-step autoreset, ``action_mask`` batched as
  an object array of per-env masks);
* the per-member calls a rollout needs (``reset_members``/``step_members``): the chosen members are sent their
  calls at once and answer in parallel.

Failures are bounded: every call waits at most ``step_timeout_s`` (a reset, which may start a worker,
``start_timeout_s``). A worker that died or did not answer in time is killed and replaced by a fresh actor for
the same member; the call reports it (``MemberResult.lost``; in the batch API the episode ends truncated with
``info["worker_lost"]``), and the replacement plays the member's next reset. A reset that loses its worker is
retried once on the replacement. Ray is imported only here, and only when such an env is built.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from sapo_gym.members import MemberResult, RaggedInfo, make_member
from sapo_gym.ray_connect import connect, import_ray

__all__ = ["RayWorkers", "RayVectorEnv", "EnvWorker", "WorkerInfo"]


@dataclass(frozen=True)
class RayWorkers:
    """Where and how the env workers run."""

    address: str | None = None
    """Cluster to join when Ray is not initialized yet: None or '' starts a local Ray (``ray.init()``), 'auto' joins
    the cluster running on this machine, 'HOST:PORT' the one ``ray start --head`` printed, 'ray://HOST:10001' one
    through its Ray Client server; under the cluster's auth mode, token or none (:func:`sapo_gym.ray_connect.connect`).
    An initialized Ray is used as it is."""
    num_cpus: float = 0.2
    """CPUs each worker reserves (verl-agent asks 0.2 per ALFWorld actor): the cluster must hold them all at once."""
    resources: tuple[tuple[str, float], ...] = ()
    """Custom Ray resources each worker needs, e.g. (("env_node", 1.0),) to keep workers on nodes started with
    ``--resources '{"env_node": 8}'``."""
    spread: bool = True
    """Spread the workers over the nodes (Ray's SPREAD strategy) rather than pack them."""
    step_timeout_s: float = 120.0
    """Longest wait for one step's answer; a worker silent for longer is replaced and its episode lost."""
    start_timeout_s: float = 300.0
    """Longest wait for the workers to start, and for a reset (which may include starting a replacement)."""

    def actor_options(self) -> dict[str, Any]:
        """The ``.options(...)`` of each worker actor: its resources, placement, and no restart by Ray (a restarted
        actor would come back with a fresh env in the middle of an episode; this env replaces it itself)."""
        opts: dict[str, Any] = {"num_cpus": self.num_cpus, "max_restarts": 0, "max_task_retries": 0}
        if self.resources:
            opts["resources"] = dict(self.resources)
        if self.spread:
            opts["scheduling_strategy"] = "SPREAD"
        return opts


@dataclass(frozen=True)
class WorkerInfo:
    """What a worker reports about itself once started."""

    group: int
    node_id: str
    pid: int
    observation_space: gym.Space
    action_space: gym.Space
    metadata: dict[str, Any]


class EnvWorker:
    """The body of one worker actor: member ``worker`` of the vector env (the env ``make_vec``'s sync members are)."""

    def __init__(
        self, env_id: str, worker: int, group_size: int, num_groups: int, schedule_seed: int, env_kwargs: dict[str, Any]
    ):
        self.env = make_member(env_id, worker, group_size, num_groups, schedule_seed, env_kwargs)

    def describe(self) -> WorkerInfo:
        env = self.env
        return WorkerInfo(
            int(env.group),
            import_ray().get_runtime_context().get_node_id(),
            os.getpid(),
            env.observation_space,
            env.action_space,
            dict(env.metadata),
        )

    def reset(self, seed: int | None, options: dict[str, Any] | None, episode: int) -> tuple[str, dict[str, Any]]:
        """Reset onto ``options``' task, else the one the schedule assigns to the member's ``episode``-th episode
        (:meth:`~sapo_gym.wrappers.TaskSchedule.reset_episode`: the vector env counts the episodes, as a replacement
        worker starts afresh)."""
        return self.env.reset_episode(episode, seed=seed, options=options)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.env.step(action)

    def close(self) -> None:
        self.env.close()


@lru_cache(maxsize=1)
def _actor_class() -> Any:
    return import_ray().remote(EnvWorker)


def _seeds(seed: int | Sequence[int | None] | None, n: int) -> list[int | None]:
    """gymnasium's seed convention: None for all, an int ``s`` as ``s, s+1, ...``, or one per env."""
    if seed is None:
        return [None] * n
    if isinstance(seed, (int, np.integer)):
        return [int(seed) + i for i in range(n)]
    if len(seed) != n:
        raise ValueError(f"{len(seed)} seeds for {n} envs")
    return list(seed)


class RayVectorEnv(RaggedInfo, VectorEnv):
    """A vector env whose members are Ray actors (see the module docstring); built by ``make_vec(..., "ray")``."""

    def __init__(
        self,
        env_id: str,
        members: Sequence[int],
        group_size: int,
        num_groups: int,
        schedule_seed: int,
        env_kwargs: dict[str, Any],
        workers: RayWorkers,
    ):
        ray = import_ray()
        self.workers = workers
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            connect(workers.address)
        self._spec = (env_id, group_size, num_groups, schedule_seed, dict(env_kwargs))
        self.member_ids = list(members)
        """Each member's index in the full vector env."""
        self.num_envs = len(self.member_ids)
        self.actors: list[Any] = [self._spawn(w) for w in self.member_ids]
        self.replacements = [0] * self.num_envs
        """How many times each member's worker was replaced."""
        self.losses: list[tuple[int, str]] = []
        """(member, why) for every worker lost, in order."""
        self.closed = False
        first = self.describe()[0]
        self.single_observation_space, self.single_action_space = first.observation_space, first.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {**first.metadata, "autoreset_mode": AutoresetMode.NEXT_STEP}
        self.render_mode = None
        self.member_groups = [w // group_size for w in self.member_ids]
        """Each member's task group."""
        self._episodes = [0] * self.num_envs
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self._obs = [""] * self.num_envs

    # ------------------------------------------------------------------ workers
    def _spawn(self, member: int) -> Any:
        env_id, group_size, num_groups, schedule_seed, env_kwargs = self._spec
        return (
            _actor_class()
            .options(**self.workers.actor_options())
            .remote(env_id, member, group_size, num_groups, schedule_seed, env_kwargs)
        )

    def _replace(self, i: int, why: str) -> None:
        ray = import_ray()
        try:
            ray.kill(self.actors[i], no_restart=True)
        except Exception:  # noqa: BLE001 - already gone; the replacement is what matters
            pass
        self.actors[i] = self._spawn(self.member_ids[i])
        self.replacements[i] += 1
        self.losses.append((i, why))

    def describe(self) -> list[WorkerInfo]:
        """Every worker's group, node, pid and spaces (waits up to ``start_timeout_s`` for them to start)."""
        ray = import_ray()
        refs = [a.describe.remote() for a in self.actors]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=self.workers.start_timeout_s)
        if len(ready) < len(refs):
            self.close()
            raise TimeoutError(
                f"{len(refs) - len(ready)} of {len(refs)} env workers did not start within "
                f"{self.workers.start_timeout_s} s: does the cluster hold {len(refs)} x "
                f"{self.workers.actor_options()}? (ray.available_resources() says what it has)"
            )
        try:
            return ray.get(refs)
        except ray.exceptions.RayActorError as err:  # the env could not be built in the worker
            self.close()
            raise RuntimeError(f"an env worker failed to start: {err}") from err

    @property
    def node_ids(self) -> list[str]:
        """The Ray node each member's worker runs on."""
        return [info.node_id for info in self.describe()]

    def _call(self, calls: Sequence[tuple[int, str, tuple]], timeout: float) -> list[tuple[Any, str | None]]:
        """Send every ``(member, method, args)`` at once; each answer, or why its worker was lost (then replaced)."""
        ray = import_ray()
        refs = [getattr(self.actors[i], method).remote(*args) for i, method, args in calls]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout) if refs else ([], [])
        done = set(ready)
        if len(done) == len(refs):
            try:  # the common case: every worker answered; one get for all
                return [(value, None) for value in ray.get(refs)]
            except ray.exceptions.RayActorError:
                pass  # some worker died: sort them out one by one below
        out: list[tuple[Any, str | None]] = []
        for (_, method, _), ref in zip(calls, refs):
            if ref not in done:
                out.append((None, f"{method}: no answer within {timeout} s"))
                continue
            try:
                out.append((ray.get(ref), None))
            except ray.exceptions.RayActorError as err:
                out.append((None, f"{method}: the worker died ({type(err).__name__})"))
        for (i, _, _), (_, lost) in zip(calls, out):
            if lost is not None:
                self._replace(i, lost)
        return out

    def _reset(
        self, indices: Sequence[int], seeds: Sequence[int | None], options: dict[str, Any] | None, episode: int | None
    ) -> list[tuple[str, dict[str, Any]]]:
        """Reset members (a lost worker is replaced and its reset retried once); each one's ``(obs, info)``."""

        def calls(pairs: Sequence[tuple[int, int]]) -> list[tuple[int, str, tuple]]:  # (position, member) pairs
            return [
                (i, "reset", (seeds[k], options, self._episodes[i] if episode is None else episode)) for k, i in pairs
            ]

        pending = list(enumerate(indices))
        results: dict[int, tuple[str, dict[str, Any]]] = {}
        for _ in range(2):
            answers = self._call(calls(pending), self.workers.start_timeout_s)
            for (k, i), (value, lost) in zip(pending, answers):
                if lost is None:
                    results[k] = value
                    self._episodes[i] += 1
            pending = [(k, i) for (k, i), (_, lost) in zip(pending, answers) if lost is not None]
            if not pending:
                return [results[k] for k in range(len(indices))]
        raise RuntimeError(
            f"members {[i for _, i in pending]} lost their workers twice in one reset: {self.losses[-len(pending) :]}"
        )

    # ------------------------------------------------------------------ per-member API (the rollout's)
    def reset_members(self, indices: Sequence[int], seeds: Sequence[int | None], episode: int) -> list[MemberResult]:
        """Reset members ``indices`` onto the task their schedule assigns to episode ``episode``."""
        return [MemberResult(obs, info) for obs, info in self._reset(indices, seeds, None, episode)]

    def step_members(self, indices: Sequence[int], actions: Sequence[str]) -> list[MemberResult]:
        """Step members ``indices`` in parallel; a lost worker's result has ``lost`` set and empty fields."""
        answers = self._call([(i, "step", (a,)) for i, a in zip(indices, actions)], self.workers.step_timeout_s)
        out = []
        for value, lost in answers:
            if lost is not None:
                out.append(MemberResult("", {}, lost=lost))
            else:
                obs, reward, terminated, truncated, info = value
                out.append(MemberResult(obs, info, float(reward), bool(terminated), bool(truncated)))
        return out

    # ------------------------------------------------------------------ gymnasium's VectorEnv API
    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        seeds, options = _seeds(seed, self.num_envs), dict(options or {})
        mask = options.pop("reset_mask", np.ones(self.num_envs, dtype=bool))
        indices = [int(i) for i in np.flatnonzero(mask)]
        answers = self._reset(indices, [seeds[i] for i in indices], options or None, None)
        infos: dict[str, Any] = {}
        for i, (obs, info) in zip(indices, answers):
            self._obs[i] = obs
            self._autoreset[i] = False
            infos = self._add_info(infos, info, i)
        return tuple(self._obs), infos

    def step(
        self, actions: Sequence[str]
    ) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"{len(actions)} actions for {self.num_envs} envs")
        n, resetting = self.num_envs, self._autoreset.copy()  # next-step autoreset: the step after an end resets
        calls = [
            (i, "reset", (None, None, self._episodes[i])) if resetting[i] else (i, "step", (actions[i],))
            for i in range(n)
        ]
        timeout = self.workers.start_timeout_s if resetting.any() else self.workers.step_timeout_s
        rewards, terms, truncs = np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        infos: dict[str, Any] = {}
        for i, (value, lost) in enumerate(self._call(calls, timeout)):
            if resetting[i]:
                if lost is None:
                    self._episodes[i] += 1
                self._obs[i], info = value if lost is None else self._reset([i], [None], None, None)[0]
            elif lost is not None:  # the episode is lost with its worker: flagged, ended as truncated
                self._obs[i], info, truncs[i] = "", {"worker_lost": lost}, True
            else:
                self._obs[i], rewards[i], terms[i], truncs[i], info = value
            infos = self._add_info(infos, info, i)
        self._autoreset = terms | truncs
        return tuple(self._obs), rewards, terms, truncs, infos

    def close_extras(self, **kwargs: Any) -> None:
        ray = import_ray()
        for actor in self.actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - closing: a worker already gone is fine
                pass
        self.actors = []
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
