"""Streaming a JSON file's top-level array or object: the members json.load gives, in bounded buffers; faults named."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from sapo_gym.webshop import jsonstream
from sapo_gym.webshop.catalog import CatalogError
from sapo_gym.webshop.jsonstream import iter_array, iter_object


def _members(seed: int) -> list:
    rng = random.Random(seed)
    members: list = [
        {
            "a": 'x\u00e9\\"\u203a' * rng.randint(0, 40),
            "n": rng.random() * 1e6,
            "l": [1, 2.5, None, True, False, "é›", -1e-7, 12345678901234567890],
        }
        for _ in range(40)
    ]
    return members + [12345, 3.5e10, "s", [], {}, True, None, -0.0, "", [[[]]]]


@pytest.mark.parametrize("read_chars", [1, 2, 3, 7, 50, 1 << 20])
def test_members_are_json_loads_whatever_the_buffer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_chars: int
) -> None:
    monkeypatch.setattr(jsonstream, "READ_CHARS", read_chars)  # members split across blocks anywhere, numbers too
    members = _members(read_chars)
    path = tmp_path / "a.json"
    path.write_text(json.dumps(members, indent=2 if read_chars % 2 else None, ensure_ascii=read_chars % 3 == 0))
    assert list(iter_array(path)) == json.loads(path.read_text())
    keyed = {f"k{i}": m for i, m in enumerate(members)}
    path.write_text(json.dumps(keyed))
    assert list(iter_object(path)) == list(keyed.items())
    path.write_text("  [ ]\n")
    assert list(iter_array(path)) == []


@pytest.mark.parametrize(
    "text, where",
    [
        ('[{"a": 1}, {"a": ', "#1"),
        ('[{"a": 1} {"a": 2}]', "after #0"),
        ("[1, 2", "after #1"),
        ('[{"a": "unterminated]', "#0"),
        ("[1, }", "#1"),
        ("", "<top>"),
        ("[1]x", "<end>"),
        ('{"a": 1, 2: 3}', "#1"),
        ('{"a" 1}', "a"),
    ],
)
def test_a_malformed_file_names_itself_and_the_member(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, where: str
) -> None:
    monkeypatch.setattr(jsonstream, "READ_CHARS", 3)
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(CatalogError, match=f"bad.json: record {where}: "):
        list(iter_object(path) if text.startswith("{") else iter_array(path))
