"""The verl-agent-v1 action projection and the tool-call-v1 parser, case by case, plus property tests."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from hypothesis import given, settings, strategies as st

import sapo_gym  # noqa: F401
from sapo_gym.parsing import PROTOCOLS, ParsedAction, get_protocol, parse_action, parse_tool_call
from sapo_gym.tools import TOOL_NAME, assistant_tool_message, tool_call, tool_schema

T = "<think>ok</think>"

CASES = [
    # (raw output, fallback_chars, expected action, valid, reason)
    (f"{T}<action>go to desk 1</action>", 30, "go to desk 1", True, "ok"),
    (f"{T}<action>  Go To Desk 1 \n</action>", 30, "go to desk 1", True, "ok"),  # lower-cased, stripped
    (f"{T}<ACTION>open drawer 2</ACTION>", 30, "open drawer 2", True, "ok"),  # tags matched after lower-casing
    ("<THINK>x</THINK><action>look</action>", 30, "look", False, "missing_think_tags"),  # think is case-sensitive
    ("<action>look</action>", 30, "look", False, "missing_think_tags"),
    (f"{T}<think>", 30, "<think>ok</think><think>"[-30:], False, "missing_action_tags"),
    (
        f"{T}go to the fridge 1 because it is cold",
        30,
        f"{T}go to the fridge 1 because it is cold".lower()[-30:],
        False,
        "missing_action_tags",
    ),
    (
        f"{T}go to the fridge 1 because it is cold",
        20,
        f"{T}go to the fridge 1 because it is cold".lower()[-20:],
        False,
        "missing_action_tags",
    ),
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
    assert set(PROTOCOLS) == {"verl-agent-v1", "strict-v1", "tool-call-v1"}
    assert get_protocol("strict-v1").inadmissible_is_invalid
    assert (
        not get_protocol("tool-call-v1").inadmissible_is_invalid
        and get_protocol("tool-call-v1").action_format == "tool-call"
    )
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


def _args(**kw: object) -> str:
    return json.dumps(kw)


def _fn(name: str = TOOL_NAME, arguments: object = None) -> dict:
    return {"name": name, "arguments": _args(command="Go To Desk 1 ") if arguments is None else arguments}


TOOL_CASES = [
    # (raw output, expected action, think, valid, reason)
    (
        json.dumps(assistant_tool_message("go to desk 1", "call_1", "I should go.")),
        "go to desk 1",
        "I should go.",
        True,
        "ok",
    ),
    (json.dumps([tool_call("look", "c")]), "look", None, True, "ok"),  # the tool_calls list
    (json.dumps(tool_call("look", "c")), "look", None, True, "ok"),  # one tool call
    (json.dumps(_fn()), "go to desk 1", None, True, "ok"),  # the bare function; lower-cased and stripped
    (json.dumps(_fn(arguments={"command": "look"})), "look", None, True, "ok"),  # arguments as an object
    ("<think>x</think><action>look</action>", "", None, False, "bad_json"),
    ("", "", None, False, "bad_json"),
    ('{"name": "take_action", "arguments": ', "", None, False, "bad_json"),
    ("[" * 100_000, "", None, False, "bad_json"),  # too deep for the decoder: still an answer
    (json.dumps({"role": "assistant", "content": "look"}), "", None, False, "not_a_tool_call"),
    (json.dumps("look"), "", None, False, "not_a_tool_call"),
    (json.dumps([1]), "", None, False, "not_a_tool_call"),
    (json.dumps({"role": "assistant", "content": "hm", "tool_calls": None}), "", "hm", False, "not_a_tool_call"),
    (json.dumps({"role": "assistant", "content": "hm", "tool_calls": []}), "", "hm", False, "no_tool_call"),
    (json.dumps([tool_call("look", "a"), tool_call("inventory", "b")]), "", None, False, "multiple_tool_calls"),
    (json.dumps(_fn(name="act")), "", None, False, "wrong_tool_name"),
    (json.dumps(_fn(arguments="look")), "", None, False, "bad_arguments"),  # arguments not JSON
    (json.dumps(_fn(arguments=_args(command=3))), "", None, False, "bad_arguments"),
    (json.dumps(_fn(arguments="[1]")), "", None, False, "bad_arguments"),
    (json.dumps(_fn(arguments=_args(action="look"))), "", None, False, "missing_argument"),
    (json.dumps(_fn(arguments=_args(command="look", why="x"))), "look", None, False, "extra_arguments"),
    (json.dumps(_fn(arguments=_args(command="look 思考"))), "look 思考", None, False, "cjk_characters"),
    (json.dumps(assistant_tool_message("look", "c", "我想")), "look", "我想", False, "cjk_characters"),
]


@pytest.mark.parametrize("text,action,think,valid,reason", TOOL_CASES)
def test_tool_call_cases(text: str, action: str, think: str | None, valid: bool, reason: str) -> None:
    assert parse_tool_call(text) == ParsedAction(action, think, valid, reason)
    assert get_protocol("tool-call-v1").parse(text, 30) == parse_tool_call(text)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=400),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=20),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(
                    st.sampled_from(["name", "arguments", "function", "tool_calls", "content", "command"]),
                    inner,
                    max_size=4,
                )
            ),
            max_leaves=12,
        ).map(json.dumps),
    )
)
def test_tool_call_parse_is_total(text: str) -> None:
    parsed = parse_tool_call(text)
    assert isinstance(parsed, ParsedAction) and isinstance(parsed.action, str)
    assert parsed.valid == (parsed.reason == "ok")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Lo")), max_size=60))
def test_tool_calls_round_trip(command: str) -> None:
    assert parse_tool_call(json.dumps(assistant_tool_message(command, "c"))) == ParsedAction(
        command.lower().strip(), None, True, "ok"
    )


def test_tool_schema_is_one_function_of_one_string() -> None:
    (tool,) = tool_schema()
    assert tool["type"] == "function" and tool["function"]["name"] == TOOL_NAME
    params = tool["function"]["parameters"]
    assert params["required"] == ["command"] and params["properties"]["command"]["type"] == "string"
    assert params["additionalProperties"] is False
    tool_schema()[0]["function"]["name"] = "changed"
    assert tool_schema()[0]["function"]["name"] == TOOL_NAME  # a fresh copy each call


INSTRUCTION_START = "\nNow it's your turn"
"""Where the answer instruction of verl-agent's ALFWorld and WebShop prompts starts."""


@pytest.mark.parametrize("env_id", ["sapo/ALFWorld-Mini-v0", "sapo/WebShop-v0", "sapo/Vault-v0"])
def test_tool_call_flags_match_the_text_protocol_in_the_env(env_id: str) -> None:
    """The same commands give the same action, validity and admissibility flags under both protocols."""
    text = gym.make(env_id, protocol="verl-agent-v1")
    tool = gym.make(env_id, protocol="tool-call-v1")
    (_, info), _ = text.reset(options={"task_index": 3}), tool.reset(options={"task_index": 3})
    keys = (
        "action",
        "think",
        "is_action_valid",
        "is_action_admissible",
        "parse_reason",
        "raw_observation",
        "won",
        "score",
    )
    for pick in ["dance", "upper", "first", "last"]:
        listed = info["admissible_actions"]
        command = {"dance": "dance", "upper": " " + listed[-1].upper(), "first": listed[0], "last": listed[-1]}[pick]
        *rest_t, info = text.step(f"<think>t</think><action>{command}</action>")
        *rest_c, info_c = tool.step(json.dumps(assistant_tool_message(command, "c", "t")))
        assert [info[k] for k in keys] == [info_c[k] for k in keys] and rest_t[1:3] == rest_c[1:3], (pick, command)
        # the same prompt up to its answer instruction (tags for the text protocol, a take_action call for tool calls)
        assert rest_t[0].split(INSTRUCTION_START)[0] == rest_c[0].split(INSTRUCTION_START)[0], (pick, command)
    *_, info = tool.step(
        "<think>t</think><action>look</action>"
    )  # text under tool-call-v1: invalid; the empty command reaches the env as a no-op
    assert (info["action"], info["is_action_valid"], info["is_action_admissible"], info["parse_reason"]) == (
        "",
        False,
        False,
        "bad_json",
    )
