"""Vector environments with task groups (GRPO) and a shared seeded task schedule.

The members, their per-member answers and the ragged info batching are :mod:`sapo_gym.members`' (the Ray vector
env's too); ``RAGGED_INFO_KEYS`` and ``MemberResult`` are re-exported here, where they were first defined.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

from sapo_gym.members import RAGGED_INFO_KEYS, MemberResult, RaggedInfo, make_member

if TYPE_CHECKING:
    from sapo_gym.ray_vector import RayWorkers

__all__ = [
    "make_vec",
    "gym_vector_env",
    "RAGGED_INFO_KEYS",
    "MemberResult",
    "RaggedSyncVectorEnv",
    "RaggedAsyncVectorEnv",
]


class RaggedSyncVectorEnv(RaggedInfo, SyncVectorEnv):
    """``SyncVectorEnv`` whose ``action_mask`` info is an object array of per-env masks.

    Besides gymnasium's batch API it steps chosen members alone (what a rollout that must not prompt finished
    episodes needs): :meth:`reset_members` and :meth:`step_members`, the same calls as the Ray vector env's."""

    @property
    def member_groups(self) -> list[int]:
        """Each member's task group (its index in the full env // group size)."""
        return [int(env.group) for env in self.envs]

    def reset_members(self, indices: Sequence[int], seeds: Sequence[int | None], episode: int) -> list[MemberResult]:
        """Reset members ``indices`` onto the task their schedule assigns to episode ``episode``."""
        out = []
        for i, seed in zip(indices, seeds):
            out.append(MemberResult(*self.envs[i].reset_episode(episode, seed=seed)))
        return out

    def step_members(self, indices: Sequence[int], actions: Sequence[str]) -> list[MemberResult]:
        """Step members ``indices`` with ``actions``; the others are left as they are (no autoreset here)."""
        out = []
        for i, action in zip(indices, actions):
            obs, reward, terminated, truncated, info = self.envs[i].step(action)
            out.append(MemberResult(obs, info, float(reward), bool(terminated), bool(truncated)))
        return out


class RaggedAsyncVectorEnv(RaggedInfo, AsyncVectorEnv):
    """``AsyncVectorEnv`` whose ``action_mask`` info is an object array of per-env masks."""


def make_vec(
    env_id: str,
    num_tasks: int,
    /,
    group_size: int = 1,
    *,
    vectorization: Literal["async", "sync", "ray"] = "async",
    schedule_seed: int = 0,
    members: Sequence[int] | None = None,
    ray_workers: RayWorkers | None = None,
    **env_kwargs: Any,
) -> gym.vector.VectorEnv:
    """``num_tasks * group_size`` copies of ``env_id``; the members of each group share a task.

    ``async`` runs one process per env (``AsyncVectorEnv(shared_memory=False)``: observations travel through
    the pipes, without a shared buffer of ``4 * 2**20`` bytes per env); ``sync`` runs them in this process; ``ray`` places each in
    a Ray actor (:class:`sapo_gym.ray_vector.RayVectorEnv`, placed by the resources ``ray_workers`` asks for, so on
    any node of the cluster; needs the ``ray`` extra).
    Sub-envs auto-reset the step *after* an episode ends (gymnasium's next-step mode).
    ``infos["action_mask"]`` is an object array holding each env's own bool mask.
    ``env_id`` and ``num_tasks`` are positional-only, so an env's own ``num_tasks`` keyword
    (e.g. Vault's) passes through ``env_kwargs``. ``members`` builds only those member indices of the
    full env (one process's share under data parallelism); each plays the task schedule of its index.
    """
    if num_tasks < 1 or group_size < 1:
        raise ValueError(f"num_tasks and group_size must be >= 1 (got {num_tasks}, {group_size})")
    if vectorization not in ("async", "sync", "ray"):
        raise ValueError(f"vectorization must be 'async', 'sync' or 'ray', got {vectorization!r}")
    total = num_tasks * group_size
    members = range(total) if members is None else list(members)
    if any(not 0 <= w < total for w in members):
        raise ValueError(f"members must lie in [0, {total}), got {list(members)}")
    if vectorization == "ray":
        from sapo_gym.ray_vector import RayVectorEnv, RayWorkers

        return RayVectorEnv(
            env_id, list(members), group_size, num_tasks, schedule_seed, env_kwargs, ray_workers or RayWorkers()
        )
    fns = [partial(make_member, env_id, w, group_size, num_tasks, schedule_seed, env_kwargs) for w in members]
    if vectorization == "sync":
        return RaggedSyncVectorEnv(fns)
    return RaggedAsyncVectorEnv(fns, shared_memory=False, context="spawn")


def gym_vector_env(
    num_envs: int = 1, *, env_id: str, vectorization: Literal["sync", "async"] = "sync", **kwargs: Any
) -> gym.vector.VectorEnv:
    """The ids' ``vector_entry_point``: ``gym.make_vec(env_id, num_envs, **kwargs)`` without ``vectorization_mode``.

    ``num_envs`` envs ``gym.make(env_id, **kwargs)`` (each drawing its own tasks, as single envs do) in a
    :class:`RaggedSyncVectorEnv`, or with ``vectorization="async"`` a :class:`RaggedAsyncVectorEnv` with
    gymnasium's defaults (shared memory, the default start method): gymnasium's classes and next-step autoreset, with
    ``infos["action_mask"]`` an object array of each env's mask, which gymnasium's own classes cannot batch.
    """
    if vectorization not in ("sync", "async"):
        raise ValueError(f"vectorization must be 'sync' or 'async', got {vectorization!r}")
    fns = [partial(gym.make, env_id, **kwargs) for _ in range(num_envs)]
    return RaggedSyncVectorEnv(fns) if vectorization == "sync" else RaggedAsyncVectorEnv(fns)
