"""What an evaluation plays and what it records of each episode.

Which episodes run is the :class:`EvaluationMode` (recorded in result bundles): ``every-task`` plays
every task of the split once per seed (this project's protocol, the leaderboard's); ``verl-agent``
plays verl-agent's validation draw, ``workers`` episodes per seed, worker ``i`` playing the game that
TextWorld's batch env seeded ``seed + 1000 + i`` deals (:func:`shuffled_cycle_pick`), with repeats.

Each episode is an :class:`EpisodeRecord` of :class:`StepRecord` turns (:func:`new_record` at the reset,
:func:`record_step` per step): the agent's raw outputs, what the env made of them, and the accounting of
each request. The agent sees :func:`sapo_gym.core.public_info` only (no ``expert_action``, no
``pddl_params``), unless it declares ``privileged = True`` (:func:`is_privileged`: the oracle baselines);
each record says which it was (:func:`harness_record` is what a result bundle stores).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from sapo_gym.core import PRIVILEGED_INFO_KEYS

__all__ = [
    "StepRecord",
    "EpisodeRecord",
    "EvaluationMode",
    "EVALUATION_MODES",
    "EVERY_TASK",
    "VERL_AGENT",
    "evaluation_mode",
    "shuffled_cycle_pick",
    "is_privileged",
    "harness_record",
    "new_record",
    "record_step",
]


def shuffled_cycle_pick(task_ids: Sequence[str], seed: int, k: int = 0) -> str:
    """The ``k``-th game (0-based) a TextWorld batch env of one game seeded ``seed`` plays from ``task_ids``.

    TextWorld's rule (``TextworldBatchGymEnv.seed``, ``shuffled_cycle``): ``RandomState(seed)`` shuffles a
    copy of the list once; resets walk through it, and each further pass first reshuffles it with the same
    generator. The result depends on the order of ``task_ids``: here the split's sorted ids.
    """
    if not task_ids:
        raise ValueError("no tasks to draw from")
    rng = np.random.RandomState(seed)
    order = list(task_ids)
    rng.shuffle(order)
    passes, index = divmod(k, len(order))
    for _ in range(passes):
        rng.shuffle(order)
    return order[index]


@dataclass(frozen=True)
class EvaluationMode:
    """Which episodes an evaluation plays for each seed (a result bundle records it as ``evaluation.mode``)."""

    name: str
    """``every-task`` or ``verl-agent`` (:data:`EVALUATION_MODES`)."""
    workers: int | None = None
    """``verl-agent``: validation envs, one episode each (its example scripts' ``data.val_batch_size=128``)."""
    seed_offset: int = 0
    """``verl-agent``: worker ``i`` is seeded ``seed + seed_offset + i`` (``make_envs`` passes ``env.seed + 1000``)."""
    round: int = 0
    """``verl-agent``: which validation of a training run (0: the first, before training); worker ``i`` plays
    game ``round`` of its shuffled cycle, since the validation envs live for the whole run."""

    def task_ids(self, task_ids: Sequence[str], seed: int) -> list[str]:
        """The task of each episode of ``seed``, in order (``every-task``: each task once)."""
        if self.name == "every-task":
            return list(task_ids)
        assert self.workers is not None
        return [shuffled_cycle_pick(task_ids, seed + self.seed_offset + i, self.round) for i in range(self.workers)]

    def record(self) -> dict[str, Any]:
        """The mode as a result bundle stores it."""
        if self.name == "every-task":
            return {"name": self.name}
        return {"name": self.name, "workers": self.workers, "seed_offset": self.seed_offset, "round": self.round}

    def describe(self) -> str:
        if self.name == "every-task":
            return "every-task"
        return f"verl-agent ({self.workers} workers seeded seed+{self.seed_offset}+i, round {self.round})"


EVERY_TASK = EvaluationMode("every-task")
VERL_AGENT = EvaluationMode("verl-agent", workers=128, seed_offset=1000)
EVALUATION_MODES: dict[str, EvaluationMode] = {m.name: m for m in (EVERY_TASK, VERL_AGENT)}


def evaluation_mode(name: str, workers: int | None = None, round: int = 0) -> EvaluationMode:
    """A named mode (``workers`` and ``round`` adjust ``verl-agent``); unknown names list the valid ones."""
    if name not in EVALUATION_MODES:
        raise ValueError(f"unknown evaluation mode {name!r}; valid choices: {sorted(EVALUATION_MODES)}")
    base = EVALUATION_MODES[name]
    if base.name == "every-task":
        if workers is not None or round:
            raise ValueError("workers and round apply to the verl-agent mode only")
        return base
    workers = base.workers if workers is None else int(workers)
    if workers is None or workers < 1 or round < 0:
        raise ValueError(f"verl-agent mode needs workers >= 1 and round >= 0, got workers={workers}, round={round}")
    return EvaluationMode(base.name, workers, base.seed_offset, int(round))


@dataclass
class StepRecord:
    """One turn: what the agent wrote, what the env executed, what it answered."""

    output: str
    """The agent's raw output."""
    action: str
    """The parsed action sent to the env."""
    think: str | None
    valid: bool
    admissible: bool
    observation: str
    """The env's raw observation after the action."""
    reward: float
    prompt_tokens: int | None = None
    """Accounting (not replayed, not in a result bundle): the prompt's tokens as the server counted them (None: not reported)."""
    completion_tokens: int | None = None
    """The reply's tokens as the server counted them (None: not reported)."""
    latency_s: float | None = None
    """Seconds from the request to its answer, retries included (a batch agent: the whole batch's call)."""
    finish_reason: str | None = None
    """Why generation stopped, as the server said: ``stop``, ``length`` (hit the token budget), ``tool_calls``..."""


@dataclass
class EpisodeRecord:
    task_id: str
    task_type: str
    seed: int
    success: bool
    score: float
    steps: int
    invalid_actions: int
    episode_return: float
    initial_observation: str
    turns: list[StepRecord] = field(default_factory=list)
    privileged: bool = False
    """True when the agent saw the full info (an oracle baseline), False when only the public keys."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeRecord:
        """The inverse of :meth:`to_dict` (an episodes log's lines)."""
        return cls(**{**data, "turns": [StepRecord(**t) for t in data["turns"]]})


def is_privileged(agent: Any) -> bool:
    """Whether ``agent`` declared explicit access to the privileged info keys (``privileged = True``)."""
    return getattr(agent, "privileged", False) is True


def harness_record(privileged: bool, agent_process: str | None = None) -> dict[str, Any]:
    """What a result bundle records about the info the agent was given and, when the harness says so, how the
    agent ran: ``agent_process`` ``isolated`` (a process of its own that got only what ``act`` is passed:
    :class:`agents.isolated.IsolatedAgent`) or ``in-process`` (the harness's process)."""
    record = {
        "info_filter": "public",
        "withheld_keys": sorted(PRIVILEGED_INFO_KEYS),
        "privileged_agent": bool(privileged),
    }
    if agent_process is not None:
        if agent_process not in ("isolated", "in-process"):
            raise ValueError(f"agent_process must be 'isolated' or 'in-process', got {agent_process!r}")
        record["agent_process"] = agent_process
    return record


def new_record(info: dict[str, Any], task_id: str, seed: int, privileged: bool = False) -> EpisodeRecord:
    """An empty record of the episode that ``reset`` just started (``info``: the reset's info)."""
    return EpisodeRecord(
        task_id, info["task_type"], seed, False, 0.0, 0, 0, 0.0, info["raw_observation"], privileged=privileged
    )


_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "latency_s", "finish_reason")


def record_step(
    rec: EpisodeRecord, output: str, reward: float, info: dict[str, Any], usage: dict[str, Any] | None = None
) -> None:
    """Append one turn (the agent's raw ``output``, the step's reward and info, the request's ``usage``
    accounting: :data:`StepRecord` ``prompt_tokens`` ... ``finish_reason``) to ``rec``."""
    extra = {k: (usage or {}).get(k) for k in _USAGE_KEYS}
    rec.turns.append(
        StepRecord(
            output,
            info["action"],
            info.get("think"),
            bool(info["is_action_valid"]),
            bool(info["is_action_admissible"]),
            info["raw_observation"],
            float(reward),
            **extra,
        )
    )
    rec.steps += 1
    rec.invalid_actions += int(not info["is_action_valid"])
    rec.episode_return += float(reward)
    rec.success, rec.score = bool(info["won"]), float(info["score"])
