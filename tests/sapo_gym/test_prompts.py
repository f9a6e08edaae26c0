"""The prompt/history protocol."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import sapo_gym  # noqa: F401
from sapo_gym.core import ENV_REVISION
from sapo_gym.prompts import ALFWORLD_PROMPT, PROMPTS, WEBSHOP_PROMPT, HistoryPrompt, PromptTemplate


def _step(env: gym.Env, action: str):
    return env.step(f"<think>t</think><action>{action}</action>")


def test_first_then_later_template_with_history() -> None:
    env = gym.make("sapo/Vault-v0", prompt=ALFWORLD_PROMPT, history_length=2)
    obs, info = env.reset(options={"task_index": 0})
    assert "Your current observation is: You stand before a vault" in obs and "Prior to this step" not in obs
    assert "'press red'" in obs and "'help'" not in obs
    obs, *_ = _step(env, "look")
    assert "Your task is to: open the vault" in obs
    assert "you have already taken 1 step(s)" in obs and "most recent 1 observaitons" in obs
    assert "[Observation 1: 'You stand before a vault" in obs and "Action 1: 'look']" in obs
    assert "You are now at step 2 and your current observation is: You see the vault." in obs
    _step(env, "look")
    obs, *_ = _step(env, "look")
    # only the last two pairs, numbered by their real step
    assert "[Observation 1:" not in obs and "[Observation 2:" in obs and "[Observation 3:" in obs
    assert "taken 3 step(s)" in obs and "most recent 2 observaitons" in obs


def test_history_zero_and_raw_mode() -> None:
    env = gym.make("sapo/Vault-v0", prompt=ALFWORLD_PROMPT, history_length=0)
    env.reset(options={"task_index": 0})
    obs, *_ = _step(env, "look")
    assert "[Observation" not in obs
    raw = gym.make("sapo/Vault-v0", prompt=None)
    obs, info = raw.reset(options={"task_index": 0})
    assert obs == info["raw_observation"]


def test_user_template_and_webshop_format() -> None:
    mine = PromptTemplate(
        first="T={task_description}|{admissible_actions}", later="S={current_step}", format_actions="/".join
    )
    env = gym.make("sapo/Vault-v0", prompt=mine)
    obs, _ = env.reset(options={"task_index": 0})
    assert obs == "T=open the vault by pressing its 2 buttons in order|look/press red/press blue/press green"
    assert _step(env, "look")[0] == "S=2"
    assert WEBSHOP_PROMPT.format_actions(["search[x]", "click[y]"]) == "'search[x]',\n'click[y]',"


def test_negative_history_rejected() -> None:
    with pytest.raises(ValueError):
        HistoryPrompt(gym.make("sapo/Vault-v0", prompt=None), ALFWORLD_PROMPT, history_length=-1)


# ---------------------------------------------------------------- template names, revisions and the spec
def test_every_template_is_named_and_found_by_name() -> None:
    from sapo_gym.prompts import PROMPT_VERSION, PROMPT_VERSION_CURRENT, PROMPTS, get_prompt

    assert ALFWORLD_PROMPT.name == f"alfworld/{PROMPT_VERSION}" == "alfworld/verl-agent@7b68c51"
    assert WEBSHOP_PROMPT.name == "webshop/verl-agent@7b68c51" and PROMPT_VERSION_CURRENT == "verl-agent@796ed31"
    assert all(get_prompt(name) is template and template.name == name for name, template in PROMPTS.items())
    with pytest.raises(ValueError, match="valid choices: .*alfworld/verl-agent@796ed31"):
        get_prompt("verl-agent-v1")


def test_the_revisions_differ_by_the_2025_10_02_typo_fix_only() -> None:
    from sapo_gym.prompts import ALFWORLD_PROMPT_CURRENT

    assert ALFWORLD_PROMPT.first == ALFWORLD_PROMPT_CURRENT.first
    assert ALFWORLD_PROMPT.later.replace("observaitons", "observations") == ALFWORLD_PROMPT_CURRENT.later
    assert "observaitons" not in ALFWORLD_PROMPT_CURRENT.later


def test_spec_records_the_prompt_but_does_not_hash_it() -> None:
    from sapo_gym.prompts import ALFWORLD_PROMPT_CURRENT

    def spec(**kwargs):
        env = gym.make("sapo/ALFWorld-Mini-v0", split="eval_out_of_distribution", **kwargs)
        try:
            return env.unwrapped.spec_fields()["prompt"], env.unwrapped.spec_hash()
        finally:
            env.close()

    default, raw, current = spec(), spec(prompt=None), spec(prompt=ALFWORLD_PROMPT_CURRENT.name)
    assert default == raw and default[0] == ALFWORLD_PROMPT.name  # boards (raw envs) match default-prompt runs
    # the prompt is the agent's side: recorded in every result, not in the hash (one board, any prompt; a bundle
    # replays on the raw env whatever prompt produced it)
    assert current[0] == "alfworld/verl-agent@796ed31" and current[1] == default[1]
    mine = PromptTemplate(
        first="{current_observation}", later="{current_observation}", format_actions=str, name="mine-v1"
    )
    assert spec(prompt=mine) == ("mine-v1", default[1])
    env = gym.make("sapo/ALFWorld-Mini-v0", split="eval_out_of_distribution")
    fields = env.unwrapped.spec_fields()
    assert fields["revision"] == ENV_REVISION
    env.unwrapped.__class__ = type(
        "OtherRevision", (type(env.unwrapped),), {"spec_fields": lambda self: {**fields, "revision": 1}}
    )
    assert env.unwrapped.spec_hash() != default[1]  # the revision is hashed: old bundles never match new boards
    env.close()
    vault = gym.make("sapo/Vault-v0")
    assert vault.unwrapped.spec_fields()["prompt"] == "plain-v1"


def test_the_old_rendering_stays_available_by_name() -> None:
    """``sapo-gym-v1``: this project's own rendering, kept by name (an extra newline before the history)."""
    from sapo_gym.prompts import ALFWORLD_PROMPT_V1

    new = gym.make("sapo/Vault-v0", prompt=ALFWORLD_PROMPT, history_length=2)
    old = gym.make("sapo/Vault-v0", prompt=ALFWORLD_PROMPT_V1, history_length=2)
    for env in (new, old):
        env.reset(options={"task_index": 0})
    a, b = _step(new, "look")[0], _step(old, "look")[0]
    assert "you took: [Observation 1: 'You stand" in a and b == a.replace("you took: [", "you took: \n[")


def test_webshop_lists_the_search_button_once() -> None:
    fmt = WEBSHOP_PROMPT.format_actions
    assert fmt(["search[<your query>]"]) == "'search[<your query>]',\n'click[search]',"
    assert fmt(["search[<your query>]", "click[search]"]) == "'search[<your query>]',\n'click[search]',"
    assert fmt(["click[back to search]"]) == "'click[back to search]',"


def test_real_webshop_first_prompt() -> None:
    env = gym.make("sapo/WebShop-v0", split="test")
    try:
        obs, info = env.reset(options={"task_index": 0})
    finally:
        env.close()
    assert obs.startswith(
        "\nYou are an expert autonomous agent operating in the WebShop e\u2011commerce environment. \n"
    )
    assert f"Your task is to: {info['task']}.\nYour current observation is: 'Search'.\n" in obs
    assert "are: \n[\n'search[<your query>]',\n'click[search]',\n].\n\nNow it's your turn" in obs


# ---------------------------------------------------------------- tool-call protocols
TAGS = ("<think>", "</think>", "<action>", "</action>")


@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_the_tool_call_form_asks_for_a_call_and_changes_nothing_else(name: str) -> None:
    from sapo_gym.prompts import TOOL_CALL_SUFFIX, get_prompt, tool_call_prompt

    text = get_prompt(name)
    tool = tool_call_prompt(text)
    parts = ("first", "later", "no_history")
    if not any(tag in (getattr(text, p) or "") for p in parts for tag in TAGS):
        assert tool is text  # plain-v1: no answer instruction to swap
        return
    assert tool.name == name + TOOL_CALL_SUFFIX and get_prompt(tool.name) == tool and tool_call_prompt(tool) is tool
    for part in parts:
        old, new = getattr(text, part), getattr(tool, part)
        if old is None:
            assert new is None
            continue
        assert not any(tag in new for tag in TAGS) and "call the tool take_action exactly once" in new
        head = "\nNow it's your turn"
        assert old.count(head) == new.count(head) == 1 and old.split(head)[0] == new.split(head)[0]
    assert (tool.format_actions, tool.max_chars, tool.history_lead) == (
        text.format_actions,
        text.max_chars,
        text.history_lead,
    )


@pytest.mark.parametrize("env_id", ["sapo/ALFWorld-Mini-v0", "sapo/WebShop-v0"])
def test_tool_call_envs_prompt_for_a_call_and_record_it(env_id: str) -> None:
    from sapo_gym.prompts import TOOL_CALL_SUFFIX

    text, tool, raw = (
        gym.make(env_id, protocol=p, **kw)
        for p, kw in (("verl-agent-v1", {}), ("tool-call-v1", {}), ("tool-call-v1", {"prompt": None}))
    )
    try:
        obs_t, _ = text.reset(options={"task_index": 2})
        obs_c, info = tool.reset(options={"task_index": 2})
        assert not any(tag in obs_c for tag in TAGS) and "take_action" in obs_c and "<action>" in obs_t
        name = tool.unwrapped.spec_fields()["prompt"]
        assert (
            name == text.unwrapped.spec_fields()["prompt"] + TOOL_CALL_SUFFIX == raw.unwrapped.spec_fields()["prompt"]
        )
        assert tool.unwrapped.spec_hash() == raw.unwrapped.spec_hash()  # the prompt is recorded, not hashed
        obs_c, *_ = tool.step(
            json.dumps({"name": "take_action", "arguments": {"command": info["admissible_actions"][0]}})
        )
        assert not any(tag in obs_c for tag in TAGS) and "take_action" in obs_c
    finally:
        for env in (text, tool, raw):
            env.close()


@pytest.mark.parametrize(
    ("later", "history", "steps", "max_chars", "shows"),
    [
        ("{task_description} {action_history} {current_observation}", [("o", "a")], 1, None, True),
        ("{task_description} {action_history!r:>40} {current_observation}", [("o", "a")], 1, None, True),
        ("{task_description} {current_observation}", [("o", "a")], 1, None, False),  # no history field
        ("{task_description} {action_history} {current_observation}", [], 1, None, False),  # nothing to show
        ("{task_description} {action_history} {current_observation}", [("o", "a")], 0, None, False),  # first turn
        ("{task_description} {action_history} {current_observation}", [("o", "a" * 50)], 1, 40, False),  # budget
    ],
    ids=["shown", "shown-with-spec", "no-field", "empty", "first-turn", "over-budget"],
)
def test_render_turn_says_whether_its_prompt_shows_the_history(
    later: str, history: list[tuple[str, str]], steps: int, max_chars: int | None, shows: bool
) -> None:
    """What the chat messages follow: the flag is True exactly when the history's block is in the prompt."""
    from sapo_gym.prompts import history_block, render_turn

    template = PromptTemplate(
        first="{task_description} {current_observation}", later=later, format_actions=str, max_chars=max_chars
    )
    info = {"task": "T", "raw_observation": "O", "admissible_actions": ["x"]}
    prompt, flag = render_turn(template, info, history, steps, history_length=2)
    assert flag is shows
    block = history_block(history, steps - len(history) + 1)
    shown_as = repr(block) if "!r" in later else block  # the conversion writes the block's repr
    assert (bool(block) and shown_as in prompt) is shows, prompt
