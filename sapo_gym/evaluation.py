"""Evaluation harness: run an agent on the tasks of a split and record each episode.

Which episodes run is the :class:`EvaluationMode` (recorded in result bundles): ``every-task`` plays
every task of the split once per seed (this project's protocol, the leaderboard's); ``verl-agent``
plays verl-agent's validation draw, ``workers`` episodes per seed, worker ``i`` playing the game that
TextWorld's batch env seeded ``seed + 1000 + i`` deals (:func:`shuffled_cycle_pick`), with repeats.

No torch here: the agent is any object with the :class:`agents.base.Agent` interface. Envs run
in this process, ``batch_size`` at a time, and the agent is asked only for the active ones.

The agent sees :func:`sapo_gym.core.public_info` only (no ``expert_action``, no ``pddl_params``),
unless it declares ``privileged = True`` (the oracle baselines); each record says which it was
(:func:`harness_record` is what a result bundle stores). The filter guards what ``act`` is passed, not
what an agent running in this process can reach (frames, ``gc``): ``sapo-gym evaluate`` runs submitted
agents in a process of their own (:mod:`agents.isolated`) and the bundle records which way it ran.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Sequence

import gymnasium as gym
import numpy as np

from sapo_gym.bounds import bound_output
from sapo_gym.core import PRIVILEGED_INFO_KEYS, public_info
from sapo_gym.intervals import clustered_rate_interval

__all__ = ["StepRecord", "EpisodeRecord", "EvaluationMode", "EVALUATION_MODES", "EVERY_TASK", "VERL_AGENT", "evaluation_mode",
           "shuffled_cycle_pick", "evaluate", "run_batch", "batches", "summarize", "format_table", "is_privileged", "harness_record", "new_record",
           "record_step"]


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
    def from_dict(cls, data: dict[str, Any]) -> "EpisodeRecord":
        """The inverse of :meth:`to_dict` (an episodes log's lines)."""
        return cls(**{**data, "turns": [StepRecord(**t) for t in data["turns"]]})


def is_privileged(agent: Any) -> bool:
    """Whether ``agent`` declared explicit access to the privileged info keys (``privileged = True``)."""
    return getattr(agent, "privileged", False) is True


def harness_record(privileged: bool, agent_process: str | None = None) -> dict[str, Any]:
    """What a result bundle records about the info the agent was given and, when the harness says so, how the
    agent ran: ``agent_process`` ``isolated`` (a process of its own that got only what ``act`` is passed:
    :class:`agents.isolated.IsolatedAgent`) or ``in-process`` (the harness's process)."""
    record = {"info_filter": "public", "withheld_keys": sorted(PRIVILEGED_INFO_KEYS), "privileged_agent": bool(privileged)}
    if agent_process is not None:
        if agent_process not in ("isolated", "in-process"):
            raise ValueError(f"agent_process must be 'isolated' or 'in-process', got {agent_process!r}")
        record["agent_process"] = agent_process
    return record


def new_record(info: dict[str, Any], task_id: str, seed: int, privileged: bool = False) -> EpisodeRecord:
    """An empty record of the episode that ``reset`` just started (``info``: the reset's info)."""
    return EpisodeRecord(task_id, info["task_type"], seed, False, 0.0, 0, 0, 0.0, info["raw_observation"], privileged=privileged)


_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "latency_s", "finish_reason")


def record_step(rec: EpisodeRecord, output: str, reward: float, info: dict[str, Any], usage: dict[str, Any] | None = None) -> None:
    """Append one turn (the agent's raw ``output``, the step's reward and info, the request's ``usage``
    accounting: :data:`StepRecord` ``prompt_tokens`` ... ``finish_reason``) to ``rec``."""
    extra = {k: (usage or {}).get(k) for k in _USAGE_KEYS}
    rec.turns.append(StepRecord(output, info["action"], info.get("think"), bool(info["is_action_valid"]),
                                bool(info["is_action_admissible"]), info["raw_observation"], float(reward), **extra))
    rec.steps += 1
    rec.invalid_actions += int(not info["is_action_valid"])
    rec.episode_return += float(reward)
    rec.success, rec.score = bool(info["won"]), float(info["score"])


def run_batch(agent: Any, envs: list[gym.Env], task_ids: Sequence[str], seed: int, progress: Any,
              on_end: Callable[[int, EpisodeRecord], None] | None = None,
              clock: Callable[[], float] | None = None) -> list[EpisodeRecord]:
    """Play one episode of each of ``task_ids`` (seeded ``seed``) in lockstep on ``envs``: the agent acts on the
    active envs together. ``on_end(i, record)`` is called as episode ``i`` ends; with a ``clock`` each turn's
    ``latency_s`` is its batch call's (without one, none is recorded: the records are then reproducible)."""
    privileged = is_privileged(agent)
    shown = (lambda info: info) if privileged else public_info
    records: list[EpisodeRecord] = []
    obs: list[str] = []
    infos: list[dict[str, Any]] = []
    for env, task_id in zip(envs, task_ids):
        o, info = env.reset(seed=seed, options={"task_id": task_id})
        obs.append(o)
        infos.append(info)
        records.append(new_record(info, task_id, seed, privileged))
    agent.reset(len(envs))
    active = list(range(len(envs)))
    while active:
        start = clock() if clock is not None else 0.0
        outputs = agent.act([obs[i] for i in active], [shown(infos[i]) for i in active])
        latency = clock() - start if clock is not None else None
        if not isinstance(outputs, (list, tuple)) or len(outputs) != len(active):
            raise TypeError(f"act must return one output per observation ({len(active)}), got {str(outputs)[:200]}")
        outputs = [bound_output(out) for out in outputs]  # what the env steps is what the records hold
        still = []
        for i, out in zip(active, outputs):
            o, r, term, trunc, info = envs[i].step(out)
            record_step(records[i], out, r, info, {"latency_s": latency})
            obs[i], infos[i] = o, info
            if progress is not None and hasattr(progress, "turn"):
                progress.turn(1)
            if term or trunc:
                if on_end is not None:
                    on_end(i, records[i])
                if progress is not None:
                    progress.update(1)
            else:
                still.append(i)
        active = still
    return records


def batches(task_ids: Sequence[str], size: int) -> Iterable[list[str]]:
    """Consecutive batches of at most ``size`` tasks, none holding a task twice (agents may keep per-task memory)."""
    batch: list[str] = []
    for task_id in task_ids:
        if len(batch) == size or task_id in batch:
            yield batch
            batch = []
        batch.append(task_id)
    if batch:
        yield batch


def evaluate(
    agent: Any,
    env_id: str,
    *,
    split: str | None = None,
    task_ids: Sequence[str] | None = None,
    seeds: Iterable[int] = (0,),
    batch_size: int = 8,
    env_kwargs: dict[str, Any] | None = None,
    progress: bool = True,
    envs: Sequence[gym.Env] | None = None,
    mode: EvaluationMode = EVERY_TASK,
) -> list[EpisodeRecord]:
    """Run ``agent`` on the tasks of ``split`` (or the given ``task_ids``) that ``mode`` picks for each seed.

    ``every-task`` (default): once per (seed, task). ``envs``: already built envs of ``env_id`` to step
    together (the caller keeps and closes them; ``split``, ``batch_size`` and ``env_kwargs`` are then
    unused); by default ``batch_size`` envs are built here and closed at the end.
    """
    owned = envs is None
    if envs is None:
        kwargs = dict(env_kwargs or {})
        if split is not None:
            kwargs["split"] = split
        envs = [gym.make(env_id, **kwargs) for _ in range(max(1, batch_size))]
    envs = list(envs)
    ids = list(task_ids) if task_ids is not None else list(envs[0].unwrapped.task_ids)
    plan = [(seed, mode.task_ids(ids, seed)) for seed in seeds]
    bar = None
    if progress:
        try:
            from tqdm import tqdm

            bar = tqdm(total=sum(len(chosen) for _, chosen in plan), desc=f"evaluate {env_id}", unit="ep", leave=False)
        except ImportError:
            bar = None
    records: list[EpisodeRecord] = []
    try:
        for seed, chosen in plan:
            for chunk in batches(chosen, len(envs)):
                records += run_batch(agent, envs[: len(chunk)], chunk, seed, bar)
    finally:
        for env in envs if owned else ():
            env.close()
        if bar is not None:
            bar.close()
    return records


def summarize(records: Sequence[EpisodeRecord]) -> dict[str, dict[str, float]]:
    """Per task type and ``all``: episodes, success rate (+ Wilson 95 % CI), mean score, steps, invalid rate.

    The interval counts tasks, not episodes (:func:`sapo_gym.intervals.clustered_rate_interval`, as a result
    bundle's aggregates do), so more seeds of a deterministic agent (the same episodes again) do not narrow it.
    """
    groups: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for rec in records:
        groups[rec.task_type].append(rec)
        groups["all"].append(rec)
    out: dict[str, dict[str, float]] = {}
    for name in sorted(groups, key=lambda k: (k == "all", k)):
        recs = groups[name]
        n = len(recs)
        by_task: dict[str, list[float]] = defaultdict(list)
        for r in recs:
            by_task[r.task_id].append(float(bool(r.success)))
        lo, hi = clustered_rate_interval(by_task)
        steps = sum(r.steps for r in recs)
        out[name] = {
            "episodes": n,
            "success": sum(r.success for r in recs) / n,
            "success_ci_low": lo,
            "success_ci_high": hi,
            "score": sum(r.score for r in recs) / n,
            "steps": steps / n,
            "invalid_rate": sum(r.invalid_actions for r in recs) / max(steps, 1),
        }
    return out


def format_table(summary: dict[str, dict[str, float]], title: str = "") -> str:
    """A plain-text table of :func:`summarize`'s output."""
    head = f"{'category':<12} {'episodes':>8} {'success':>8} {'95% CI':>15} {'score':>7} {'steps':>6} {'invalid':>8}"
    lines = [title, head, "-" * len(head)] if title else [head, "-" * len(head)]
    for name, row in summary.items():
        ci = f"[{row['success_ci_low']:.2f}, {row['success_ci_high']:.2f}]"
        lines.append(
            f"{name:<12} {int(row['episodes']):>8} {row['success']:>8.1%} {ci:>15} {row['score']:>7.3f} "
            f"{row['steps']:>6.1f} {row['invalid_rate']:>8.1%}"
        )
    return "\n".join(lines)
