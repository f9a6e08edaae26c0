"""One served session: an OpenEnv ``Environment`` around one ``gym.make(env_id, **env_args)`` instance.

The server builds one :class:`SapoEnvironment` per session (WebSocket connection or HTTP session), in
that session's own executor thread; sessions share nothing but the process. Errors a client can
cause are typed: :class:`BadRequest` (bad reset arguments, an unknown task), :class:`NotStarted`
(``step`` before ``reset``), :class:`SessionClosed` (the session expired or was closed); anything else
the env raises is an env error, reported to that session only.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata
from pydantic import ValidationError

from sapo_gym.core import PRIVILEGED_INFO_KEYS
from sapo_gym.remote.wire_types import ResetRequest, SapoAction, SapoObservation, SapoState, observation_from_step

__all__ = ["SapoEnvironment", "BadRequest", "NotStarted", "SessionClosed", "validation_message"]


class BadRequest(ValueError):
    """A reset the env refuses (unknown argument or task): the client's mistake, the session lives on."""


class NotStarted(RuntimeError):
    """``step`` before the session's first ``reset``."""


class SessionClosed(RuntimeError):
    """The session was closed (idle expiry or an explicit close); open a new one."""


class SapoEnvironment(Environment[SapoAction, SapoObservation, SapoState]):
    """A sapo_gym env served to one session (reset with seed / task options, step with the raw output)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str, env_args: dict[str, Any] | None = None, public_only: bool = False):
        super().__init__()
        self.env_id = env_id
        self.public_only = public_only
        # gymnasium's passive checker breaks after a failed first reset (an unknown task id): TypeError at
        # the next step. It only warns, so a server, whose clients may send such resets, goes without it.
        self._env = gym.make(env_id, disable_env_checker=True, **dict(env_args or {}))
        base = self._env.unwrapped
        self._spec_hash = base.spec_hash()
        self._spec_fields = base.spec_fields()
        self._task_ids = list(base.task_ids)
        self.short_calls = bool(getattr(base, "calls_are_short", lambda: False)())
        """The env says its resets and steps are short: the server may run them on its event loop."""
        self._episode_id: str | None = None
        self._task_id: str | None = None
        self._steps = 0
        self._started = False
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosed(f"session closed (idle expiry or close); open a new session to play {self.env_id}")

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in info.items() if k not in PRIVILEGED_INFO_KEYS} if self.public_only else info

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        options: dict[str, Any] | None = None,
        **unknown: Any,
    ) -> SapoObservation:
        """Start an episode: ``seed`` seeds the task draw; ``options`` may name ``task_id`` or ``task_index``."""
        self._check_open()
        if unknown:
            raise BadRequest(f"unknown reset argument(s) {sorted(unknown)}; valid: ['episode_id', 'options', 'seed']")
        request = ResetRequest.model_validate({"seed": seed, "episode_id": episode_id, "options": options})
        opts = request.options.model_dump(exclude_none=True) if request.options is not None else None
        try:
            prompt, info = self._env.reset(seed=request.seed, options=opts)
        except ValueError as exc:  # an unknown task id: the client's request, not the env, is at fault
            raise BadRequest(str(exc)) from exc
        self._episode_id, self._task_id = request.episode_id, info["task_id"]
        self._steps, self._started = 0, True
        return observation_from_step(prompt, self._info(info), self._spec_hash)

    def step(self, action: SapoAction, timeout_s: float | None = None, **kwargs: Any) -> SapoObservation:
        """One turn with the raw model output (any text the action model admits; never a parse error)."""
        self._check_open()
        if not self._started:
            raise NotStarted("call reset before step")
        prompt, reward, terminated, truncated, info = self._env.step(action.text)
        self._steps += 1
        return observation_from_step(prompt, self._info(info), self._spec_hash, reward, terminated, truncated)

    @property
    def state(self) -> SapoState:
        return SapoState(
            episode_id=self._episode_id,
            step_count=self._steps,
            env_id=self.env_id,
            spec_hash=self._spec_hash,
            spec_fields=self._spec_fields,
            split=str(self._spec_fields.get("split")),
            task_ids=self._task_ids,
            horizon=self._spec_fields.get("horizon"),
            task_id=self._task_id,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=self.env_id,
            version=str(self._spec_fields.get("version")),
            description=f"sapo_gym {self.env_id} (spec {self._spec_hash}): text prompt in, raw model output as action",
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._env.close()


def validation_message(exc: ValidationError) -> list[dict[str, Any]]:
    """A pydantic error list that JSON can carry (no exception objects in ``ctx``)."""
    return [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
