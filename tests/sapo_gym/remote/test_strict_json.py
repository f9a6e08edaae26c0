"""The server's JSON parser: its scan of the text skips the walk of the value only where the walk could refuse
nothing, so every text gets the verdict the walk gives."""

from __future__ import annotations

import json
import random

import pytest

from sapo_gym.remote import strict_json
from sapo_gym.remote.strict_json import MAX_DEPTH, NotJSON


def walked(text: str) -> str:
    """The verdict of decoding ``text`` and always walking the value: ``"ok"`` or the refusal's message."""
    try:
        value = strict_json._DECODER.decode(text)
        strict_json.check_tree(value)
    except RecursionError:
        return f"nested deeper than {MAX_DEPTH} levels"
    except NotJSON as exc:
        return str(exc)
    except ValueError as exc:
        return str(exc)[:300]
    return "ok"


def verdict(text: str) -> str:
    try:
        strict_json.loads(text)
    except NotJSON as exc:
        return str(exc)
    return "ok"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[" * MAX_DEPTH + "]" * MAX_DEPTH, "ok"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "deeper"),
        ('{"a": ' * (MAX_DEPTH - 1) + "[1]" + "}" * (MAX_DEPTH - 1), "ok"),
        ('{"a": ' * MAX_DEPTH + "[1]" + "}" * MAX_DEPTH, "deeper"),
        ('{"a": "' + "[{" * 100 + '"}', "ok"),  # brackets in a string: walked, and shallow
        ('{"text": "\\ud800"}', "surrogate"),  # a lone surrogate as an escape
        ('{"\\udfff": 1}', "surrogate"),  # in a key
        ('{"text": "\\ud83d\\ude00"}', "ok"),  # a pair is one character
        ('{"text": "\\u00e9"}', "ok"),
        ('{"text": "\ud800"}', "surrogate"),  # a lone surrogate in the text itself
        ('{"text": "caf\u00e9"}', "ok"),
    ],
    ids=[
        "depth-at-bound",
        "depth-past-bound",
        "objects-at-bound",
        "objects-past-bound",
        "brackets-in-a-string",
        "escaped-lone-surrogate",
        "escaped-surrogate-key",
        "escaped-pair",
        "escaped-bmp",
        "raw-lone-surrogate",
        "raw-non-ascii",
    ],
)
def test_each_rule_holds_on_both_sides_of_the_scan(text: str, expected: str) -> None:
    got = verdict(text)
    assert (got == "ok") if expected == "ok" else (expected in got), got
    assert got == walked(text)


PIECES = ["a", "[", "{", "]", "\\", "\u00e9", "\ud800", "\udc00", "\U0001f600", '"', " "]


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randrange(4)))


def _value(rng: random.Random, depth: int) -> object:
    """A value nested exactly ``depth`` deep along one spine, with leaf strings (brackets, escapes, surrogates)
    beside it."""
    if depth == 0:
        return _text(rng) if rng.random() < 0.7 else rng.randrange(9)
    inner = _value(rng, depth - 1)
    if rng.random() < 0.5:
        return [inner, _text(rng)][: rng.randrange(1, 3)]
    return {_text(rng): inner}


def test_the_scan_never_changes_a_verdict() -> None:
    """Random values shallow and at the depth bound, strings with brackets, escapes and lone surrogates, written with
    and without ``ensure_ascii``: the parser's verdict is the always-walked one for each (2,000 texts, seed 0)."""
    rng = random.Random(0)
    kinds = {"ok": 0, "refused": 0, "scanned": 0}
    for _ in range(1000):
        value = _value(rng, rng.choice((1, 5, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1)))
        for ensure_ascii in (True, False):
            text = json.dumps(value, ensure_ascii=ensure_ascii)
            got = verdict(text)
            assert got == walked(text), text[:200]
            kinds["ok" if got == "ok" else "refused"] += 1
            kinds["scanned"] += strict_json._tree_within_rules(text)
    assert min(kinds.values()) > 100, kinds  # both verdicts, and the scan's skip, drawn often: both sides covered
