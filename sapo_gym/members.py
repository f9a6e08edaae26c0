"""What every vector env of sapo_gym shares about its members: how one is made, what it answers, how infos batch.

:mod:`sapo_gym.vector` (sync and async, gymnasium's classes) and :mod:`sapo_gym.ray_vector` (one Ray actor per
member) both build member ``w`` with :func:`make_member`, answer the per-member API with :class:`MemberResult`
and batch ragged infos with :class:`RaggedInfo`; both import this module, neither the other's privates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from sapo_gym.registration import register_all
from sapo_gym.spaces import ragged_info_batching
from sapo_gym.wrappers import TaskSchedule

__all__ = ["RAGGED_INFO_KEYS", "RaggedInfo", "MemberResult", "make_member"]

RAGGED_INFO_KEYS = ("action_mask",)
"""Array-valued info entries whose length differs between envs (one entry per admissible action)."""


class RaggedInfo:
    """Mixin of a ``VectorEnv``: batch ragged array infos as an object array of per-env arrays.

    gymnasium stacks an ``np.ndarray`` info into one fixed-shape array sized by the first env,
    which fails as soon as two envs have different numbers of admissible actions.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        with ragged_info_batching():  # the observation space's refusal of gymnasium's own vector envs is not for us
            super().__init__(*args, **kwargs)  # type: ignore[call-arg]

    def _add_info(self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int) -> dict[str, Any]:
        ragged = {k: env_info[k] for k in RAGGED_INFO_KEYS if k in env_info}
        rest = {k: v for k, v in env_info.items() if k not in ragged}
        vector_infos = super()._add_info(vector_infos, rest, env_num)  # type: ignore[misc]
        for key, value in ragged.items():
            array = vector_infos.get(key)
            if array is None:
                array = np.full(self.num_envs, None, dtype=object)  # type: ignore[attr-defined]
            array[env_num] = value
            present = vector_infos.get(f"_{key}", np.zeros(self.num_envs, dtype=bool))  # type: ignore[attr-defined]
            present[env_num] = True
            vector_infos[key], vector_infos[f"_{key}"] = array, present
        return vector_infos


@dataclass
class MemberResult:
    """What one member answered to a reset or a step of the per-member API (``reset_members``/``step_members``)."""

    obs: str
    info: dict[str, Any] = field(default_factory=dict)
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    lost: str | None = None
    """Why the member's worker is gone (crashed, killed, no answer in time), else None: the episode it was playing is
    lost (obs, info and reward are empty) and a replacement worker already holds the member for its next reset."""


def make_member(
    env_id: str, worker: int, group_size: int, num_groups: int, schedule_seed: int, kwargs: dict[str, Any]
) -> TaskSchedule:
    """Member ``worker`` of a vector env: ``gym.make(env_id, **kwargs)`` on the task schedule of its group.

    The ids are registered first: a fresh process (an async member, a Ray worker) may hold nothing else of sapo_gym.
    """
    register_all()
    env = gym.make(env_id, **kwargs)
    return TaskSchedule(env, worker=worker, group_size=group_size, num_groups=num_groups, schedule_seed=schedule_seed)
