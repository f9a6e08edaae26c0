"""Strictness the JSON parser and JSON Schema leave out, used by :mod:`sapo_gym.bundle`, and the error it raises.

:class:`BundleError` lives here, below the bundle module that re-exports it (``from sapo_gym.bundle import
BundleError`` stays the way callers take it), so the checks raise it without importing their caller.

* the number rules of :mod:`sapo_gym.remote.strict_json` (the env server's parser), in a bundle's words: integer
  literals of at most :data:`MAX_INT_DIGITS` digits (Python refuses > 4,300 with a bare ``ValueError``; nothing in
  a bundle needs more than 20), no ``NaN``/``Infinity`` and no literal that overflows a float;
* text is valid Unicode (strict_json's rule too): a ``\\udXXX`` escape without its pair (a lone surrogate) cannot
  be stored or sent back as UTF-8, so it is refused;
* ``"type": "integer"`` means a JSON integer: ``0.0`` and ``1e20`` are numbers, not integers
  (JSON Schema's default admits integral floats; a float seed then fails inside the env);
* ``"format": "date-time"`` is checked (RFC 3339 with real calendar dates and offsets), not
  skipped because an optional package is missing.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from functools import cache
from typing import Any

from sapo_gym.remote import strict_json
from sapo_gym.remote.strict_json import MAX_INT_DIGITS

__all__ = [
    "BundleError",
    "MAX_INT_DIGITS",
    "strict_int",
    "finite_float",
    "no_constant",
    "check_unicode",
    "is_rfc3339",
    "make_validator",
]

_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:[Zz]|([+-])(\d{2}):(\d{2}))")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class BundleError(ValueError):
    """A bundle that cannot be accepted; ``status`` is the HTTP status a server answers with."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.status = status


def strict_int(text: str) -> int:
    """``parse_int`` for :func:`json.loads`: refuse absurdly long literals with a clear message."""
    try:
        return strict_json.bounded_int(text)
    except ValueError as exc:
        raise BundleError(f"invalid number: {exc}", status=400) from None


def finite_float(text: str) -> float:
    """``parse_float`` for :func:`json.loads`: refuse a literal that overflows to infinity."""
    try:
        return strict_json.finite_float(text)
    except ValueError as exc:
        raise BundleError(f"invalid number: {exc}", status=400) from None


def no_constant(name: str) -> Any:
    """``parse_constant`` for :func:`json.loads`: ``NaN`` and ``Infinity`` are refused."""
    try:
        return strict_json.no_constant(name)
    except ValueError as exc:
        raise BundleError(f"invalid number: {exc}", status=400) from None


def check_unicode(text: str, obj: Any) -> None:
    """Raise a 400 :class:`BundleError` if the parsed ``obj`` holds a lone surrogate.

    Only escapes (``\\udXXX``) can produce one from UTF-8 input, so the full check (strict_json's walk of every
    string and key, at any depth) runs only when the raw ``text`` contains such an escape.
    """
    if not _SURROGATE_ESCAPE.search(text):
        return
    try:
        strict_json.check_tree(obj, max_depth=None)
    except strict_json.NotJSON as exc:
        raise BundleError(f"invalid text: {exc}", status=400) from None


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


@cache
def make_validator(schema_json: str) -> Any:
    """A draft 2020-12 validator of ``schema_json`` with strict integers and a real date-time check."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    strict = jsonschema.validators.extend(base, type_checker=base.TYPE_CHECKER.redefine("integer", _is_integer))
    formats = jsonschema.FormatChecker()
    formats.checks("date-time")(is_rfc3339)
    return strict(json.loads(schema_json), format_checker=formats)
