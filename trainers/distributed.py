"""Data parallelism for the :class:`~trainers.loop.Trainer` (DeepSpeed over N processes).

One iteration on ``N`` ranks does what one process does, split three ways:

1. **Rollout.** Rank ``r`` plays a contiguous block of the iteration's task groups
   (:func:`rank_groups`; a GRPO group is never split), with the trajectory ids and reset seeds those
   envs have in the full env. :func:`gather_rollout` collects every rank's turns with
   ``strategy.all_gather_object`` and orders them as one process would have recorded them (by turn
   index, then trajectory id), so every rank builds the same global :class:`Experience`: advantages,
   their normalization and GRPO's group statistics are global.
2. **Update** (:func:`trainers.update.update`). Every rank cuts each minibatch into the same
   micro-batches a single process would use and trains micro-batches ``r, r + N, ...`` of them
   (:func:`deal`), each loss weighted
   ``N · len(micro) / len(minibatch)``. DeepSpeed averages gradients over ranks, so the step is the
   single-process step (up to the order of floating-point sums). Ranks with one micro-batch fewer run a
   zero-weight pass so that ZeRO's collectives line up.
3. **Inference.** The old-log-prob, reference and value phases deal their micro-batches the same way
   and all-gather the results (:func:`map_micro_batches`): each rank runs 1/N of the forward passes.
4. **Metrics.** Per-micro-batch statistics are gathered and averaged in the single-process order
   (:func:`gather_stats`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from trainers.experience import Experience, micro_batches
from trainers.rollout import Rollout
from trainers.strategy import TrainingStrategy

__all__ = ["rank_groups", "gather_rollout", "deal", "map_micro_batches", "gather_stats", "mean_stats"]

StatKey = tuple[int, int, float]
"""(epoch, minibatch, micro-batch) of a statistic; ``math.inf`` for the minibatch's optimizer step."""


def rank_groups(num_tasks: int, rank: int, world_size: int) -> list[int]:
    """The task groups rank ``rank`` plays: a contiguous block, sizes differing by at most one."""
    if world_size > num_tasks:
        raise ValueError(
            f"{world_size} processes but only {num_tasks} task groups per iteration: "
            "raise --episodes-per-iteration or launch fewer processes"
        )
    return list(range(num_tasks * rank // world_size, num_tasks * (rank + 1) // world_size))


def gather_rollout(strategy: TrainingStrategy, rollout: Rollout) -> Rollout:
    """Every rank's rollout merged, turns in single-process order; phase times are the slowest rank's."""
    if strategy.world_size == 1:
        return rollout
    parts: list[Rollout] = strategy.all_gather_object(rollout)
    turns = sorted((t for p in parts for t in p.turns), key=lambda t: (t.turn_idx, t.traj_id))
    return Rollout(
        turns=turns,
        episodes=[e for p in parts for e in p.episodes],
        generation_s=max(p.generation_s for p in parts),
        env_s=max(p.env_s for p in parts),
        dropped=[d for p in parts for d in p.dropped],
    )


def deal(micros: Sequence[Experience], rank: int, world_size: int) -> list[tuple[int, Experience, bool]]:
    """This rank's ``(index, micro-batch, real)``: micro-batches ``rank::world_size``, padded with
    zero-weight repeats (``real`` False) to ``ceil(len(micros) / world_size)`` passes on every rank."""
    mine = [(j, micros[j], True) for j in range(rank, len(micros), world_size)]
    passes = math.ceil(len(micros) / world_size)
    return mine + [(-1, micros[0], False)] * (passes - len(mine))


def map_micro_batches(
    strategy: TrainingStrategy | None, exp: Experience, size: int, fn: Callable[[Experience], Any]
) -> list[Any]:
    """``fn`` (a tensor, or a tuple of them) on each micro-batch of ``exp``, in order; every rank gets all.

    On one process a plain loop. On N ranks each runs the micro-batches :func:`deal` gives it (its
    zero-weight repeats run too, so ZeRO-3's parameter gathers line up) and the results are
    all-gathered through the CPU: the same micro-batches as one process, so the same numbers."""
    micros = list(micro_batches(exp, size))
    if strategy is None or strategy.world_size == 1:
        return [fn(m) for m in micros]
    mine = []
    for j, micro, real in deal(micros, strategy.rank, strategy.world_size):
        out = fn(micro)
        if real:
            mine.append((j, _moved(out, torch.device("cpu"))))
    gathered = sorted((item for part in strategy.all_gather_object(mine) for item in part), key=lambda item: item[0])
    return [_moved(out, exp.input_ids.device) for _, out in gathered]


def _moved(obj: Any, device: torch.device) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    return tuple(_moved(o, device) for o in obj) if isinstance(obj, tuple) else obj


def gather_stats(strategy: TrainingStrategy, stats: list[tuple[StatKey, dict[str, float]]]) -> list[dict[str, float]]:
    """Every rank's keyed statistics, sorted by key (the order one process records them in)."""
    if strategy.world_size > 1:
        stats = [item for part in strategy.all_gather_object(stats) for item in part]
    return [s for _, s in sorted(stats, key=lambda item: item[0])]


def mean_stats(stats: list[dict[str, Any]]) -> dict[str, float]:
    """Mean of each key over the dicts that have it."""
    keys = sorted({k for s in stats for k in s})
    return {k: float(np.mean([float(s[k]) for s in stats if k in s])) for k in keys}
