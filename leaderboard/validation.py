"""Strictness the JSON parser and JSON Schema leave out, used by :mod:`leaderboard.bundle`, and the error it raises.

:class:`BundleError` lives here, below the bundle module that re-exports it (``from leaderboard.bundle import
BundleError`` stays the way callers take it), so the checks raise it without importing their caller.

* integer literals are at most :data:`MAX_INT_DIGITS` digits (Python refuses > 4,300 with a bare
  ``ValueError``; nothing in a bundle needs more than 20);
* text is valid Unicode: a ``\\udXXX`` escape without its pair (a lone surrogate) cannot be stored
  or sent back as UTF-8, so it is refused;
* ``"type": "integer"`` means a JSON integer: ``0.0`` and ``1e20`` are numbers, not integers
  (JSON Schema's default admits integral floats; a float seed then fails inside the env);
* ``"format": "date-time"`` is checked (RFC 3339 with real calendar dates and offsets), not
  skipped because an optional package is missing.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from functools import lru_cache
from typing import Any

__all__ = ["BundleError", "MAX_INT_DIGITS", "strict_int", "check_unicode", "is_rfc3339", "make_validator"]

MAX_INT_DIGITS = 64
"""Longest integer literal accepted (digits, sign excluded)."""

_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:[Zz]|([+-])(\d{2}):(\d{2}))")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class BundleError(ValueError):
    """A bundle that cannot be accepted; ``status`` is the HTTP status a server answers with."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.status = status


def strict_int(text: str) -> int:
    """``parse_int`` for :func:`json.loads`: refuse absurdly long literals with a clear message."""
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise BundleError(f"invalid number: an integer literal of {digits} digits (at most {MAX_INT_DIGITS})", status=400)
    return int(text)


def check_unicode(text: str, obj: Any) -> None:
    """Raise a 400 :class:`BundleError` if the parsed ``obj`` holds a lone surrogate.

    Only escapes (``\\udXXX``) can produce one from UTF-8 input, so the full check (an encode of
    the whole document) runs only when the raw ``text`` contains such an escape.
    """
    if not _SURROGATE_ESCAPE.search(text):
        return
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start:exc.end]
        raise BundleError(f"invalid text: lone surrogate {bad.encode('unicode_escape').decode()!s} in a string "
                          f"(every \\ud800-\\udfff escape must be half of a pair)", status=400) from None


def is_rfc3339(value: object) -> bool:
    """RFC 3339 ``date-time`` (section 5.6): a real date, 00-23 h, 00-59 min, 00-60 s, offsets up to 23:59."""
    if not isinstance(value, str):
        return True  # formats only constrain strings
    m = _RFC3339.fullmatch(value)
    if m is None:
        return False
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    try:
        dt.date(year, month, day)
    except ValueError:
        return False
    if hour > 23 or minute > 59 or second > 60:
        return False
    return m.group(8) is None or (int(m.group(9)) <= 23 and int(m.group(10)) <= 59)


def _is_integer(_checker: Any, instance: object) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


@lru_cache(maxsize=None)
def make_validator(schema_json: str) -> Any:
    """A draft 2020-12 validator of ``schema_json`` with strict integers and a real date-time check."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    strict = jsonschema.validators.extend(base, type_checker=base.TYPE_CHECKER.redefine("integer", _is_integer))
    formats = jsonschema.FormatChecker()
    formats.checks("date-time")(is_rfc3339)
    return strict(json.loads(schema_json), format_checker=formats)
