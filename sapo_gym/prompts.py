"""The prompt/history protocol: verl-agent's templates, memory and env-manager rules, by revision.

:class:`HistoryPrompt` is the observation wrapper that registration puts around every backend:
it turns the raw observation into the prompt the model sees. The first turn uses a template
without history; later turns show the task, the number of steps taken, the last
``history_length`` (observation, action) pairs and the admissible actions.

Every template carries a versioned :attr:`PromptTemplate.name`, recorded in the env's
``spec_fields()`` (so in its spec hash). The defaults follow verl-agent revision
:data:`PROMPT_VERSION` (``7b68c51``, 2025-09-30: the last one before the 2025-10-02 typo fix
``35b026c``; its ALFWorld and WebShop prompts are those of every revision since ``461a178``,
2025-05-24). How it renders:

* history entries ``[Observation i: '<obs>', Action i: '<action>']`` joined with ``"\\n"``, the first
  right after "you took: " (verl-agent's ``SimpleMemory.fetch``), numbered by their real step;
* ``history_length=0``: every turn uses the no-history (first-turn) template;
* ALFWorld lists every admissible command but ``help`` (the game still accepts it);
* WebShop lists ``click[search]`` after ``search[<your query>]`` (the search page's button is one
  of WebShop's clickables) and, when a prompt with history exceeds 13,000 characters, shows the
  no-history template instead.

:data:`ALFWORLD_PROMPT_CURRENT` follows upstream's current text (``796ed31``, 2026-02-27:
"observations"); WebShop's text is the same in both revisions. The ``sapo-gym-v1`` templates are
this project's own rendering (an extra newline before the history; on WebShop also "game", no
``click[search]`` and no length budget), kept so runs made with them reproduce. :func:`get_prompt` looks any
of them up by name; a user may pass their own :class:`PromptTemplate` (``str.format`` strings
using the documented fields) with a name of their own.

Under a tool-call protocol (``tool-call-v1``) registration shows the template through :func:`tool_call_prompt`:
the same text, but the answer instruction asks for one ``take_action`` call instead of ``<think>``/``<action>``
tags (name suffix ``+tool-call``). The text protocols' prompts are untouched.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from string import Formatter
from typing import Any

import gymnasium as gym

from sapo_gym.tools import ARGUMENT, TOOL_NAME

__all__ = [
    "PromptTemplate",
    "HistoryPrompt",
    "PROMPT_VERSION",
    "PROMPT_VERSION_CURRENT",
    "PROMPTS",
    "get_prompt",
    "ALFWORLD_PROMPT",
    "WEBSHOP_PROMPT",
    "ALFWORLD_PROMPT_CURRENT",
    "ALFWORLD_PROMPT_V1",
    "WEBSHOP_PROMPT_V1",
    "PLAIN_PROMPT",
    "tool_call_prompt",
    "TOOL_CALL_SUFFIX",
]

PROMPT_VERSION = "verl-agent@7b68c51"
"""The upstream revision the default templates follow (2025-09-30, before the 2025-10-02 typo fix)."""
PROMPT_VERSION_CURRENT = "verl-agent@796ed31"
"""Upstream's current revision (2026-02-27): ALFWorld's "observaitons" became "observations"."""
WEBSHOP_MAX_CHARS = 13000
"""verl-agent's WebShop length budget: a longer prompt with history is rendered without it."""


@dataclass(frozen=True)
class PromptTemplate:
    """``str.format`` templates and the rules that choose between them.

    Fields available to every template: ``task_description``, ``current_observation``,
    ``admissible_actions``; to ``later`` also ``step_count``, ``history_length``,
    ``action_history`` and ``current_step``.
    """

    first: str
    """Used for the first turn of an episode (no history yet)."""
    later: str
    """Used for every later turn."""
    format_actions: Callable[[list[str]], str]
    """Renders the admissible-action list into the ``admissible_actions`` field."""
    name: str = "custom"
    """Versioned name, recorded in the env's spec (give your own templates a name of their own)."""
    no_history: str | None = None
    """With ``history_length=0``, every turn uses this template; None: ``later`` with an empty history."""
    max_chars: int | None = None
    """A ``later`` prompt longer than this is rendered with ``no_history`` (or ``first``) instead."""
    history_lead: str = ""
    """Put before a non-empty history block (``"\\n"`` only in the ``sapo-gym-v1`` rendering)."""


def _alfworld_actions(actions: list[str]) -> str:
    return "\n ".join(f"'{a}'" for a in actions if a != "help")


def _webshop_actions(actions: list[str]) -> str:
    """verl-agent's list: WebShop's search page has a search box *and* a ``search`` button."""
    shown = list(actions)
    if "search[<your query>]" in shown and "click[search]" not in shown:
        shown.insert(shown.index("search[<your query>]") + 1, "click[search]")
    return _webshop_actions_v1(shown)


def _webshop_actions_v1(actions: list[str]) -> str:
    return "\n".join(f"'{a}'," for a in actions)


_INSTRUCTION = (
    "\nNow it's your turn to take an action.\n"
    "You should first reason step-by-step about the current situation. This reasoning process MUST be "
    "enclosed within <think> </think> tags. \n"
    "Once you've finished your reasoning, you should choose an admissible action for current step and "
    "present it within <action> </action> tags.\n"
)
_ALFWORLD_FIRST = (
    "\nYou are an expert agent operating in the ALFRED Embodied Environment.\n"
    "Your current observation is: {current_observation}\n"
    "Your admissible actions of the current situation are: [{admissible_actions}].\n" + _INSTRUCTION
)


def _alfworld_later(observations: str) -> str:
    return (
        "\nYou are an expert agent operating in the ALFRED Embodied Environment. Your task is to: {task_description}\n"
        "Prior to this step, you have already taken {step_count} step(s). Below are the most recent "
        "{history_length} " + observations + " and the corresponding actions you took: {action_history}\n"
        "You are now at step {current_step} and your current observation is: {current_observation}\n"
        "Your admissible actions of the current situation are: [{admissible_actions}].\n" + _INSTRUCTION
    )


ALFWORLD_PROMPT = PromptTemplate(
    _ALFWORLD_FIRST,
    _alfworld_later("observaitons"),
    _alfworld_actions,
    name=f"alfworld/{PROMPT_VERSION}",
    no_history=_ALFWORLD_FIRST,
)
ALFWORLD_PROMPT_CURRENT = PromptTemplate(
    _ALFWORLD_FIRST,
    _alfworld_later("observations"),
    _alfworld_actions,
    name=f"alfworld/{PROMPT_VERSION_CURRENT}",
    no_history=_ALFWORLD_FIRST,
)
ALFWORLD_PROMPT_V1 = PromptTemplate(
    _ALFWORLD_FIRST,
    _alfworld_later("observaitons"),
    _alfworld_actions,
    name="alfworld/sapo-gym-v1",
    history_lead="\n",
)

_WEBSHOP_INSTRUCTION = (
    "\nNow it's your turn to take one action for the current step.\n"
    "You should first reason step-by-step about the current situation, then think carefully which admissible "
    "action best advances the shopping goal. This reasoning process MUST be enclosed within <think> </think> tags. \n"
    "Once you've finished your reasoning, you should choose an admissible action for current step and present it "
    "within <action> </action> tags.\n"
)
_WEBSHOP_ACTIONS = "Your admissible actions of the current situation are: \n[\n{admissible_actions}\n].\n"


def _webshop_first(place: str) -> str:
    return (
        f"\nYou are an expert autonomous agent operating in the WebShop e\u2011commerce {place}. \n"
        "Your task is to: {task_description}.\n"
        "Your current observation is: {current_observation}.\n" + _WEBSHOP_ACTIONS + _WEBSHOP_INSTRUCTION
    )


def _webshop_later(place: str) -> str:
    return (
        f"\nYou are an expert autonomous agent operating in the WebShop e\u2011commerce {place}.\n"
        "Your task is to: {task_description}.\n"
        "Prior to this step, you have already taken {step_count} step(s). Below are the most recent "
        "{history_length} observations and the corresponding actions you took: {action_history}\n"
        "You are now at step {current_step} and your current observation is: {current_observation}.\n"
        + _WEBSHOP_ACTIONS
        + _WEBSHOP_INSTRUCTION
    )


WEBSHOP_PROMPT = PromptTemplate(
    _webshop_first("environment"),
    _webshop_later("environment"),
    _webshop_actions,
    name=f"webshop/{PROMPT_VERSION}",
    no_history=_webshop_first("environment"),
    max_chars=WEBSHOP_MAX_CHARS,
)
WEBSHOP_PROMPT_V1 = PromptTemplate(
    _webshop_first("game"),
    _webshop_later("game"),
    _webshop_actions_v1,
    name="webshop/sapo-gym-v1",
    history_lead="\n",
)

PLAIN_PROMPT = PromptTemplate(
    first="Task: {task_description}\nObservation: {current_observation}\nActions: [{admissible_actions}]\n",
    later=(
        "Task: {task_description}\nStep {current_step}. Recent history: {action_history}\n"
        "Observation: {current_observation}\nActions: [{admissible_actions}]\n"
    ),
    format_actions=lambda actions: ", ".join(actions),
    name="plain-v1",
    history_lead="\n",
)

# Under a tool-call protocol (``tool-call-v1``) the model answers with a call of the one tool, not in tags: the shipped
# templates' answer instructions are swapped for these (:func:`tool_call_prompt`); everything else is the same text.
_TOOL_CALL = f"call the tool {TOOL_NAME} exactly once, with that action as its {ARGUMENT}.\n"
_TOOL_INSTRUCTION = (
    "\nNow it's your turn to take an action.\n"
    "You should first reason step-by-step about the current situation. \n"
    "Once you've finished your reasoning, you should choose an admissible action for current step and " + _TOOL_CALL
)
_WEBSHOP_TOOL_INSTRUCTION = (
    "\nNow it's your turn to take one action for the current step.\n"
    "You should first reason step-by-step about the current situation, then think carefully which admissible "
    "action best advances the shopping goal. \n"
    "Once you've finished your reasoning, you should choose an admissible action for current step and " + _TOOL_CALL
)
_TOOL_SWAPS = ((_INSTRUCTION, _TOOL_INSTRUCTION), (_WEBSHOP_INSTRUCTION, _WEBSHOP_TOOL_INSTRUCTION))
TOOL_CALL_SUFFIX = "+tool-call"
"""Appended to a template's name by :func:`tool_call_prompt` (recorded in ``spec_fields()["prompt"]``, not hashed)."""


def tool_call_prompt(template: PromptTemplate) -> PromptTemplate:
    """``template`` as a tool-call protocol shows it: the ``<think>``/``<action>`` answer instructions of the shipped
    templates ask for one ``take_action`` call instead, and the name gets :data:`TOOL_CALL_SUFFIX`.

    A template without those instructions (``plain-v1``, a user's own, one already converted) comes back unchanged.
    """

    def swap(text: str | None) -> str | None:
        for old, new in _TOOL_SWAPS:
            text = None if text is None else text.replace(old, new)
        return text

    first, later, no_history = swap(template.first), swap(template.later), swap(template.no_history)
    if (first, later, no_history) == (template.first, template.later, template.no_history):
        return template
    return replace(template, first=first, later=later, no_history=no_history, name=template.name + TOOL_CALL_SUFFIX)


PROMPTS: dict[str, PromptTemplate] = {
    t.name: t
    for t in (
        ALFWORLD_PROMPT,
        ALFWORLD_PROMPT_CURRENT,
        ALFWORLD_PROMPT_V1,
        WEBSHOP_PROMPT,
        WEBSHOP_PROMPT_V1,
        PLAIN_PROMPT,
    )
}
"""Every shipped template by its name."""


def get_prompt(name: str) -> PromptTemplate:
    """A shipped template by name (or its :func:`tool_call_prompt` form, ``name + TOOL_CALL_SUFFIX``); a clear error
    lists the valid names."""
    base = name[: -len(TOOL_CALL_SUFFIX)] if name.endswith(TOOL_CALL_SUFFIX) else None
    if base in PROMPTS and tool_call_prompt(PROMPTS[base]) is not PROMPTS[base]:
        return tool_call_prompt(PROMPTS[base])
    try:
        return PROMPTS[name]
    except KeyError:
        raise ValueError(f"unknown prompt {name!r}; valid choices: {sorted(PROMPTS)}") from None


def history_block(entries: list[tuple[str, str]], first_step: int, lead: str = "") -> str:
    """The action history: ``[Observation i: '<obs>', Action i: '<action>']`` from step ``first_step``, one a line."""
    if not entries:
        return ""
    lines = (
        f"[Observation {first_step + i}: '{obs}', Action {first_step + i}: '{act}']"
        for i, (obs, act) in enumerate(entries)
    )
    return lead + "\n".join(lines)


ChatHook = Callable[[dict[str, Any], list[tuple[str, str]], int, gym.Env], None]
"""``chat(info, shown, steps, env)``: what :class:`HistoryPrompt` calls each turn to add a chat view of the turn to
``info`` (:func:`sapo_gym.messages.attach_chat`); ``shown`` is the history the turn's prompt shows (none when the
template leaves it out or its length budget drops it)."""


class HistoryPrompt(gym.Wrapper[str, str, str, str]):
    """Observation wrapper: raw observation → the prompt the model sees, with recent history.

    ``info["raw_observation"]`` keeps the backend's text. The history is the last
    ``history_length`` pairs of (observation shown *before* the action, parsed action).
    ``chat``, when given, is called each turn as ``chat(info, shown, steps, env)`` to add a view of the same turn
    to ``info`` (``shown``: the history the prompt shows): registration hands in
    :func:`sapo_gym.messages.attach_chat` (``info["messages"]``), so this module knows nothing of it.
    """

    def __init__(
        self, env: gym.Env[str, str], template: PromptTemplate, history_length: int = 2, chat: ChatHook | None = None
    ):
        super().__init__(env)
        if history_length < 0:
            raise ValueError(f"history_length must be >= 0, got {history_length}")
        self.template = template
        self.history_length = history_length
        self.chat = chat
        self._history: deque[tuple[str, str]] = deque(maxlen=max(history_length, 1))
        self._last_obs = ""
        self._steps = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        _, info = self.env.reset(seed=seed, options=options)
        self._history.clear()
        self._steps = 0
        self._last_obs = info["raw_observation"]
        return self._turn(info), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        _, reward, terminated, truncated, info = self.env.step(action)
        if self.history_length:
            self._history.append((self._last_obs, info.get("action", "")))
        self._steps += 1
        self._last_obs = info["raw_observation"]
        return self._turn(info), reward, terminated, truncated, info

    def _turn(self, info: dict[str, Any]) -> str:
        """The turn's prompt; the ``chat`` hook, if any, adds the turn's view to ``info`` (registration's: the chat
        messages), with the history the prompt shows."""
        history = list(self._history)
        prompt, shows_history = render_turn(self.template, info, history, self._steps, self.history_length)
        if self.chat is not None:
            self.chat(info, history if shows_history else [], self._steps, self.unwrapped)
        return prompt

    def render_prompt(self, info: dict[str, Any]) -> str:
        """The prompt for the current turn (see the module docstring for which template is used)."""
        return render(self.template, info, list(self._history), self._steps, self.history_length)


def render(
    template: PromptTemplate, info: dict[str, Any], history: list[tuple[str, str]], steps: int, history_length: int
) -> str:
    """The prompt ``template`` gives after ``steps`` steps with ``history`` shown (``info``: task, observation,
    admissible actions); ``history_length`` is the wrapper's setting (0 picks the no-history template)."""
    return render_turn(template, info, history, steps, history_length)[0]


def render_turn(
    template: PromptTemplate, info: dict[str, Any], history: list[tuple[str, str]], steps: int, history_length: int
) -> tuple[str, bool]:
    """:func:`render`'s prompt, and whether it shows any of ``history``: False on the first turn, under the
    no-history template, past the length budget, when ``history`` is empty or the template has no
    ``{action_history}`` field."""
    fields = {
        "task_description": info["task"],
        "current_observation": info["raw_observation"],
        "admissible_actions": template.format_actions(info["admissible_actions"]),
    }
    if steps == 0:
        return template.first.format(**fields), False
    if history_length == 0 and template.no_history is not None:
        return template.no_history.format(**fields), False
    text = template.later.format(
        **fields,
        step_count=steps,
        history_length=len(history),
        action_history=history_block(history, steps - len(history) + 1, template.history_lead),
        current_step=steps + 1,
    )
    if template.max_chars is not None and len(text) > template.max_chars:
        return (template.no_history or template.first).format(**fields), False
    return text, bool(history) and "action_history" in _field_names(template.later)


@cache
def _field_names(text: str) -> frozenset[str]:
    """The names of the fields a ``str.format`` template fills (``{action_history}``, ``{action_history!r:>9}``: both
    ``action_history``)."""
    names = (name for _, name, _, _ in Formatter().parse(text) if name)
    return frozenset(name.partition(".")[0].partition("[")[0] for name in names)
