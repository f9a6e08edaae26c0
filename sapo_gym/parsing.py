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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["ParsedAction", "Protocol", "PROTOCOLS", "parse_action", "get_protocol"]

_CJK = re.compile("[\u4e00-\u9fff]")

Reason = Literal["ok", "missing_action_tags", "missing_think_tags", "cjk_characters", "inadmissible"]


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
        return ParsedAction(lowered[-fallback_chars:] if fallback_chars > 0 else "", think, False, "missing_action_tags")
    action = inner.strip()
    if think is None:
        return ParsedAction(action, None, False, "missing_think_tags")
    if _CJK.search(text):
        return ParsedAction(action, think, False, "cjk_characters")
    return ParsedAction(action, think, True, "ok")
