"""Bounds on what an agent (or the model server behind it) hands the harness: its output and its accounting.

An output is what the env steps and what the episodes log and the bundle record, so it is checked once, here,
before any of them sees it (:func:`bound_output`): a string of at most :data:`~sapo_gym.core.ACTION_MAX_LENGTH`
characters (the action space's bound; a longer one is cut to it, so the env, the log and the bundle hold the
same text), encodable as UTF-8 (a lone surrogate is refused: no log or bundle could hold it).

Accounting numbers come from a server and are not trusted (:func:`clean_usage`): token counts are ints in
``[0, MAX_TOKEN_COUNT]``, a latency a finite number of seconds in ``[0, MAX_LATENCY_S]``, a finish reason a short
string; anything else is recorded as unknown (None), with a warning on stderr (once per field and process).
"""

from __future__ import annotations

import math
import sys
import threading
from typing import Any

from sapo_gym.core import ACTION_MAX_LENGTH

__all__ = [
    "MAX_TOKEN_COUNT",
    "MAX_LATENCY_S",
    "MAX_FINISH_REASON",
    "OutputError",
    "bound_output",
    "token_count",
    "latency",
    "finish_reason",
    "clean_usage",
    "warn_once",
]

MAX_TOKEN_COUNT = 1 << 31
"""The largest token count one request may report (no context window is near it; a count above it is unknown)."""
MAX_LATENCY_S = 1e7
"""The largest latency a turn may record, in seconds (about four months)."""
MAX_FINISH_REASON = 64
"""The longest finish reason kept (``stop``, ``length``, ``tool_calls``, ``content_filter``...)."""

_warned: set[str] = set()
_warned_lock = threading.Lock()


class OutputError(ValueError):
    """An agent's output that no env step, log or bundle can take (not a string, or not encodable as UTF-8)."""


def warn_once(key: str, message: str) -> None:
    """``warning: message`` on stderr, the first time ``key`` is warned about in this process."""
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    sys.stderr.write(f"warning: {message}\n")


def bound_output(output: Any) -> str:
    """``output`` cut to the action space's bound; :class:`OutputError` for a non-string or a lone surrogate."""
    if not isinstance(output, str):
        raise OutputError(f"the agent's output is {type(output).__name__}, not a string")
    if len(output) > ACTION_MAX_LENGTH:
        warn_once(
            "output",
            f"an agent output of {len(output):,} characters was cut to the action bound of "
            f"{ACTION_MAX_LENGTH:,} (what the env steps and what the log and bundle record)",
        )
        output = output[:ACTION_MAX_LENGTH]
    try:
        output.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise OutputError(
            f"the agent's output cannot be encoded as UTF-8 (a lone surrogate at character {exc.start})"
        ) from None
    return output


def token_count(value: Any, name: str = "token count") -> int | None:
    """A reported token count: an int in ``[0, MAX_TOKEN_COUNT]``, else None (with a warning unless it was None)."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_COUNT:
        return value
    warn_once(
        name, f"a {name} that is not an integer in [0, {MAX_TOKEN_COUNT}] was recorded as unknown: {_show(value)}"
    )
    return None


def latency(value: Any) -> float | None:
    """A latency in seconds: a finite number in ``[0, MAX_LATENCY_S]``, else None (with a warning unless it was None)."""
    if value is None:
        return None
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= MAX_LATENCY_S
    ):
        return float(value)
    warn_once(
        "latency_s",
        f"a latency that is not a number of seconds in [0, {MAX_LATENCY_S:g}] was recorded as unknown: {_show(value)}",
    )
    return None


def finish_reason(value: Any) -> str | None:
    """A finish reason: a string of at most :data:`MAX_FINISH_REASON` characters, encodable as UTF-8, else None."""
    if value is None:
        return None
    if isinstance(value, str) and len(value) <= MAX_FINISH_REASON:
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            pass
    warn_once("finish_reason", f"a finish reason that is not a short string was recorded as unknown: {_show(value)}")
    return None


def clean_usage(reply: dict[str, Any]) -> dict[str, Any]:
    """The accounting of one turn (``prompt_tokens``, ``completion_tokens``, ``latency_s``, ``finish_reason``), bounded."""
    return {
        "prompt_tokens": token_count(reply.get("prompt_tokens"), "prompt_tokens"),
        "completion_tokens": token_count(reply.get("completion_tokens"), "completion_tokens"),
        "latency_s": latency(reply.get("latency_s")),
        "finish_reason": finish_reason(reply.get("finish_reason")),
    }


def _show(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
