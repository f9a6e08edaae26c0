"""The turn as OpenAI chat messages: ``info["messages"]``, and the way back to the prompt string.

:func:`attach_chat`, the chat hook registration hands to :class:`~sapo_gym.prompts.HistoryPrompt`, puts the
turn into ``info["messages"]`` beside the prompt string; both come from the same state, and :func:`render_prompt` turns the messages back into the
prompt exactly (``render_prompt(info["messages"], template) == obs``, tested over whole episodes).
The messages hold what the prompt holds, as a chat API expects it:

1. ``system``: a fixed framing (the role, and the answer format of the protocol), then
   ``"\\n\\nYour task is to: "`` and the task;
2. for each (observation, action) pair the prompt's history shows, numbered by its real step ``j``:
   the observation as ``"Observation {j}: {observation}"`` (``user`` for the first one shown,
   else the ``tool`` answer to the previous call under ``tool-call-v1``), then the action as the
   model must write it: ``"<think></think><action>{action}</action>"`` (the prompt drops the
   thinking, so do the messages), or under ``tool-call-v1`` an assistant message calling
   ``take_action`` with ``{"command": action}``;
3. the current turn, in the same role: ``"Observation {t+1}: {observation}\\n\\nAdmissible actions:
   " + json.dumps(admissible_actions)``.

Every field comes back without guessing: the task follows the first marker (the framing has none),
the step number ends at the first ``": "``, and the admissible actions follow the *last*
``"\\n\\nAdmissible actions: "`` (their JSON holds no raw newline). ``info["tools"]`` carries the
tool schema under ``tool-call-v1`` (:mod:`sapo_gym.tools`). A turn whose prompt shows no history
(``history_length=0``, WebShop's length budget, a template without ``{action_history}``) has none
in its messages either. Envs made with
``prompt=None`` (raw observations) have no ``HistoryPrompt``, so no messages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sapo_gym.prompts import PromptTemplate, render
from sapo_gym.tools import ARGUMENT, assistant_tool_message, tool_schema

__all__ = ["ChatTurn", "chat_messages", "parse_messages", "render_prompt", "attach_chat", "tool_result", "FRAMING"]

TASK_MARK = "\n\nYour task is to: "
ADMISSIBLE_MARK = "\n\nAdmissible actions: "
_OBSERVATION = "Observation "
_ACTION_OPEN, _ACTION_CLOSE = "<think></think><action>", "</action>"

_COMMON = (
    "You are an expert agent acting in a text environment. Each turn shows your observation and "
    "the admissible actions; earlier turns show your recent observations and the actions you took."
)
FRAMING: dict[str, str] = {
    "text": _COMMON + " First reason step-by-step about the current situation within <think> </think> "
    "tags, then choose one admissible action and present it within <action> </action> tags.",
    "tool-call": _COMMON + " Reason step-by-step about the current situation, then call the tool "
    "take_action exactly once with one admissible action as its command.",
}
"""The system message's fixed text per action format (``Protocol.action_format``)."""


@dataclass(frozen=True)
class ChatTurn:
    """What one prompt shows, as fields: the same state the template formats."""

    task: str
    steps: int
    """Steps taken before this turn (the prompt's ``step_count``; the current step is ``steps + 1``)."""
    history: tuple[tuple[str, str], ...]
    """The (observation, parsed action) pairs the prompt shows, oldest first: steps ``steps - len + 1`` … ``steps``."""
    observation: str
    admissible_actions: tuple[str, ...]
    action_format: str = "text"


def _observation_text(step: int, observation: str) -> str:
    return f"{_OBSERVATION}{step}: {observation}"


def _assistant(action: str, step: int, action_format: str) -> dict[str, Any]:
    if action_format == "tool-call":
        return assistant_tool_message(action, f"call_{step}")
    return {"role": "assistant", "content": f"{_ACTION_OPEN}{action}{_ACTION_CLOSE}"}


def _observer(previous: dict[str, Any] | None, content: str) -> dict[str, Any]:
    """The message that shows an observation: the tool's answer to the previous call, else the user's."""
    if previous is not None and previous.get("tool_calls"):
        return {"role": "tool", "tool_call_id": previous["tool_calls"][0]["id"], "content": content}
    return {"role": "user", "content": content}


def chat_messages(turn: ChatTurn) -> list[dict[str, Any]]:
    """The OpenAI chat messages of one turn (see the module docstring for the layout)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": FRAMING[turn.action_format] + TASK_MARK + turn.task}
    ]
    first = turn.steps - len(turn.history) + 1
    previous: dict[str, Any] | None = None
    for i, (observation, action) in enumerate(turn.history):
        messages.append(_observer(previous, _observation_text(first + i, observation)))
        previous = _assistant(action, first + i, turn.action_format)
        messages.append(previous)
    messages.append(_observer(previous, _current_text(turn.steps + 1, turn.observation, turn.admissible_actions)))
    return messages


def _current_text(step: int, observation: str, admissible_actions: Sequence[str]) -> str:
    return (
        _observation_text(step, observation)
        + ADMISSIBLE_MARK
        + json.dumps(list(admissible_actions), ensure_ascii=False)
    )


def tool_result(info: dict[str, Any]) -> str:
    """What a tool-calling trainer answers a ``take_action`` call with: the new observation and the admissible actions.

    ``"Observation {t+1}: {observation}\n\nAdmissible actions: [...]"``, the content of the last message of
    ``info["messages"]`` (the env's own ``tool`` message under ``tool-call-v1``), not the whole re-rendered prompt
    (the task and the recent history are already in the conversation). Built from the info fields, so raw envs
    (``prompt=None``) and served ones (``sapo/Remote-v0``) give it too; ``step`` counts the steps taken.
    """
    return _current_text(info["step"] + 1, info["raw_observation"], info["admissible_actions"])


def _read_observation(content: str) -> tuple[int, str]:
    if not content.startswith(_OBSERVATION):
        raise ValueError(f"not an observation message: {content[:80]!r}")
    number, sep, observation = content[len(_OBSERVATION) :].partition(": ")
    if not sep or not number.isdigit():
        raise ValueError(f"no step number in {content[:80]!r}")
    return int(number), observation


def _read_action(message: dict[str, Any]) -> tuple[str, str]:
    """(action, action format) of an assistant message written by :func:`chat_messages`."""
    if message.get("tool_calls"):
        return json.loads(message["tool_calls"][0]["function"]["arguments"])[ARGUMENT], "tool-call"
    content = message["content"]
    if not (content.startswith(_ACTION_OPEN) and content.endswith(_ACTION_CLOSE)):
        raise ValueError(f"not an action message: {content[:80]!r}")
    return content[len(_ACTION_OPEN) : len(content) - len(_ACTION_CLOSE)], "text"


def parse_messages(messages: Sequence[dict[str, Any]]) -> ChatTurn:
    """The exact inverse of :func:`chat_messages`; a ValueError for messages it did not write."""
    if len(messages) % 2 or messages[0].get("role") != "system" or TASK_MARK not in messages[0]["content"]:
        raise ValueError("expected a system message with the task, then observation/action pairs and the current turn")
    framing, _, task = messages[0]["content"].partition(TASK_MARK)
    body, last = list(messages[1:-1]), messages[-1]["content"]
    numbered, sep, admissible = last.rpartition(ADMISSIBLE_MARK)
    if not sep:
        raise ValueError("the last message lists no admissible actions")
    current, observation = _read_observation(numbered)
    history, formats = [], [k for k, text in FRAMING.items() if text == framing]
    for shown, acted in zip(body[0::2], body[1::2]):
        step, seen = _read_observation(shown["content"])
        action, action_format = _read_action(acted)
        if step != current - len(body) // 2 + len(history):
            raise ValueError(f"observation {step} out of order")
        history.append((seen, action))
        formats.append(action_format)
    if len(set(formats)) != 1:
        raise ValueError(f"the framing and the actions disagree on the action format: {sorted(set(formats))}")
    return ChatTurn(task, current - 1, tuple(history), observation, tuple(json.loads(admissible)), formats[0])


def render_prompt(messages: Sequence[dict[str, Any]], template: PromptTemplate) -> str:
    """The prompt string ``template`` (a :class:`~sapo_gym.prompts.PromptTemplate`) renders for these messages.

    It runs the wrapper's own :func:`sapo_gym.prompts.render` on the fields read back from the messages, so
    the template's own wording (history lines included) is never restated here.
    """
    turn = parse_messages(messages)
    info = {"task": turn.task, "raw_observation": turn.observation, "admissible_actions": list(turn.admissible_actions)}
    return render(template, info, list(turn.history), turn.steps, len(turn.history))


def attach_chat(info: dict[str, Any], shown: Sequence[tuple[str, str]], steps: int, env: Any) -> None:
    """Add ``messages`` (and ``tools`` under a tool-call protocol) to ``info``: the ``chat`` hook (:data:`sapo_gym.prompts.ChatHook`)
    registration hands to HistoryPrompt.

    ``shown`` is the history the turn's prompt shows: none when the prompt is the one rendered without it (WebShop's
    length budget, a template without ``{action_history}``), so the messages show none either.
    """
    action_format = getattr(getattr(env, "protocol", None), "action_format", "text")
    turn = ChatTurn(
        info["task"], steps, tuple(shown), info["raw_observation"], tuple(info["admissible_actions"]), action_format
    )
    info["messages"] = chat_messages(turn)
    if action_format == "tool-call":
        info["tools"] = tool_schema()
