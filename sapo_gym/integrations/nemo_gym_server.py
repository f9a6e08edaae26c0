"""The sapo_gym resources server of NeMo-Gym: a ``GymnasiumServer`` (NeMo-Gym's base for ``/reset`` and ``/step``
servers, played by its ``gymnasium_agent``) over the envs its config lists.

A project written by ``sapo-gym nemo-gym init`` runs it (``resources_servers/sapo_gym/app.py``); its config's
``envs`` list holds each env's identity (:func:`~sapo_gym.integrations.nemo_gym.env_entry`). At start the server
builds each env and refuses to run when one has another spec hash than its entry. Each NeMo-Gym session plays one
episode, an :class:`~sapo_gym.integrations.episodes.EpisodePlay` of the task row the dataset row carries under
``"sapo_gym"`` (refused unless its env is one of the config's, with the same identity); the final step's info
carries the episode's payload under ``"sapo_gym"``. ``/aggregate_metrics`` adds sapo_gym's per-category summary
(success, score, steps, invalid rate per task type and ``all``).

Imports NeMo-Gym (``pip install 'sapo-gym[nemo-gym]'`` under Python >= 3.12); :mod:`sapo_gym.integrations.nemo_gym`
holds everything that does not.
"""

from __future__ import annotations

from typing import Any

from sapo_gym.extras import naming_extra

try:
    from nemo_gym.base_resources_server import BaseResourcesServerConfig
    from nemo_gym.openai_utils import NeMoGymResponse
    from pydantic import Field, PrivateAttr
    from resources_servers.gymnasium import GymnasiumServer
except ImportError as exc:
    raise naming_extra(
        exc, "the NeMo-Gym resources server (sapo_gym.integrations.nemo_gym_server)", ("nemo-gym",)
    ) from None

from sapo_gym.evaluation import summarize
from sapo_gym.integrations.episodes import PAYLOAD_KEY, ROW_KEYS, EpisodePlay, make_env
from sapo_gym.integrations.nemo_gym import env_entry, reply_text
from sapo_gym.records import EpisodeRecord

__all__ = ["SapoGymServerConfig", "SapoGymServer"]

_PUBLIC = (
    "task",
    "task_id",
    "task_type",
    "dataset",
    "admissible_actions",
    "step",
    "won",
    "score",
    "action",
    "think",
    "is_action_valid",
    "is_action_admissible",
    "parse_reason",
)
"""The info keys each reset and step hands back to NeMo-Gym: the stable ones but the observation (the prompt holds
it) and the mask (an array); no privileged key."""


def _public(info: dict[str, Any]) -> dict[str, Any]:
    return {k: info[k] for k in _PUBLIC if k in info}


def _flags(play: EpisodePlay, done: bool) -> tuple[bool, bool]:
    """(terminated, truncated) of the step just taken, read from the episode: truncated when it reached the horizon,
    terminated when it ended before it, or was won on it (a loss on the horizon's step reads as truncated only)."""
    at_horizon = play.record.steps >= int(play.row["horizon"])
    return done and (play.record.success or not at_horizon), done and at_horizon


class SapoGymServerConfig(BaseResourcesServerConfig):
    """The server's config: NeMo-Gym's own fields and ``envs``, one entry per env
    (:func:`~sapo_gym.integrations.nemo_gym.env_entry`: id, split, arguments, protocol, horizon, prompt, spec hash)."""

    envs: list[dict[str, Any]] = Field(min_length=1)


class SapoGymServer(GymnasiumServer):
    """The envs of the config, one episode per NeMo-Gym session (see the module docstring)."""

    config: SapoGymServerConfig
    _envs: dict[tuple, dict[str, Any]] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        self._envs = {(e["env_id"], e["split"]): dict(e) for e in self.config.envs}
        for (env_id, split), entry in self._envs.items():  # a spec hash other than the config's stops the server now
            env = make_env(env_id, split, entry["env_args"])
            here = env.unwrapped.spec_hash()
            env.close()
            if here != entry["spec_hash"]:
                raise RuntimeError(
                    f"{env_id}:{split} builds spec hash {here} here, the config says {entry['spec_hash']} "
                    "(another sapo-gym revision, backend or data than the project was written with)"
                )

    async def reset(self, metadata: dict, session_id: str | None = None) -> tuple[str | None, dict]:
        row = metadata.get(PAYLOAD_KEY)
        if not isinstance(row, dict) or not set(ROW_KEYS) <= set(row):
            raise ValueError(f"a row needs a task row under {PAYLOAD_KEY!r} with keys {list(ROW_KEYS)}, got {row!r}")
        entry = self._envs.get((row["env_id"], row["split"]))
        if entry is None or env_entry(row) != entry:
            raise ValueError(
                f"the row's env {row['env_id']}:{row['split']} (spec {row['spec_hash']}) is not one this "
                f"server was configured with: {sorted(self._envs)}"
            )
        await self.close_session(session_id)
        play = EpisodePlay(row)
        self.session_state[session_id] = play
        return play.observation, _public(play.info)

    async def step(
        self, action: NeMoGymResponse, metadata: dict, session_id: str | None = None
    ) -> tuple[str | None, float, bool, bool, dict]:
        play = self.session_state.get(session_id)
        if play is None:
            raise ValueError("step before reset (no episode in this session)")
        observation, reward, done = play.step(reply_text(action.model_dump(mode="json")["output"]))
        info = _public(play.info)
        if done:
            info[PAYLOAD_KEY] = play.payload()
        return (observation, reward, *_flags(play, done), info)

    async def close_session(self, session_id: str | None) -> None:
        play = self.session_state.pop(session_id, None)
        if play is not None:
            play.close()

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """sapo_gym's per-category summary of the rollouts' episodes: ``sapo_gym/<category>/<metric>``."""
        records = [
            EpisodeRecord.from_dict(r["info"][PAYLOAD_KEY]["record"])
            for rollouts in tasks
            for r in rollouts
            if PAYLOAD_KEY in (r.get("info") or {})
        ]
        if not records:
            return {}
        return {
            f"sapo_gym/{category}/{name}": value
            for category, row in summarize(records).items()
            for name, value in row.items()
        }
