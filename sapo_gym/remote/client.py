"""The client side: OpenEnv's ``EnvClient`` for our wire types, and ``sapo/Remote-v0``.

:class:`SapoEnvClient` is an OpenEnv ``EnvClient`` (one WebSocket, one server session), usable from
any OpenEnv-based trainer. :class:`RemoteEnv` wraps its synchronous form as a
``gymnasium.Env[str, str]`` that answers like the served env itself: the same prompts, rewards,
flags and ``info`` (same keys, same order, ``action_mask`` a bool array), the same spaces, and
``spec_hash()`` / ``spec_fields()`` / ``task_ids`` / ``split`` of the served env::

    env = gym.make("sapo/Remote-v0", url="http://127.0.0.1:8765", env_id="sapo/ALFWorld-v0")

One difference: the server takes only actions the action space admits (at most
:data:`~sapo_gym.remote.wire_types.ACTION_LIMIT_CHARS` = ``ACTION_MAX_LENGTH`` characters); a longer one raises
``ValueError`` here instead of being parsed, where a local env would parse it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium as gym
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from sapo_gym.core import ACTION_MAX_LENGTH, OBSERVATION_MAX_LENGTH
from sapo_gym.remote.wire_types import ACTION_LIMIT_CHARS, SapoAction, SapoObservation, SapoState, info_from_observation
from sapo_gym.spaces import UnicodeText

__all__ = ["SapoEnvClient", "RemoteEnv", "RemoteEnvError"]


class RemoteEnvError(RuntimeError):
    """The server refused or failed a request of this session (the message says why)."""


class SapoEnvClient(EnvClient[SapoAction, SapoObservation, SapoState]):
    """OpenEnv client of a ``sapo-gym env serve`` server (``SapoEnvClient(base_url=url).sync()`` for sync use)."""

    def _step_payload(self, action: SapoAction) -> dict[str, Any]:
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[SapoObservation]:
        obs = SapoObservation.model_validate(
            {**payload.get("observation", {}), "reward": payload.get("reward"), "done": payload.get("done", False)}
        )
        return StepResult(observation=obs, reward=obs.reward, done=obs.done, metadata=payload.get("metadata"))

    def _parse_state(self, payload: dict[str, Any]) -> SapoState:
        return SapoState.model_validate(payload)


class RemoteEnv(gym.Env[str, str]):
    """A served sapo_gym env as a local gymnasium env (registered as ``sapo/Remote-v0``)."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        *,
        url: str,
        env_id: str,
        connect_timeout_s: float = 10.0,
        message_timeout_s: float = 120.0,
        render_mode: str | None = None,
    ):
        self.url, self.env_id, self.render_mode = url, env_id, render_mode
        self.observation_space = UnicodeText(OBSERVATION_MAX_LENGTH)
        self.action_space = UnicodeText(ACTION_MAX_LENGTH)
        self._client = SapoEnvClient(
            base_url=url, connect_timeout_s=connect_timeout_s, message_timeout_s=message_timeout_s
        ).sync()
        self._prompt: str | None = None
        try:
            self._client.connect()
            self._state = self._call(self._client.state)
        except BaseException:
            self._client.close()
            raise
        if self._state.env_id != env_id:
            self._client.close()
            raise ValueError(f"{url} serves {self._state.env_id!r}, not {env_id!r}")

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RuntimeError as exc:
            if str(exc).startswith("Server error"):
                raise RemoteEnvError(f"{self.url} ({self.env_id}): {exc}") from None
            raise

    # ------------------------------------------------------------ the served env's identity
    @property
    def task_ids(self) -> Sequence[str]:
        return list(self._state.task_ids)

    @property
    def split(self) -> str:
        return self._state.split

    def spec_fields(self) -> dict[str, Any]:
        return dict(self._state.spec_fields)

    def spec_hash(self) -> str:
        return self._state.spec_hash

    def task_index_of(self, task_id: str) -> int:
        try:
            return self._state.task_ids.index(task_id)
        except ValueError:
            raise ValueError(
                f"unknown task_id {task_id!r} for split {self.split!r} ({len(self._state.task_ids)} tasks)"
            ) from None

    # ------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        kwargs: dict[str, Any] = {}
        if seed is not None:
            kwargs["seed"] = seed
        if options:
            kwargs["options"] = dict(options)
        result = self._call(self._client.reset, **kwargs)
        self._prompt = result.observation.prompt
        return result.observation.prompt, info_from_observation(result.observation)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        text = action if isinstance(action, str) else str(action)
        if len(text) > ACTION_LIMIT_CHARS:
            raise ValueError(f"action of {len(text)} characters is over the server's limit of {ACTION_LIMIT_CHARS}")
        obs = self._call(self._client.step, SapoAction(text=text)).observation
        self._prompt = obs.prompt
        return obs.prompt, float(obs.reward or 0.0), obs.terminated, obs.truncated, info_from_observation(obs)

    def render(self) -> str | None:
        return self._prompt if self.render_mode == "ansi" else None

    def close(self) -> None:
        self._client.close()
        super().close()
