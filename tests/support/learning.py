"""What the slow learning tests (``tests/trainers/test_learning*.py``) measure: success before and after RL
on the same tasks with the same sampling seed, and the z-statistic of the rise."""

from __future__ import annotations

import math
from typing import Any

SEEDS = tuple(range(16))
"""Evaluation seeds: 6 tasks × 16 seeds = 96 episodes (the statistic's power grows with √episodes)."""


def success(trainer: Any) -> float:
    """Success on every task of the trainer's ``train`` split × :data:`SEEDS`, sampled under torch seed 1."""
    import torch

    from trainers.evaluation import evaluate

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)  # the same sampling seed before and after (common random numbers)
        return evaluate(trainer, split="train", seeds=SEEDS)["all"]["success"]


def z_rise(before: float, after: float, n: int) -> float:
    """One-sided two-proportion z-statistic of ``after > before``, ``n`` episodes each (pooled variance)."""
    pooled = (before + after) / 2
    return (after - before) / math.sqrt(max(pooled * (1 - pooled), 1e-12) * 2 / n)


def rise(trainer: Any, iterations: int, tasks: int = 6) -> tuple[float, float, float, list[float]]:
    """Success before, RL for ``iterations``, success after on ``tasks`` tasks × :data:`SEEDS`: (before, after,
    z of the rise, each iteration's rollout success)."""
    trainer.start_reinforcement()
    before = success(trainer)
    history = [trainer.run_iteration()["rollout/success"] for _ in range(iterations)]
    after = success(trainer)
    return before, after, z_rise(before, after, tasks * len(SEEDS)), history
