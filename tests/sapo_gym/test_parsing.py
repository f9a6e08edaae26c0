"""The verl-agent-v1 action projection, case by case, plus a property test."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sapo_gym.parsing import PROTOCOLS, ParsedAction, get_protocol, parse_action

T = "<think>ok</think>"

CASES = [
    # (raw output, fallback_chars, expected action, valid, reason)
    (f"{T}<action>go to desk 1</action>", 30, "go to desk 1", True, "ok"),
    (f"{T}<action>  Go To Desk 1 \n</action>", 30, "go to desk 1", True, "ok"),  # lower-cased, stripped
    (f"{T}<ACTION>open drawer 2</ACTION>", 30, "open drawer 2", True, "ok"),  # tags matched after lower-casing
    ("<THINK>x</THINK><action>look</action>", 30, "look", False, "missing_think_tags"),  # think is case-sensitive
    ("<action>look</action>", 30, "look", False, "missing_think_tags"),
    (f"{T}<think>", 30, "<think>ok</think><think>"[-30:], False, "missing_action_tags"),
    (f"{T}go to the fridge 1 because it is cold", 30, f"{T}go to the fridge 1 because it is cold".lower()[-30:], False, "missing_action_tags"),
    (f"{T}go to the fridge 1 because it is cold", 20, f"{T}go to the fridge 1 because it is cold".lower()[-20:], False, "missing_action_tags"),
    (f"{T}<action>a</action><action>b</action>", 30, "a", True, "ok"),  # first <action>, first </action>
    (f"{T}<action>a<action>b</action>", 30, "a<action>b", True, "ok"),
    (f"{T}</action>look<action>", 30, "", True, "ok"),  # reversed tags: empty action, still "valid"
    (f"{T}<action></action>", 30, "", True, "ok"),
    (f"{T}<action>   </action>", 30, "", True, "ok"),
    (f"{T}<action>look</action>思考", 30, "look", False, "cjk_characters"),
    ("<think>我想</think><action>look</action>", 30, "look", False, "cjk_characters"),
    (f"{T}<action>look</action>こんにちは", 30, "look", True, "ok"),  # kana are outside U+4E00–U+9FFF
    ("", 30, "", False, "missing_action_tags"),
    ("<action>", 30, "<action>", False, "missing_action_tags"),
    (f"{T}<action>search[red Shoes]</action>", 20, "search[red shoes]", True, "ok"),
]


@pytest.mark.parametrize("text,fallback,action,valid,reason", CASES)
def test_parse_cases(text: str, fallback: int, action: str, valid: bool, reason: str) -> None:
    parsed = parse_action(text, fallback)
    assert (parsed.action, parsed.valid, parsed.reason) == (action, valid, reason)


def test_think_is_extracted_from_original_case() -> None:
    assert parse_action("<think>Plan: Go</think><action>go</action>").think == "Plan: Go"
    assert parse_action("<action>go</action>").think is None


def test_one_megabyte_input() -> None:
    big = "<think>" + "x" * (1 << 20) + "</think><action>look</action>"
    assert parse_action(big) == ParsedAction("look", "x" * (1 << 20), True, "ok")
    junk = "y" * (1 << 20)
    assert parse_action(junk).action == "y" * 30


def test_non_string_input_does_not_raise() -> None:
    assert parse_action(None).valid is False  # type: ignore[arg-type]
    assert parse_action(123).action == "123"  # type: ignore[arg-type]


def test_protocols_are_named_and_versioned() -> None:
    assert set(PROTOCOLS) == {"verl-agent-v1", "strict-v1"}
    assert get_protocol("strict-v1").inadmissible_is_invalid
    with pytest.raises(ValueError, match="valid choices"):
        get_protocol("nope")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(), max_size=400), st.integers(min_value=0, max_value=64))
def test_parse_is_total(text: str, fallback: int) -> None:
    parsed = parse_action(text, fallback)
    assert isinstance(parsed, ParsedAction)
    assert isinstance(parsed.action, str) and len(parsed.action) <= len(text)
    assert parsed.valid == (parsed.reason == "ok")


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=50),
    st.text(alphabet=st.characters(blacklist_characters="<>", blacklist_categories=("Lo",)), max_size=50),
)
def test_well_formed_outputs_round_trip(think: str, action: str) -> None:
    parsed = parse_action(f"<think>{think}</think><action>{action}</action>")
    assert parsed.action == action.lower().strip()
    assert parsed.think == think
