"""The server's one JSON parser, for HTTP request bodies and WebSocket frames alike.

``json.loads`` with every input bounded, so that no body or frame a client can send raises anything but
:class:`NotJSON` (a ``ValueError``) or costs more than linear time:

* an integer literal of at most :data:`MAX_INT_DIGITS` digits (Python's own ``int()`` refuses more than
  4,300 with an error of its own, and a longer literal costs quadratic time);
* no ``NaN``, ``Infinity`` or ``-Infinity`` (not JSON), and no number literal that overflows a float
  (``1e999``);
* nesting at most :data:`MAX_DEPTH` arrays and objects deep (deeper input overflows the parser's
  recursion, and pydantic refuses to serialise an error that echoes input ~250 levels deep);
* text that is valid Unicode: no lone surrogate (``"\\ud800"`` without its pair), which a reply that
  echoes it (an action's text) could not be encoded in.

Whether the top level is an object is the caller's question (HTTP answers ``not_an_object``). The rules are public
(:func:`bounded_int`, :func:`finite_float`, :func:`no_constant` for :func:`json.loads`' hooks, :func:`check_tree`):
the leaderboard's bundle parser (:mod:`sapo_gym.bundle_validation`) holds bundles to the same ones, in its own words.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = [
    "MAX_INT_DIGITS",
    "MAX_DEPTH",
    "NotJSON",
    "loads",
    "bounded_int",
    "finite_float",
    "no_constant",
    "check_tree",
]

MAX_INT_DIGITS = 64
"""Digits of the longest integer literal (a seed is < 2**128: 39 digits)."""

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects, the top level counted (a reset frame is 3 deep)."""


class NotJSON(ValueError):
    """The text is not JSON by the server's rules (the message says which rule)."""


def loads(data: str | bytes) -> Any:
    """``data`` (UTF-8 bytes or text) decoded by the rules of the module docstring; :class:`NotJSON` otherwise.
    Text goes to one decoder built once (``json.loads`` with hooks builds a decoder a call), after ``json.loads``'s
    own check for a byte-order mark; bytes go through ``json.loads``, which finds their encoding."""
    try:
        if not isinstance(data, str):
            value = json.loads(data, parse_int=bounded_int, parse_float=finite_float, parse_constant=no_constant)
        elif data.startswith("\ufeff"):
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", data, 0)
        else:
            value = _DECODER.decode(data)
    except RecursionError:
        raise NotJSON(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError and the hooks' errors
        raise NotJSON(str(exc)[:300]) from None
    if not isinstance(data, str) or not _tree_within_rules(data):
        check_tree(value)
    return value


def _tree_within_rules(text: str) -> bool:
    """Whether the text alone proves what :func:`check_tree` checks of its value, by a scan in C instead of a walk in
    Python (a served step's frame: ~4 us less): every string of ASCII text without a ``\\u`` escape is ASCII, so no
    lone surrogate; and a value nested ``d`` deep opens ``d`` arrays or objects, each with a ``[`` or ``{`` of the
    text (brackets inside strings only make the count larger). False: walk the value."""
    return text.isascii() and "\\u" not in text and text.count("[") + text.count("{") <= MAX_DEPTH


def bounded_int(text: str) -> int:
    """``parse_int``: the literal's value, or a ValueError past :data:`MAX_INT_DIGITS` digits."""
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise ValueError(f"an integer literal of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def finite_float(text: str) -> float:
    """``parse_float``: the literal's value, or a ValueError when it overflows a float."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} overflows a float")
    return value


def no_constant(name: str) -> Any:
    """``parse_constant``: always a ValueError (``NaN``, ``Infinity``, ``-Infinity``)."""
    raise ValueError(f"{name} is not JSON (NaN and Infinity are not numbers JSON has)")


_DECODER = json.JSONDecoder(parse_int=bounded_int, parse_float=finite_float, parse_constant=no_constant)
"""The decoder ``json.loads`` builds for these hooks (it keeps no state between calls)."""


def check_tree(value: Any, max_depth: int | None = MAX_DEPTH) -> None:
    """Refuse (:class:`NotJSON`) nesting past ``max_depth`` (None: any) and lone surrogates in strings and keys, in
    a parsed ``value`` (one walk, no recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            _check_text(node)
            continue
        if not isinstance(node, (list, dict)):
            continue
        if max_depth is not None and depth > max_depth:
            raise NotJSON(f"nested deeper than {max_depth} levels")
        if isinstance(node, dict):
            for key in node:
                _check_text(key)
            children = node.values()
        else:
            children = node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (str, list, dict)))


def _check_text(text: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start : exc.end].encode("unicode_escape").decode()
        raise NotJSON(f"lone surrogate {bad} at character {exc.start} of a string (not valid Unicode)") from None
