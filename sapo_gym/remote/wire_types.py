"""The wire types of the remote env: OpenEnv ``Action`` / ``Observation`` / ``State`` subclasses.

:class:`SapoAction` carries the model's raw output. :class:`SapoObservation` carries the prompt, the
reward and the two episode flags, every stable ``info`` key as a typed field, the served env's spec
hash, and every other ``info`` key (``messages``, ``pddl_params``, backend extras, keys added later)
in ``extra``, converted to JSON values (:func:`sapo_gym.core.to_jsonable`). ``info_keys`` records the
order of the env's own ``info`` so that the client rebuilds exactly that dict (:func:`info_from_observation`).

The conversions are pure functions: :func:`observation_from_step` (server side) and
:func:`info_from_observation` (client side).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from sapo_gym.core import ACTION_MAX_LENGTH, INFO_KEYS, STEP_INFO_KEYS, to_jsonable

__all__ = [
    "ACTION_LIMIT_CHARS",
    "MAX_BODY_BYTES",
    "TYPED_INFO_KEYS",
    "SapoAction",
    "SapoObservation",
    "SapoState",
    "ResetOptions",
    "ResetRequest",
    "observation_from_step",
    "info_from_observation",
]

ACTION_LIMIT_CHARS = ACTION_MAX_LENGTH
"""Longest action text the server accepts: the action space's ``max_length`` (65,536 characters), so the
server takes exactly the actions the action space admits; a longer one is refused (HTTP 422, a
``VALIDATION_ERROR`` frame over the WebSocket) and costs no turn."""

MAX_BODY_BYTES = 12 * ACTION_LIMIT_CHARS + (1 << 16)
"""Largest request body (and WebSocket message): the longest action JSON-escaped at its worst (a
character outside the BMP is one ``str`` character and 12 bytes, ``"\\ud83d\\ude00"``) plus 64 KiB of
envelope (832 KiB in all). Larger bodies are refused (413, a ``TOO_LARGE`` frame) before they are parsed."""

TYPED_INFO_KEYS = (*INFO_KEYS, *STEP_INFO_KEYS, "expert_action")
"""The ``info`` keys that are typed fields of :class:`SapoObservation` (core's stable keys, and the oracle's action);
every other key goes to ``extra``."""


class SapoAction(Action):
    """One turn's action: the model's raw output, parsed by the served env's protocol."""

    text: StrictStr = Field(max_length=ACTION_LIMIT_CHARS, description="the model's raw output for this turn")


class SapoObservation(Observation):
    """One reset or step of a served env (``done`` = terminated or truncated; ``reward`` per step)."""

    prompt: str = Field(description="the observation: the prompt the model sees")
    terminated: bool = False
    truncated: bool = False
    spec_hash: str = Field(description="spec hash of the served env (TextEnv.spec_hash)")
    info_keys: list[str] = Field(description="the keys of the env's info, in its order")
    raw_observation: str
    task: str
    task_id: str
    task_type: str
    dataset: str
    admissible_actions: list[str]
    action_mask: list[bool]
    step: int
    won: bool
    score: float
    action: str | None = None
    think: str | None = None
    is_action_valid: bool | None = None
    is_action_admissible: bool | None = None
    parse_reason: str | None = None
    expert_action: str | None = Field(default=None, description="privileged: the oracle's next action")
    extra: dict[str, Any] = Field(default_factory=dict, description="every other info key, as JSON values")


class SapoState(State):
    """What a session serves: the env id, its spec, split and tasks, and the current episode."""

    env_id: str
    spec_hash: str
    spec_fields: dict[str, Any]
    split: str
    task_ids: list[str]
    horizon: int | None = None
    task_id: str | None = None


class ResetOptions(BaseModel):
    """``reset(options=...)``: pick the task by id or by index (else the seed draws it)."""

    model_config = ConfigDict(extra="forbid")
    task_id: StrictStr | None = None
    task_index: StrictInt | None = None


class ResetRequest(BaseModel):
    """The arguments of a reset (both transports)."""

    model_config = ConfigDict(extra="forbid")
    seed: StrictInt | None = Field(default=None, ge=0)
    episode_id: StrictStr | None = Field(default=None, max_length=255)
    options: ResetOptions | None = None


def observation_from_step(
    prompt: str,
    info: dict[str, Any],
    spec_hash: str,
    reward: float | None = None,
    terminated: bool = False,
    truncated: bool = False,
) -> SapoObservation:
    """The wire observation of a reset (``reward=None``) or a step."""
    typed = {k: info[k] for k in TYPED_INFO_KEYS if k in info}
    typed["action_mask"] = np.asarray(info["action_mask"], dtype=bool).tolist()  # Python bools
    extra = {k: to_jsonable(v) for k, v in info.items() if k not in TYPED_INFO_KEYS}
    return SapoObservation(
        prompt=prompt,
        reward=None if reward is None else float(reward),
        done=bool(terminated or truncated),
        terminated=bool(terminated),
        truncated=bool(truncated),
        spec_hash=spec_hash,
        info_keys=list(info),
        extra=extra,
        **typed,
    )


def info_from_observation(obs: SapoObservation) -> dict[str, Any]:
    """The env's ``info`` rebuilt from the wire: the same keys in the same order, ``action_mask`` a bool array."""
    fields = obs.model_dump(include=set(TYPED_INFO_KEYS))
    info: dict[str, Any] = {}
    for key in obs.info_keys:
        if key == "action_mask":
            info[key] = np.asarray(obs.action_mask, dtype=bool)
        elif key in fields:
            info[key] = fields[key]
        else:
            info[key] = obs.extra[key]
    return info
