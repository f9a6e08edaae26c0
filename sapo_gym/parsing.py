"""Turning a model's raw output into an environment action.

The default protocol, ``verl-agent-v1``, reproduces the action projection that the paper's
baselines used (verl-agent's ALFWorld/WebShop ``projection``):

1. the whole text is lower-cased;
2. the action is what lies between the *first* ``<action>`` and the *first* ``</action>``
   (after lower-casing, so ``<ACTION>`` works), stripped;
3. without both tags the output is invalid, and its last ``fallback_chars`` characters
   (30 for ALFWorld, 20 for WebShop) are still sent to the environment;
4. without a literal ``<think>`` and ``</think>`` in the *original* text (case-sensitive) it
   is invalid; so is any character in U+4E00–U+9FFF (CJK ideographs);
5. an action that is not admissible is *not* flagged here: the environment answers it with a
   no-op. The stricter ``strict-v1`` protocol flags it, and the env does not execute it.

Reversed tags (``</action>`` before ``<action>``) give an empty action that is still "valid",
exactly as in the reference projection.

``parse_action`` is total: any string, of any size, gives a :class:`ParsedAction`.

Protocol ``tool-call-v1`` takes the action as an OpenAI function call instead (JSON; the shapes it
accepts and the tool's schema are in :mod:`sapo_gym.tools`). :func:`parse_tool_call` is total as
well and keeps the text protocols' flags: ``is_action_valid`` is the call's format (one call of
``take_action`` whose arguments are exactly ``{"command": <string>}``, no character in
U+4E00–U+9FFF in the command or the message content), the command is lower-cased and stripped
like the text protocols' action, and an inadmissible command reaches the env as a no-op, as under
``verl-agent-v1``. A call that is not valid sends its command when one can be read (a string
``command`` beside extra arguments) and the empty string otherwise (there is no tail to fall back
on in JSON). :meth:`Protocol.parse` picks the parser of the protocol.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from sapo_gym.tools import ARGUMENT, TOOL_NAME

__all__ = ["ParsedAction", "Protocol", "PROTOCOLS", "parse_action", "parse_tool_call", "get_protocol"]

_CJK = re.compile("[\u4e00-\u9fff]")

Reason = Literal[
    "ok",
    "missing_action_tags",
    "missing_think_tags",
    "cjk_characters",
    "inadmissible",
    # tool-call-v1
    "bad_json",
    "not_a_tool_call",
    "no_tool_call",
    "multiple_tool_calls",
    "wrong_tool_name",
    "bad_arguments",
    "missing_argument",
    "extra_arguments",
]


@dataclass(frozen=True)
class ParsedAction:
    """Result of parsing one raw model output."""

    action: str
    """What is sent to the environment (may be a fallback tail when ``valid`` is False)."""
    think: str | None
    """The text between the first ``<think>`` and ``</think>``, or None when absent."""
    valid: bool
    """Format validity under the protocol (the paper's ``is_action_valid``)."""
    reason: Reason
    """Why it is invalid (the first rule that failed), or ``"ok"``."""


@dataclass(frozen=True)
class Protocol:
    """A named, versioned action protocol."""

    name: str
    """Versioned name recorded in every result, e.g. ``verl-agent-v1``."""
    inadmissible_is_invalid: bool
    """When True an inadmissible action is flagged invalid and not executed (a no-op turn)."""
    description: str
    action_format: Literal["text", "tool-call"] = "text"
    """``text``: ``<think>…</think><action>…</action>`` (:func:`parse_action`); ``tool-call``: an
    OpenAI function call as JSON (:func:`parse_tool_call`)."""

    def parse(self, text: str, fallback_chars: int = 30) -> ParsedAction:
        """Parse one raw model output under this protocol (total, like both parsers)."""
        if self.action_format == "tool-call":
            return parse_tool_call(text)
        return parse_action(text, fallback_chars)


PROTOCOLS: dict[str, Protocol] = {
    "verl-agent-v1": Protocol(
        "verl-agent-v1",
        inadmissible_is_invalid=False,
        description="verl-agent projection: tags required, inadmissible actions reach the env as no-ops",
    ),
    "strict-v1": Protocol(
        "strict-v1",
        inadmissible_is_invalid=True,
        description="as verl-agent-v1, and an inadmissible action is invalid and never executed",
    ),
    "tool-call-v1": Protocol(
        "tool-call-v1",
        inadmissible_is_invalid=False,
        description="the action is an OpenAI call of the one tool take_action(command); inadmissible commands are no-ops",
        action_format="tool-call",
    ),
}


def get_protocol(name: str) -> Protocol:
    """Look a protocol up by name; a clear error lists the valid names."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; valid choices: {sorted(PROTOCOLS)}") from None


def _between(text: str, open_tag: str, close_tag: str) -> str | None:
    start, end = text.find(open_tag), text.find(close_tag)
    if start == -1 or end == -1:
        return None
    return text[start + len(open_tag) : end]


def parse_action(text: str, fallback_chars: int = 30) -> ParsedAction:
    """Parse a raw model output with the ``verl-agent-v1`` rules (see the module docstring).

    Admissibility is not checked here; environments apply the protocol's admissibility rule.
    """
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    lowered = text.lower()
    inner = _between(lowered, "<action>", "</action>")
    think = _between(text, "<think>", "</think>")
    if inner is None:
        return ParsedAction(
            lowered[-fallback_chars:] if fallback_chars > 0 else "", think, False, "missing_action_tags"
        )
    action = inner.strip()
    if think is None:
        return ParsedAction(action, None, False, "missing_think_tags")
    if _CJK.search(text):
        return ParsedAction(action, think, False, "cjk_characters")
    return ParsedAction(action, think, True, "ok")


def _function_of(call: Any) -> dict[str, Any] | None:
    """The ``{"name", "arguments"}`` object of one tool call (wrapped or bare), or None."""
    if isinstance(call, dict) and isinstance(call.get("function"), dict):
        return call["function"]
    if isinstance(call, dict) and "name" in call:
        return call
    return None


def _calls_of(value: Any) -> tuple[list[dict[str, Any]] | None, str | None]:
    """(the function objects, the message content) of any accepted shape; None when it is none of them."""
    think = None
    if isinstance(value, dict) and "tool_calls" in value:
        content = value.get("content")
        think = content if isinstance(content, str) else None
        value = value["tool_calls"]
    elif isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return None, think
    functions = [_function_of(call) for call in value]
    if any(f is None for f in functions):
        return None, think
    return functions, think  # type: ignore[return-value]


def _arguments_of(function: dict[str, Any]) -> dict[str, Any] | None:
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return None
    return arguments if isinstance(arguments, dict) else None


def parse_tool_call(text: str) -> ParsedAction:
    """Parse a raw output under ``tool-call-v1`` (see the module docstring and :mod:`sapo_gym.tools`)."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return ParsedAction("", None, False, "bad_json")
    functions, think = _calls_of(value)
    if functions is None or len(functions) != 1:
        reason: Reason = (
            "not_a_tool_call" if functions is None else "multiple_tool_calls" if functions else "no_tool_call"
        )
        return ParsedAction("", think, False, reason)
    if functions[0].get("name") != TOOL_NAME:
        return ParsedAction("", think, False, "wrong_tool_name")
    arguments = _arguments_of(functions[0])
    if arguments is None:
        return ParsedAction("", think, False, "bad_arguments")
    if ARGUMENT not in arguments:
        return ParsedAction("", think, False, "missing_argument")
    command = arguments[ARGUMENT]
    if not isinstance(command, str):
        return ParsedAction("", think, False, "bad_arguments")
    action = command.lower().strip()
    if len(arguments) != 1:
        return ParsedAction(action, think, False, "extra_arguments")
    if _CJK.search(command) or (think is not None and _CJK.search(think)):
        return ParsedAction(action, think, False, "cjk_characters")
    return ParsedAction(action, think, True, "ok")
