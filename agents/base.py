"""The agent shapes shared by evaluation, the leaderboard and the trainers.

They stand on what the evaluation harness asks of an agent (:mod:`sapo_gym.interfaces`): an :class:`Agent` is a
named :class:`~sapo_gym.interfaces.BatchActor`; one that also answers one env's turn at a time is, besides, a
:class:`~sapo_gym.interfaces.TurnResponder` (:class:`agents.openai_agent.OpenAIChatAgent`; the pool plays it so);
a :class:`DetailedAgent` also hands over each turn's tokens and log-probs, which the trainer learns from
(:class:`agents.llm.LLMAgent`). An agent may declare ``privileged = True`` (it is shown the full info:
:func:`sapo_gym.records.is_privileged`), and an LLM agent says how it decodes (``constrain``) and samples
(``generation``) for the result bundle.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from agents.generation.base import GenerationOutput, Generator
from sapo_gym.interfaces import BatchActor

__all__ = ["Agent", "DetailedAgent", "format_action"]


@runtime_checkable
class Agent(BatchActor, Protocol):
    """Acts for a batch of envs at once.

    ``act`` receives the observations (prompts) and infos of the *active* envs only and returns
    one raw output per env (the text a model would produce, ``<think>…</think><action>…</action>``, or
    a ``take_action`` call as JSON under ``tool-call-v1``: :func:`format_action`).
    ``reset`` is called before a new batch of episodes.
    """

    name: str


class DetailedAgent(Agent, Protocol):
    """An :class:`Agent` whose turns a trainer can learn from."""

    generator: Generator
    """The sampler behind ``act``: the trainer pushes each update's weights to it."""

    def act_detailed(
        self, observations: Sequence[str], infos: Sequence[dict[str, Any]] | None = None
    ) -> list[GenerationOutput]:
        """``act``'s turns in full: per active env, the prompt's and the response's token ids and the log-probs."""
        ...


def format_action(action: str, think: str = "", info: Mapping[str, Any] | None = None) -> str:
    """``action`` written the way a well-formed model output looks under the env's protocol.

    The tags ``<think>…</think><action>…</action>`` (``verl-agent-v1``, ``strict-v1``), or, when the
    turn's ``info`` publishes ``tools`` (``tool-call-v1``), the assistant message calling ``take_action``
    as JSON, with ``think`` as its content.
    """
    if info is not None and info.get("tools"):
        from sapo_gym.tools import assistant_tool_message

        return json.dumps(assistant_tool_message(action, f"call_{int(info.get('step', 0))}", content=think or None))
    return f"<think>{think}</think><action>{action}</action>"
