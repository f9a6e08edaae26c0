"""Whole prompts, character for character, against verl-agent's own rendering.

The expected prompts in ``tests/support/verl_agent_prompts/`` were written out by verl-agent's
``AlfWorldEnvironmentManager`` / ``WebshopEnvironmentManager`` (its templates, ``SimpleMemory`` and
projections) at revisions 7b68c51 and 796ed31, fed the scripted episodes below (see the README
there). Here the same episodes are played through a scripted :class:`~sapo_gym.core.TextEnv`, so
our parser makes the actions, and :class:`~sapo_gym.prompts.HistoryPrompt` renders the prompts.
Each episode has a first turn, turn 2, an invalid turn (no tags: the projection's lower-cased tail
goes to the env and into the history) and later turns whose history is cut to the last two steps.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sapo_gym.core import TaskInfo, TextEnv, Turn
from sapo_gym.prompts import ALFWORLD_PROMPT, ALFWORLD_PROMPT_CURRENT, WEBSHOP_PROMPT, HistoryPrompt, PromptTemplate

EXPECTED = Path(__file__).parents[1] / "support" / "verl_agent_prompts"

_A1 = ["go to desk 1", "go to drawer 1", "go to shelf 1", "go to sidetable 1", "help", "inventory", "look"]
_A2 = [
    "examine desk 1",
    "go to drawer 1",
    "go to shelf 1",
    "go to sidetable 1",
    "help",
    "inventory",
    "look",
    "take creditcard 2 from desk 1",
]
_A3 = [*_A2[:7], "put creditcard 2 in/on desk 1"]
_A4 = [
    "examine shelf 1",
    "go to desk 1",
    "go to drawer 1",
    "go to sidetable 1",
    "help",
    "inventory",
    "look",
    "put creditcard 2 in/on shelf 1",
]
ALFWORLD_TASK = "put some creditcard on shelf."
ALFWORLD_TURNS = [  # (raw observation, the engine's admissible commands: help included, as ALFWorld lists them)
    (
        "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, you see a "
        "desk 1, a drawer 1, a shelf 1, and a sidetable 1.\n\nYour task is to: put some creditcard on shelf.",
        _A1,
    ),
    ("You arrive at desk 1. On the desk 1, you see a creditcard 2.", _A2),
    ("Nothing happens.", _A2),
    ("You pick up the creditcard 2 from the desk 1.", _A3),
    ("You arrive at shelf 1. On the shelf 1, you see nothing.", _A4),
]
ALFWORLD_OUTPUTS = [
    "<think>The creditcard is likely on the desk.</think> <action>go to desk 1</action>",
    "I should take the creditcard 2 from desk 1 now.",
    "<think>Take it.</think><action>Take creditcard 2 from desk 1</action>",
    "<think>Now the shelf.</think><action>go to shelf 1</action>",
]

WEBSHOP_TASK = "i need a long lasting 6.76 fl oz bottle of l'eau d'issey, and price lower than 100.00 dollars"
_RESULTS = (
    "'Back to Search' [SEP] 'Page 1 (Total results: 50)' [SEP] 'Next >' [SEP] 'B000VOHH8I' [SEP] 'L'eau D'issey "
    "By Issey Miyake for MenEau De Toilette Spray, 6.7 Fl Oz Bottle' [SEP] '$64.98' [SEP] 'B000MJZOPK' [SEP] "
    "'L'eau d'Issey by Issey Miyake for Women 3.3 oz Eau De Toilette Spray' [SEP] '$49.98'"
)
_ITEM = (
    "'Back to Search' [SEP] '< Prev' [SEP] 'size' [SEP] '3.3 fl oz (pack of 1)' [SEP] '6.76 fl oz (pack of 1)' [SEP] "
    "'L'eau D'issey By Issey Miyake for MenEau De Toilette Spray, 6.7 Fl Oz Bottle' [SEP] 'Price: $64.98' [SEP] "
    "'Rating: N.A.' [SEP] 'Description' [SEP] 'Features' [SEP] 'Reviews' [SEP] 'Buy Now'"
)
_R = ["click[back to search]", "click[next >]", "click[b000vohh8i]", "click[b000mjzopk]"]
_I = [
    "click[back to search]",
    "click[< prev]",
    "click[description]",
    "click[features]",
    "click[reviews]",
    "click[buy now]",
    "click[3.3 fl oz (pack of 1)]",
    "click[6.76 fl oz (pack of 1)]",
]
WEBSHOP_TURNS = [  # (observation as our WebShop env gives it: verl-agent's format_obs form, admissible actions)
    ("'Search'", ["search[<your query>]"]),
    (_RESULTS, _R),
    (_RESULTS, _R),
    (_ITEM, _I),
    (_ITEM, _I),
]
WEBSHOP_OUTPUTS = [
    "<think>Search for it.</think><action>search[l'eau d'issey 6.76 fl oz bottle]</action>",
    "I will click the first product, B000VOHH8I.",
    "<think>The first one.</think><action>click[B000VOHH8I]</action>",
    "<think>Size.</think><action>click[6.76 fl oz (pack of 1)]</action>",
]


class ScriptedEnv(TextEnv):
    """One task whose turns come from a script, one per step, whatever the action."""

    def __init__(self, task: str, turns: list[tuple[str, list[str]]], fallback_chars: int):
        super().__init__()
        self._script, self._task_text, self._next = turns, task, 0
        self.fallback_chars = fallback_chars

    @property
    def task_ids(self) -> list[str]:
        return ["scripted-0"]

    def _load_task(self, index: int) -> tuple[TaskInfo, Turn]:
        self._next = 1
        obs, actions = self._script[0]
        return TaskInfo(self._task_text, "scripted-0", "scripted", "scripted"), Turn(obs, list(actions))

    def _backend_step(self, action: str) -> Turn:
        obs, actions = self._script[self._next]
        self._next += 1
        return Turn(obs, list(actions))


def _play(env: TextEnv, template: PromptTemplate, history_length: int, outputs: list[str]) -> list[str]:
    wrapped = HistoryPrompt(env, template, history_length=history_length)
    prompts = [wrapped.reset()[0]]
    prompts += [wrapped.step(output)[0] for output in outputs]
    return prompts


def _expected(name: str) -> str:
    return (EXPECTED / name).read_text(encoding="utf-8")


def _alfworld() -> ScriptedEnv:
    return ScriptedEnv(ALFWORLD_TASK, ALFWORLD_TURNS, fallback_chars=30)


def _webshop() -> ScriptedEnv:
    return ScriptedEnv(WEBSHOP_TASK, WEBSHOP_TURNS, fallback_chars=20)


@pytest.mark.parametrize(("template", "revision"), [(ALFWORLD_PROMPT, "7b68c51"), (ALFWORLD_PROMPT_CURRENT, "796ed31")])
def test_alfworld_prompts_are_verl_agents(template: PromptTemplate, revision: str) -> None:
    prompts = _play(_alfworld(), template, 2, ALFWORLD_OUTPUTS)
    for turn, prompt in enumerate(prompts, 1):
        assert prompt == _expected(f"alfworld_{revision}_h2_turn{turn}.txt"), f"turn {turn}"
    assert "you took: [Observation 1: '-= Welcome" in prompts[1]  # the history starts on the same line
    assert "Action 2: ' creditcard 2 from desk 1 now.']" in prompts[2]  # the invalid turn's 30-character tail


def test_webshop_prompts_are_verl_agents() -> None:
    prompts = _play(_webshop(), WEBSHOP_PROMPT, 2, WEBSHOP_OUTPUTS)
    for turn, prompt in enumerate(prompts, 1):
        assert prompt == _expected(f"webshop_7b68c51_h2_turn{turn}.txt"), f"turn {turn}"
    assert "'search[<your query>]',\n'click[search]',\n]" in prompts[0]
    assert "Action 2: 'product, b000vohh8i.']" in prompts[2]  # the invalid turn's 20-character tail


@pytest.mark.parametrize(
    ("name", "make", "template", "outputs"),
    [
        ("alfworld", _alfworld, ALFWORLD_PROMPT, ALFWORLD_OUTPUTS),
        ("webshop", _webshop, WEBSHOP_PROMPT, WEBSHOP_OUTPUTS),
    ],
)
def test_history_length_zero_renders_the_no_history_template(name, make, template, outputs) -> None:
    prompts = _play(make(), template, 0, outputs)
    assert prompts[0] == _expected(f"{name}_7b68c51_h2_turn1.txt")
    for turn, prompt in enumerate(prompts[1:], 2):
        assert prompt == _expected(f"{name}_7b68c51_h0_turn{turn}.txt"), f"turn {turn}"


LONG_TASK = "i want a pack of 12 green tea bags, and price lower than 30.00 dollars"
LONG_RESULTS = "'Back to Search' [SEP] 'Page 1 (Total results: 50)' [SEP] 'Next >' [SEP] " + " [SEP] ".join(
    f"'B0{n:08d}' [SEP] 'Green Tea Bags Pack of {n % 24 + 1}, Organic Sencha Tea {n}' [SEP] '${n % 30 + 0.99:.2f}'"
    for n in range(130)
)
LONG_ACTIONS = ["click[back to search]", "click[next >]"] + [f"click[b0{n:08d}]" for n in range(130)]


def test_webshop_prompt_over_its_budget_drops_the_history() -> None:
    env = ScriptedEnv(
        LONG_TASK, [("'Search'", ["search[<your query>]"]), (LONG_RESULTS, LONG_ACTIONS)], fallback_chars=20
    )
    prompts = _play(
        env, WEBSHOP_PROMPT, 2, ["<think>Search.</think><action>search[green tea bags pack of 12]</action>"]
    )
    assert prompts[1] == _expected("webshop_long_7b68c51_h2_turn2.txt")
    assert "Prior to this step" not in prompts[1]


@pytest.mark.parametrize("extra", [0, 1])
def test_webshop_budget_is_strictly_more_than_13000_characters(extra: int) -> None:
    """A prompt with history of exactly 13,000 characters keeps it; one more character drops it."""
    probe = _play(
        ScriptedEnv(LONG_TASK, [("'Search'", ["search[<your query>]"]), ("x", [])], 20),
        WEBSHOP_PROMPT,
        2,
        ["<think>t</think><action>search[tea]</action>"],
    )[1]
    obs = "x" * (13000 - len(probe) + 1 + extra)  # the probe's observation is 1 character long
    prompt = _play(
        ScriptedEnv(LONG_TASK, [("'Search'", ["search[<your query>]"]), (obs, [])], 20),
        WEBSHOP_PROMPT,
        2,
        ["<think>t</think><action>search[tea]</action>"],
    )[1]
    assert ("Prior to this step" in prompt) == (extra == 0)
