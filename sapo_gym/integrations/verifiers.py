"""The sapo_gym envs as a verifiers environment (PrimeIntellect's ``verifiers==0.4.0``, the ``verifiers`` extra).

verifiers 0.4 runs an environment as three plugins that it loads by id, an id being an installed top-level package
that exports them in ``__all__``: a :class:`~verifiers.v1.Taskset` (the rows), an :class:`~verifiers.v1.Env`
(how one row becomes an episode) and, optionally, the default :class:`~verifiers.v1.Harness` (the program that
talks to the model). This module defines the three; the package ``sapo_gym_verifiers`` exports them, so the id is
``sapo-gym-verifiers``::

    vf-eval sapo-gym-verifiers --env.taskset.env sapo/ALFWorld-Mini-v0 --env.taskset.split eval_out_of_distribution \\
        --client.base-url http://127.0.0.1:8000/v1 --model my-model

* :class:`SapoTaskset` (config :class:`SapoTasksetConfig`: ``env``, ``split``, ``seeds``, ``env_args``, ``limit``)
  yields one task per task of the split and seed (:func:`sapo_gym.integrations.episodes.task_rows`): its prompt is the env's
  first observation, its ``info`` the task row (env id, split, task id, seed, env arguments, protocol, horizon,
  spec hash, prompt template), which verifiers records on every trace (``trace.task.data.info``).
* :class:`SapoEnv` plays the row's episode with verifiers' own rollout: the env is the run's user, as in
  verifiers' TextArena env. It opens an :meth:`~verifiers.v1.Agent.interaction`, takes the model's reply to the
  prompt, steps the sapo env with it and answers with the next observation, until the env ends the episode (the
  horizon included). The trace gets the return as reward ``return``, :func:`episode_metrics` as metrics and the
  episode's payload (:meth:`EpisodePlay.payload`) under ``trace.info["sapo_gym"]``, so ``traces.jsonl`` holds
  what ``sapo-gym bundle`` turns into a leaderboard bundle.
* :class:`SapoHarness` is the model side: each turn it sends the env's current prompt, alone, as one user message
  (the prompt carries its own history window, as in verl-agent and ``sapo-gym evaluate``), in this process,
  through the rollout's interception endpoint, so verifiers records, limits and scores every call as any
  harness's. The built-in ``null`` harness would send the whole conversation instead, and it runs as a ``uv``
  script that installs its packages at first use.

The text protocols only (``verl-agent-v1``, ``strict-v1``): ``tool-call-v1`` answers with tool calls, which this
harness does not send. The agent's runtime defaults to ``subprocess``: the harness runs no code in it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from sapo_gym.extras import require

require(("verifiers",), "sapo_gym.integrations.verifiers")

import verifiers.v1 as vf  # noqa: E402  (after the check that names the extra)
from openai import AsyncOpenAI  # noqa: E402  (a requirement of verifiers)
from verifiers.v1.types import content_text  # noqa: E402

from sapo_gym.integrations.episodes import PAYLOAD_KEY, EpisodePlay, episode_metrics, task_rows  # noqa: E402

__all__ = [
    "SapoData",
    "SapoTask",
    "SapoTasksetConfig",
    "SapoTaskset",
    "SapoEnvConfig",
    "SapoEnv",
    "SapoHarnessConfig",
    "SapoHarness",
    "TEXT_PROTOCOLS",
]

TEXT_PROTOCOLS = ("verl-agent-v1", "strict-v1")
"""The protocols whose replies are plain text, the ones this harness plays."""


class SapoData(vf.TaskData):
    """A task: the env's first observation as ``prompt``, the task row as ``info``."""

    info: dict[str, Any]


class SapoTask(vf.Task[SapoData]):
    """The env scores the episode itself (:class:`SapoEnv` records the reward): no reward functions here."""


class SapoTasksetConfig(vf.TasksetConfig):
    """``--env.taskset.*``: which env, split, seeds and ``gym.make`` arguments the rows come from."""

    env: str = "sapo/ALFWorld-Mini-v0"
    """A registered sapo_gym id (``sapo-gym envs`` lists them)."""
    split: str | None = None
    """The split (None: the id's first evaluation split, the one its leaderboard board ranks)."""
    seeds: list[int] = [0]
    """One pass over the split per seed (``reset(seed=...)``)."""
    env_args: dict[str, Any] = {}
    """Other ``gym.make`` arguments (``data_dir``, ``history_length``...)."""
    limit: int | None = None
    """Only the first ``limit`` tasks of the split, per seed (a bundle for a board needs them all)."""


def _default_split(env_id: str) -> str | None:
    from sapo_gym.registration import ENVS

    entry = ENVS.get(env_id)
    return entry.eval_splits[0] if entry is not None and entry.eval_splits else None


class SapoTaskset(vf.Taskset[SapoTask, SapoTasksetConfig]):
    """Every task of the split (its first ``limit``) once per seed, seeds outermost (verifiers' ``-n`` takes the first
    rows)."""

    def load(self) -> Iterator[SapoTask]:
        config = self.config
        split = config.split if config.split is not None else _default_split(config.env)
        for row, prompt in task_rows(config.env, split, config.seeds, config.env_args, config.limit):
            if row["protocol"] not in TEXT_PROTOCOLS:
                raise ValueError(
                    f"{config.env} plays protocol {row['protocol']!r}; this environment sends text replies "
                    f"({', '.join(TEXT_PROTOCOLS)})"
                )
            data = SapoData(id=f"{row['task_id']}@{row['seed']}", name=row["task_id"], prompt=prompt, info=row)
            yield SapoTask(data, config.task)


class SapoEnvConfig(vf.EnvConfig):
    """One seat, ``agent``; its runtime is a local subprocess box by default (the harness runs nothing in it)."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class SapoEnv(vf.Env[SapoEnvConfig]):
    """One episode per task: the sapo env answers each reply with its next observation (the module docstring)."""

    async def run(self, task: SapoTask, agents: vf.Agents) -> None:
        play = await asyncio.to_thread(EpisodePlay, task.data.info)
        try:
            async with agents.agent.interaction(task) as interaction:
                segment = await interaction.turn()
                while not segment.terminated:
                    observation, _, done = await asyncio.to_thread(play.step, _reply(segment))
                    if done:
                        break
                    segment = await interaction.turn(observation)
            trace = interaction.trace
            trace.record_reward("return", play.record.episode_return)
            trace.record_metrics(episode_metrics(play.record))
            trace.info[PAYLOAD_KEY] = play.payload()
        finally:
            await asyncio.to_thread(play.close)


def _reply(segment: vf.Segment) -> str:
    """The model's reply as it wrote it (``Segment.last_reply`` strips it)."""
    for message in reversed(segment.messages):
        if isinstance(message, vf.AssistantMessage):
            return content_text(message.content)
    return segment.last_reply


class SapoHarnessConfig(vf.HarnessConfig):
    """No settings: the model, client and sampling are the run's (``--model``, ``--client.*``, ``--sampling.*``)."""


class SapoHarness(vf.Harness[SapoHarnessConfig]):
    """One chat completion per turn on the env's current prompt, through the interception endpoint (in process)."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
    ) -> vf.ProgramResult:
        system, prompt = self.resolve_prompt(data)
        if prompt is None:
            raise ValueError("a sapo_gym task opens with the env's first observation; this one has no prompt")
        # The turn's user message is the env's current prompt: the task's, or the last of a resumed conversation.
        text = prompt if isinstance(prompt, str) else content_text(prompt[-1].content)
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
        async with AsyncOpenAI(base_url=endpoint, api_key=secret) as client:
            await client.chat.completions.create(model=ctx.model, messages=messages)
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")
