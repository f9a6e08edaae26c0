"""The sapo_gym envs as a SkyRL-Gym env (NovaSky's ``skyrl-gym==0.4.0``, the ``skyrl`` extra).

Importing this module registers :data:`ENV_CLASS` (``"sapo_gym"``) in ``skyrl_gym``'s registry, so SkyRL's
generator builds it as it builds any env: ``skyrl_gym.make(env_class, env_config=..., extras=...)`` with a dataset
row's extras, then ``init(prompt)``, then ``step(model output)`` until ``done``, ``get_metrics()`` and ``close()``
(``SkyRLGymGenerator.agent_loop_trajectory_wise``). Import it where the envs are made (SkyRL's entrypoint).

* :func:`dataset_rows` writes the rows: every task of a split once per seed, each ``{"prompt": [the env's first
  observation as a user message], "env_class": "sapo_gym", "extra_info": task row}``; the task row
  (:func:`sapo_gym.integrations.episodes.task_rows`: env id, split, task id, seed, env arguments, protocol,
  horizon, spec hash, prompt template) is what the env plays, with its ``env_args`` as JSON text (a Parquet file
  cannot hold an empty struct).
* :class:`SapoTextEnv` plays the row's episode: ``init`` resets the env and returns its first observation as the
  user turn (after the prompt's own system messages, if any); ``step`` steps it with the model's text and returns
  the next observation as a user message, the env's reward, and ``done`` when the env ends the episode (its
  horizon included) or SkyRL's ``max_turns`` extra is reached first (then the episode does not count as whole).
  Every output's ``metadata`` holds the task row and the turn's parse; the last one also the episode's payload
  (:meth:`~sapo_gym.integrations.episodes.EpisodePlay.payload`) under ``"sapo_gym"``. ``get_metrics`` returns
  :func:`~sapo_gym.integrations.episodes.episode_metrics` (SkyRL averages them, ``success/<task_type>`` over its
  category's episodes alone).
* ``env_config.record_path`` (SkyRL's ``environment.skyrl_gym.sapo_gym.record_path``): ``close`` appends the
  payload to that JSON Lines file, whole or not, which ``sapo-gym bundle`` turns into a leaderboard bundle.

Any protocol: the env parses the model's text as it would in process (under ``tool-call-v1`` the text must be the
JSON tool call).
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from sapo_gym.extras import require

require(("skyrl",), "sapo_gym.integrations.skyrl")

import skyrl_gym  # noqa: E402  (after the check that names the extra)
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput  # noqa: E402

from sapo_gym.integrations.episodes import PAYLOAD_KEY, EpisodePlay, episode_metrics, task_rows  # noqa: E402

__all__ = ["ENV_CLASS", "SapoTextEnv", "dataset_rows", "register"]

ENV_CLASS = "sapo_gym"
"""The ``env_class`` of every sapo_gym row: one SkyRL id for all the envs (the row names the env)."""
_TURN_KEYS = ("task_type", "step", "won", "score", "action", "is_action_valid", "is_action_admissible", "parse_reason")
_write_lock = threading.Lock()


def dataset_rows(
    env_id: str,
    split: str | None = None,
    seeds: Sequence[int] = (0,),
    env_args: dict[str, Any] | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """SkyRL dataset rows for every task of ``split`` (its first ``limit``) once per seed (the module docstring)."""
    return [
        {
            "prompt": [{"role": "user", "content": obs}],
            "env_class": ENV_CLASS,
            "extra_info": {**row, "env_args": json.dumps(row["env_args"], sort_keys=True)},
        }
        for row, obs in task_rows(env_id, split, seeds, env_args, limit)
    ]


def _task_row(extras: Mapping[str, Any]) -> dict[str, Any]:
    info = extras.get("extra_info")
    if not isinstance(info, Mapping) or "env_id" not in info:
        raise ValueError("a sapo_gym row carries its task row as extra_info (sapo_gym.integrations.skyrl.dataset_rows)")
    row = dict(info)
    if isinstance(row["env_args"], str):
        row["env_args"] = json.loads(row["env_args"])
    return row


def _setting(env_config: Any, key: str) -> Any:
    """``env_config[key]`` for a dict or an OmegaConf ``DictConfig`` (SkyRL's), None when absent."""
    return env_config.get(key) if env_config is not None and hasattr(env_config, "get") else None


def _append_line(path: str, obj: dict[str, Any]) -> None:
    """One JSON line appended whole: locked against this process's threads and, by ``flock``, other processes."""
    data = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")
    with _write_lock, open(path, "ab") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class SapoTextEnv(BaseTextEnv):
    """One episode of a task row, driven by SkyRL's generator (the module docstring)."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None):
        super().__init__()
        extras = dict(extras or {})
        self.row = _task_row(extras)
        self.max_turns = int(extras.get("max_turns") or self.row["horizon"])
        self.record_path: str | None = _setting(env_config, "record_path")
        self.play: EpisodePlay | None = None

    def init(self, prompt: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Reset the env: the prompt's system messages, then the env's first observation as the user turn."""
        self.close()
        self.play = EpisodePlay(self.row)
        self.turns = 0
        system = [dict(m) for m in prompt or [] if m.get("role") == "system"]
        return system + [{"role": "user", "content": self.play.observation}], {"row": self.play.row}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        if self.play is None:
            raise RuntimeError("call init() before step()")
        self.turns += 1
        observation, reward, done = self.play.step(action)
        over = done or self.turns >= self.max_turns
        metadata: dict[str, Any] = {"row": self.play.row, "turn": {k: self.play.info.get(k) for k in _TURN_KEYS}}
        if over:
            metadata[PAYLOAD_KEY] = self.play.payload()
        return BaseTextEnvStepOutput(
            observations=[] if over else [{"role": "user", "content": observation}],
            reward=reward,
            done=over,
            metadata=metadata,
            postprocessed_action=None,
        )

    def get_metrics(self) -> dict[str, Any]:
        return episode_metrics(self.play.record) if self.play is not None else {}

    def close(self) -> None:
        """Append the episode to ``record_path`` (when set) and close the env; a second call does nothing."""
        play, self.play = self.play, None
        if play is None:
            return
        try:
            if self.record_path and play.record.steps:
                _append_line(self.record_path, {PAYLOAD_KEY: play.payload()})
        finally:
            play.close()


def register() -> str:
    """Register :data:`ENV_CLASS` in ``skyrl_gym``'s registry (once); returns it."""
    if ENV_CLASS not in skyrl_gym.registry:
        skyrl_gym.register(id=ENV_CLASS, entry_point=f"{__name__}:SapoTextEnv")
    return ENV_CLASS


register()
