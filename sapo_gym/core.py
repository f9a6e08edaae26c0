"""The standardized text-environment contract.

Every sapo_gym environment is a ``gymnasium.Env[str, str]``:

* **observation** — the prompt string the model sees (after the prompt wrapper that registration
  applies; ``info["raw_observation"]`` is the backend's own text);
* **action** — the model's raw output, parsed by the env's :class:`~sapo_gym.parsing.Protocol`
  (tagged text, or an OpenAI tool call as JSON under ``tool-call-v1``).
  ``step`` accepts any string of any size and never raises on it.

Stable ``info`` keys (all envs): ``raw_observation``, ``task``, ``task_id``, ``task_type``,
``admissible_actions`` (list[str]), ``action_mask`` (bool array over ``admissible_actions``:
all True, for agents that choose from the list), ``dataset``, ``step``, ``won``, ``score``; and
after a step also ``action`` (the parsed action), ``is_action_valid`` (format, per protocol),
``is_action_admissible``, ``parse_reason``. Backends with an oracle add the privileged
``expert_action`` (for the expert agent and demonstrations only).

**Privileged keys** (:data:`PRIVILEGED_INFO_KEYS`: ``expert_action``, ``pddl_params``) carry the
env's own solution or hidden game state. An evaluation harness hands an agent
:func:`public_info` (every other key); only agents that declare ``privileged = True`` (oracle
baselines) get the full info, and their results are labelled as such.

``terminated`` is True on success or a terminal failure, ``truncated`` comes from ``TimeLimit``
(registration sets the horizon: the id's ``max_episode_steps``, which the spec reads back). Rewards are the
backend's own (e.g. ``success_reward`` on a win); the invalid-action penalty is *not* applied here — see
:class:`sapo_gym.wrappers.InvalidActionPenalty`. **A terminated episode is frozen**: a step after a
win or a terminal failure reaches no backend and returns the final turn again (observation,
admissible actions, ``won``, ``score``, ``step``) with reward 0 and ``terminated`` True, as
verl-agent's batch env repeats a finished game's last state; only the parse keys describe the new
action. So ``won`` never turns False again and no reward is paid twice.

**The spec** (:meth:`TextEnv.spec_fields`, hashed by :meth:`TextEnv.spec_hash`) pins what the env
*does*: id, ``revision`` (:data:`ENV_REVISION`, bumped whenever a change moves results), action
protocol, horizon, split, dataset and backend versions. The prompt template's name is recorded beside
it (``spec_fields()["prompt"]``, in every result bundle) but is *not* hashed: the prompt is how an
agent reads the env, so agents with their own prompts, chat messages or tool calls rank on the same
board, and a bundle replays on the raw env whatever prompt produced it.

Backends subclass :class:`TextEnv` and implement three hooks: ``_load_task``,
``_backend_step`` and ``task_ids`` (plus optional ``expert_action``).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from sapo_gym.parsing import Protocol, get_protocol
from sapo_gym.spaces import UnicodeText

__all__ = [
    "Turn",
    "TextEnv",
    "ENV_REVISION",
    "UNHASHED_SPEC_FIELDS",
    "OBSERVATION_MAX_LENGTH",
    "ACTION_MAX_LENGTH",
    "PRIVILEGED_INFO_KEYS",
    "INFO_KEYS",
    "STEP_INFO_KEYS",
    "public_info",
    "to_jsonable",
]

ENV_REVISION = 2
"""Behaviour revision of every env id (``spec_fields()["revision"]``). 1: unrecorded (bundles before it
carry no ``revision``). 2: a terminated episode is frozen; ALFWorld accepts ``help``; WebShop scores
synthetic goals on (name, value) option pairs with WebShop's fuzzy and noun rules, indexes WebShop's
fields with Lucene's BM25 parameters, searches from any page and always shows ``Next >``; the default
prompts follow verl-agent@7b68c51 character for character."""
UNHASHED_SPEC_FIELDS: tuple[str, ...] = ("prompt",)
"""Spec fields recorded with results but left out of :meth:`TextEnv.spec_hash` (see the module docstring)."""
OBSERVATION_MAX_LENGTH = 1 << 20
ACTION_MAX_LENGTH = 1 << 16
PRIVILEGED_INFO_KEYS: frozenset[str] = frozenset({"expert_action", "pddl_params"})
"""``info`` keys an evaluated agent must not see: the oracle's next action (Vault, WebShop, ALFWorld)
and ALFWorld's PDDL goal parameters (the game's hidden problem file; the task sentence states the goal
in words). Every other documented key is public."""
INFO_KEYS: tuple[str, ...] = (
    "raw_observation",
    "task",
    "task_id",
    "task_type",
    "dataset",
    "admissible_actions",
    "action_mask",
    "step",
    "won",
    "score",
)
"""The stable ``info`` keys of every reset and step, in the order :class:`TextEnv` writes them (backend extras and
``expert_action`` follow)."""
STEP_INFO_KEYS: tuple[str, ...] = ("action", "think", "is_action_valid", "is_action_admissible", "parse_reason")
"""The keys every step adds after them: the parse of the action."""


def public_info(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` without the :data:`PRIVILEGED_INFO_KEYS` (a new dict; ``info`` is left as it is)."""
    return {k: v for k, v in info.items() if k not in PRIVILEGED_INFO_KEYS}


_JSON_SCALARS = frozenset((type(None), bool, int, float, str))


def to_jsonable(value: Any) -> Any:
    """``value`` (an ``info`` or any of its values) as JSON values: arrays and numpy scalars to lists and Python
    scalars, tuples to lists, sets to lists sorted by ``repr``, dict keys to strings; a value JSON cannot carry
    becomes its ``repr``. What a server sends of an env's info (the remote env, the leaderboard's live runs)."""
    kind = type(value)
    if kind in _JSON_SCALARS:  # the common cases first, by exact type: a served step converts every info
        return value
    if kind is dict:
        return {
            k if type(k) is str else str(k): v if type(v) in _JSON_SCALARS else to_jsonable(v) for k, v in value.items()
        }
    if kind is list:
        return [v if type(v) in _JSON_SCALARS else to_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return [to_jsonable(v) for v in sorted(value, key=repr)]
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return repr(value)


@dataclass
class Turn:
    """What a backend reports after a reset or a step."""

    observation: str
    admissible_actions: list[str]
    won: bool = False
    lost: bool = False
    score: float = 0.0
    """Env-specific task score in [0, 1] (ALFWorld: won; WebShop: the purchase's score)."""
    reward: float = 0.0
    """Per-step reward (never cumulative: legacy cumulative scores are converted by the backend)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Backend-specific info entries, merged into ``info``."""


@dataclass(frozen=True)
class TaskInfo:
    """Identity of the task an episode runs."""

    task: str
    task_id: str
    task_type: str
    dataset: str


class TextEnv(gym.Env[str, str]):
    """Base class of all sapo_gym environments (see the module docstring for the contract)."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}
    env_name: ClassVar[str] = "text"
    version: ClassVar[str] = "v0"
    fallback_chars: ClassVar[int] = 30
    prompt_name: str | None = None
    """Name of the prompt template the env is played under (set by registration; in ``spec_fields``)."""

    def __init__(self, *, protocol: str = "verl-agent-v1", split: str = "train", render_mode: str | None = None):
        self.protocol: Protocol = get_protocol(protocol)
        self.split = split
        self.render_mode = render_mode
        self.observation_space = UnicodeText(OBSERVATION_MAX_LENGTH)
        self.action_space = UnicodeText(ACTION_MAX_LENGTH)
        self._turn: Turn | None = None
        self._task: TaskInfo | None = None
        self._steps = 0

    # ---------------------------------------------------------------- backend hooks
    @property
    def task_ids(self) -> Sequence[str]:
        """The ids of every task in this env's split, in a fixed order."""
        raise NotImplementedError

    def _load_task(self, index: int) -> tuple[TaskInfo, Turn]:
        """Start task ``task_ids[index]``; return its identity and the first turn."""
        raise NotImplementedError

    def _backend_step(self, action: str) -> Turn:
        """Execute a parsed action (already known admissible or not) and report the turn."""
        raise NotImplementedError

    def is_admissible(self, action: str) -> bool:
        """Whether the backend would execute ``action`` in the current state (``is_action_admissible``).

        Default: membership in the current turn's ``admissible_actions``. Backends whose listed
        actions are templates (WebShop shows ``search[<your query>]`` but takes any query) override it.
        """
        assert self._turn is not None
        return action in self._turn.admissible_actions

    def expert_action(self) -> str | None:
        """A privileged oracle's next action, or None when the backend has none."""
        return None

    def backend_versions(self) -> dict[str, str]:
        """Versions of the packages whose behaviour the results depend on."""
        return {}

    def calls_are_short(self) -> bool:
        """Whether every reset and step of this env is short (well under a millisecond or two of CPU, no waiting on
        I/O), so that a server may run them on its event loop rather than hand each to a thread. Default: no."""
        return False

    def spec_fields(self) -> dict[str, Any]:
        """What pins the results of this env; hashed by :meth:`spec_hash`."""
        spec = self.spec
        env_id = spec.id if spec is not None else f"sapo/{self.env_name}-{self.version}"
        # The horizon is the id's registered max_episode_steps, read from gymnasium's spec of the id (make leaves it
        # off the unwrapped env's own spec), not the run's: results run with an overridden one are not comparable.
        registered = gym.registry.get(env_id)
        return {
            "id": env_id,
            "version": self.version,
            "revision": ENV_REVISION,
            "protocol": self.protocol.name,
            "prompt": self.prompt_name,
            "horizon": registered.max_episode_steps if registered is not None else None,
            "split": self.split,
            "dataset": self._dataset_name(),
            "backend": self.backend_versions(),
        }

    def _dataset_name(self) -> str:
        return "unknown"

    # ---------------------------------------------------------------- gymnasium API
    def spec_hash(self) -> str:
        """A stable hash of :meth:`spec_fields` but :data:`UNHASHED_SPEC_FIELDS`, recorded with every result."""
        fields = {k: v for k, v in self.spec_fields().items() if k not in UNHASHED_SPEC_FIELDS}
        blob = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def task_index_of(self, task_id: str) -> int:
        ids = list(self.task_ids)
        try:
            return ids.index(task_id)
        except ValueError:
            raise ValueError(f"unknown task_id {task_id!r} for split {self.split!r} ({len(ids)} tasks)") from None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode.

        ``options`` may hold ``task_index`` (int) or ``task_id`` (str); otherwise the task is drawn
        with ``self.np_random`` (seeded by ``seed``).
        """
        super().reset(seed=seed)
        options = options or {}
        n = len(self.task_ids)
        if n == 0:
            raise RuntimeError(f"{type(self).__name__}: split {self.split!r} has no tasks")
        if "task_id" in options:
            index = self.task_index_of(str(options["task_id"]))
        elif "task_index" in options:
            index = int(options["task_index"]) % n
        else:
            index = int(self.np_random.integers(n))
        self._task, self._turn = self._load_task(index)
        self._steps = 0
        return self._turn.observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._turn is None:
            raise RuntimeError("call reset() before step()")
        parsed = self.protocol.parse(action if isinstance(action, str) else str(action), self.fallback_chars)
        admissible = self.is_admissible(parsed.action)
        valid, reason = parsed.valid, parsed.reason
        if self.protocol.inadmissible_is_invalid and valid and not admissible:
            valid, reason = False, "inadmissible"
        # A finished episode is frozen, as verl-agent's batch env repeats a finished game's last state (won stays as
        # it was, no second reward, the step count stays the episode's length); strict-v1 does not execute an
        # inadmissible action. Both repeat the turn (its extra copied: infos never share objects).
        finished = self._turn.won or self._turn.lost
        if not finished:
            self._steps += 1
        if finished or (self.protocol.inadmissible_is_invalid and not admissible):
            turn = replace(self._turn, reward=0.0, extra=copy.deepcopy(self._turn.extra))
        else:
            turn = self._backend_step(parsed.action)
        self._turn = turn
        info = self._info()
        info.update(
            action=parsed.action,
            think=parsed.think,
            is_action_valid=valid,
            is_action_admissible=admissible,
            parse_reason=reason,
        )
        return turn.observation, float(turn.reward), bool(turn.won or turn.lost), False, info

    def _info(self) -> dict[str, Any]:
        assert self._turn is not None and self._task is not None
        turn, task = self._turn, self._task
        info: dict[str, Any] = {
            "raw_observation": turn.observation,
            "task": task.task,
            "task_id": task.task_id,
            "task_type": task.task_type,
            "dataset": task.dataset,
            "admissible_actions": list(turn.admissible_actions),
            "action_mask": np.ones(len(turn.admissible_actions), dtype=bool),
            "step": self._steps,
            "won": bool(turn.won),
            "score": float(turn.score),
        }
        info.update(turn.extra)
        expert = self.expert_action()
        if expert is not None:
            info["expert_action"] = expert
        return info

    def render(self) -> str | None:
        if self.render_mode == "ansi" and self._turn is not None:
            return self._turn.observation
        return None
