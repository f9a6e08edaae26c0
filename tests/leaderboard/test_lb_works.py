"""What identifies an episode's work (leaderboard.server.works): canonical outputs, hand-checked cases."""

from __future__ import annotations

import json

from leaderboard.server.works import canonical_output, canonical_text, episode_work, episode_works, works_digest


def test_canonical_text_ignores_normal_form_case_and_spacing_only() -> None:
    assert canonical_text("Caf\u00e9  au\tlait\n") == canonical_text("cafe\u0301 AU LAIT") == "caf\u00e9 au lait"
    assert (
        canonical_text("\uff52\uff41\uff4e\uff44\uff4f\uff4d\u00a0x") == "random x"
    )  # NFKC: fullwidth, no-break space
    assert canonical_text("a b") != canonical_text("ab")  # a space is not nothing


def test_a_valid_output_is_its_parsed_think_and_action() -> None:
    base = canonical_output("<think>Go left</think><action>go to desk 1</action>", "verl-agent-v1")
    assert base == ["v", "go left", "go to desk 1"]
    for same in (
        "well: <think> go  LEFT </think>\n<action> Go To Desk 1 </action> done",
        "<think>go left</think><ACTION>GO TO DESK 1</ACTION>",
    ):
        assert canonical_output(same, "verl-agent-v1") == base, same
    assert canonical_output("<think>go left</think><action>go to desk 2</action>", "verl-agent-v1") != base
    assert canonical_output("<think>go right</think><action>go to desk 1</action>", "verl-agent-v1") != base


def test_an_invalid_output_is_its_whole_text() -> None:
    # without think tags the output is invalid: the whole text counts (its tail is what reached the env)
    assert canonical_output("I will <action>go to desk 1</action>", "verl-agent-v1") == [
        "i",
        "i will <action>go to desk 1</action>",
    ]
    assert canonical_output("x <action>a</action>", "strict-v1") != canonical_output(
        "y <action>a</action>", "strict-v1"
    )
    assert canonical_output("anything", "no-such-protocol") == ["i", "anything"]


def test_a_tool_call_is_its_command_whatever_its_json_spelling() -> None:
    call = {"name": "take_action", "arguments": json.dumps({"command": "Press Red"})}
    spaced = json.dumps(call, indent=2)
    wrapped = json.dumps({"content": None, "tool_calls": [{"type": "function", "function": call}]})
    assert (
        canonical_output(json.dumps(call), "tool-call-v1")
        == canonical_output(spaced, "tool-call-v1")
        == ["v", "", "press red"]
    )
    assert canonical_output(wrapped, "tool-call-v1") == ["v", "", "press red"]


def test_works_name_the_board_the_task_and_the_outputs_not_the_numbers() -> None:
    ep = {"task_id": "t0", "seed": 0, "turns": [{"output": "<think>a</think><action>b</action>", "reward": 0.0}]}
    same = {"task_id": "t0", "seed": 9, "turns": [{"output": "<think>A</think><action>B</action>", "reward": -0.0}]}
    assert episode_work("h1", "verl-agent-v1", ep) == episode_work("h1", "verl-agent-v1", same)
    assert episode_work("h2", "verl-agent-v1", ep) != episode_work("h1", "verl-agent-v1", ep)
    assert episode_work("h1", "verl-agent-v1", {**ep, "task_id": "t1"}) != episode_work("h1", "verl-agent-v1", ep)
    bundle = {"env": {"spec_hash": "h1", "protocol": "verl-agent-v1"}, "episodes": [same, ep, ep]}
    works = episode_works(bundle)
    assert works == [episode_work("h1", "verl-agent-v1", ep)]  # distinct, sorted
    assert works_digest(works) != works_digest(works + ["x"])
