"""info["messages"] against the prompt string, over whole episodes, and the chat layout itself."""

from __future__ import annotations

import dataclasses
import json

import gymnasium as gym
import pytest
from hypothesis import given, settings, strategies as st

import sapo_gym  # noqa: F401
from sapo_gym.messages import FRAMING, ChatTurn, chat_messages, parse_messages, render_prompt, tool_result
from sapo_gym.parsing import parse_action, parse_tool_call
from sapo_gym.prompts import PLAIN_PROMPT, PromptTemplate
from sapo_gym.tools import assistant_tool_message, tool_schema

ENVS = [
    ("sapo/Vault-v0", {}),
    ("sapo/ALFWorld-Mini-v0", {}),
    ("sapo/ALFWorld-v0", {"data_dir": "embedded"}),
    ("sapo/WebShop-v0", {}),
]
JUNK = "I am not sure what to do here, so I will wait and see what happens next"


def _answer(action: str, protocol: str) -> str:
    if protocol == "tool-call-v1":
        return json.dumps(assistant_tool_message(action, "call_x", content="reasoning"))
    return f"<think>reasoning</think><action>{action}</action>"


def _check_turn(obs: str, info: dict, template, history_length: int, steps: int) -> None:
    messages = info["messages"]
    assert render_prompt(messages, template) == obs
    json.dumps(messages)  # plain JSON: what a chat API and the OpenEnv server carry
    turn = parse_messages(messages)
    assert (turn.steps, turn.observation, list(turn.admissible_actions)) == (
        steps,
        info["raw_observation"],
        info["admissible_actions"],
    )
    # every piece of the prompt is in the messages, and the messages show no more history than the prompt
    assert turn.observation in obs and template.format_actions(info["admissible_actions"]) in obs
    assert len(turn.history) == (obs.count("[Observation ") if steps else 0) <= min(history_length, steps)
    for seen, action in turn.history:
        assert f"'{seen}'" in obs and f"'{action}'" in obs
    assert (
        turn.task == info["task"]
    )  # the system message always states the task (ALFWorld's first template only inside the observation)


def _play(env_id: str, kwargs: dict, protocol: str, history_length: int) -> int:
    """One expert episode with a junk answer and an inadmissible command early on; returns its turns."""
    env = gym.make(env_id, protocol=protocol, history_length=history_length, **kwargs)
    template = env.get_wrapper_attr("template")
    obs, info = env.reset(options={"task_index": 1})
    _check_turn(obs, info, template, history_length, 0)
    steps, done = 0, False
    while not done:
        answer = {0: JUNK, 1: _answer("dance wildly", protocol)}.get(steps, _answer(info["expert_action"], protocol))
        obs, _, terminated, truncated, info = env.step(answer)
        steps += 1
        done = terminated or truncated
        _check_turn(obs, info, template, history_length, steps)
        assert ("tools" in info) == (protocol == "tool-call-v1")
    assert info["won"], (env_id, protocol, history_length)
    env.close()
    return steps


@pytest.mark.parametrize("env_id,kwargs", ENVS, ids=[e for e, _ in ENVS])
@pytest.mark.parametrize("protocol", ["verl-agent-v1", "tool-call-v1"])
@pytest.mark.parametrize("history_length", [0, 2, 6])
def test_messages_render_to_the_prompt_over_whole_episodes(
    env_id: str, kwargs: dict, protocol: str, history_length: int
) -> None:
    assert _play(env_id, kwargs, protocol, history_length) >= 3  # first turn, then later ones with history


def test_text_layout_is_a_chat_of_observations_and_answers() -> None:
    env = gym.make("sapo/Vault-v0", history_length=2)
    env.reset(options={"task_index": 0})
    for action in ["look", "look", "press red"]:
        *_, info = env.step(f"<think>I think.</think><action>{action}</action>")
    roles = [m["role"] for m in info["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert info["messages"][0]["content"].startswith(FRAMING["text"])
    assert info["messages"][1]["content"].startswith("Observation 2: ") and info["messages"][-1]["content"].startswith(
        "Observation 4: "
    )
    # the answers are written in the format the model must answer in, and parse to the history's actions
    answers = [parse_action(m["content"]) for m in info["messages"] if m["role"] == "assistant"]
    assert [(a.action, a.valid) for a in answers] == [("look", True), ("press red", True)]


def test_tool_layout_answers_each_call_with_a_tool_message() -> None:
    env = gym.make("sapo/Vault-v0", protocol="tool-call-v1", history_length=2)
    env.reset(options={"task_index": 0})
    for action in ["look", "press red"]:
        *_, info = env.step(_answer(action, "tool-call-v1"))
    messages = info["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert messages[0]["content"].startswith(FRAMING["tool-call"])
    calls = [m for m in messages if m["role"] == "assistant"]
    assert (
        [m["tool_call_id"] for m in messages if m["role"] == "tool"]
        == [c["tool_calls"][0]["id"] for c in calls]
        == ["call_1", "call_2"]
    )
    assert [parse_tool_call(json.dumps(c)).action for c in calls] == ["look", "press red"]
    assert info["tools"] == tool_schema()


@pytest.mark.parametrize("env_id,kwargs", ENVS[:2], ids=[e for e, _ in ENVS[:2]])
def test_the_tool_result_is_the_turn_message_not_the_prompt(env_id: str, kwargs: dict) -> None:
    """What a trainer answers a take_action call with: the env's own tool message, a fraction of the prompt."""
    env = gym.make(env_id, protocol="tool-call-v1", history_length=2, **kwargs)
    raw = gym.make(env_id, protocol="tool-call-v1", prompt=None, **kwargs)
    (obs, info), (_, raw_info) = env.reset(options={"task_index": 1}), raw.reset(options={"task_index": 1})
    done, turns = False, 0
    while not done:
        assert tool_result(info) == info["messages"][-1]["content"] == tool_result(raw_info)  # raw envs give it too
        assert tool_result(info).startswith(
            f"Observation {turns + 1}: {info['raw_observation']}\n\nAdmissible actions: ["
        )
        assert len(tool_result(info)) < len(obs)
        answer = _answer(info["expert_action"], "tool-call-v1")
        (obs, _, terminated, truncated, info), (*_, raw_info) = env.step(answer), raw.step(answer)
        done, turns = terminated or truncated, turns + 1
    assert info["won"] and turns >= 2 and info["messages"][-1]["role"] == "tool"
    env.close()
    raw.close()


def test_prompt_none_has_no_messages_and_text_protocols_no_tools() -> None:
    _, info = gym.make("sapo/Vault-v0", prompt=None).reset(options={"task_index": 0})
    assert "messages" not in info
    _, info = gym.make("sapo/Vault-v0").reset(options={"task_index": 0})
    assert "tools" not in info and [m["role"] for m in info["messages"]] == ["system", "user"]


def test_a_prompt_over_its_length_budget_shows_no_history_and_neither_do_its_messages() -> None:
    """WebShop's rule (a later prompt over max_chars is rendered without history), on a small budget."""
    template = dataclasses.replace(PLAIN_PROMPT, name="plain-budget", max_chars=400, no_history=PLAIN_PROMPT.first)
    env = gym.make("sapo/Vault-v0", prompt=template, history_length=3)
    env.reset(options={"task_index": 0})
    shown = []
    for _ in range(1, 4):
        obs, *_, info = env.step("<think>t</think><action>look</action>")
        assert render_prompt(info["messages"], template) == obs
        shown.append(len(parse_messages(info["messages"]).history))
        assert shown[-1] == obs.count("[Observation ")
    assert shown == [1, 0, 0]  # 358 characters with one pair, then 437 and 516: over the budget of 400


def test_a_template_without_history_gives_messages_without_history() -> None:
    mine = PromptTemplate(
        first="T={task_description}|{admissible_actions}",
        later="S={current_step}: {current_observation}",
        format_actions="/".join,
    )
    env = gym.make("sapo/Vault-v0", prompt=mine, history_length=2)
    env.reset(options={"task_index": 0})
    for _ in range(2):
        obs, *_, info = env.step("<think>t</think><action>look</action>")
    assert obs == "S=3: You see the vault. The panel glows green." == render_prompt(info["messages"], mine)
    assert [m["role"] for m in info["messages"]] == ["system", "user"]


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
_markers = st.sampled_from(
    ["", "\n\nAdmissible actions: ", ": ", "Observation 3: ", "\n\nYour task is to: ", "</action>", "\n"]
)
_tricky = st.builds(lambda a, m, b: a + m + b, _text, _markers, _text)


@settings(max_examples=300, deadline=None)
@given(
    task=_tricky,
    steps=st.integers(min_value=0, max_value=60),
    pairs=st.lists(st.tuples(_tricky, _tricky), max_size=4),
    observation=_tricky,
    admissible=st.lists(_tricky, max_size=5),
    action_format=st.sampled_from(sorted(FRAMING)),
)
def test_messages_decode_exactly_whatever_the_text(task, steps, pairs, observation, admissible, action_format) -> None:
    """Observations, actions and tasks that contain the layout's own markers still come back exactly."""
    turn = ChatTurn(task, steps + len(pairs), tuple(pairs), observation, tuple(admissible), action_format)
    assert parse_messages(chat_messages(turn)) == turn


def test_foreign_messages_are_rejected() -> None:
    with pytest.raises(ValueError):
        parse_messages([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    good = chat_messages(ChatTurn("t", 3, (("o", "a"),), "now", ("x",)))
    with pytest.raises(ValueError, match="out of order"):
        parse_messages(good[:1] + [{"role": "user", "content": "Observation 1: o"}] + good[2:])
    with pytest.raises(ValueError, match="admissible"):
        parse_messages(good[:-1] + [{"role": "user", "content": "Observation 4: now"}])
