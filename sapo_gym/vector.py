"""Vector environments with task groups (GRPO) and a shared seeded task schedule."""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

from sapo_gym.wrappers import TaskSchedule

__all__ = ["make_vec"]


def _make_member(env_id: str, worker: int, group_size: int, num_groups: int, schedule_seed: int, kwargs: dict[str, Any]) -> gym.Env:
    env = gym.make(env_id, **kwargs)
    return TaskSchedule(env, worker=worker, group_size=group_size, num_groups=num_groups, schedule_seed=schedule_seed)


def make_vec(
    env_id: str,
    num_tasks: int,
    group_size: int = 1,
    *,
    vectorization: Literal["async", "sync"] = "async",
    schedule_seed: int = 0,
    **env_kwargs: Any,
) -> gym.vector.VectorEnv:
    """``num_tasks * group_size`` copies of ``env_id``; the members of each group share a task.

    ``async`` runs one process per env (``AsyncVectorEnv(shared_memory=False)``: gymnasium's
    shared memory returns stale ``Text`` observations); ``sync`` runs them in this process.
    Sub-envs auto-reset the step *after* an episode ends (gymnasium's next-step mode).
    """
    if num_tasks < 1 or group_size < 1:
        raise ValueError(f"num_tasks and group_size must be >= 1 (got {num_tasks}, {group_size})")
    if vectorization not in ("async", "sync"):
        raise ValueError(f"vectorization must be 'async' or 'sync', got {vectorization!r}")
    fns = [
        partial(_make_member, env_id, w, group_size, num_tasks, schedule_seed, env_kwargs)
        for w in range(num_tasks * group_size)
    ]
    if vectorization == "sync":
        return SyncVectorEnv(fns)
    return AsyncVectorEnv(fns, shared_memory=False, context="spawn")
