"""Evaluate a :class:`~trainers.loop.Trainer`'s current policy on an env split (``sapo_gym.evaluation``).

The agent samples from the trainer's rollout weights with its generator (so a vLLM run evaluates
with vLLM) at the evaluation temperature, one episode per (seed, task) of the split.
"""

from __future__ import annotations

from typing import Any

from trainers.agent_boundary import build_agent

__all__ = ["evaluate", "evaluation_records"]


def evaluation_records(
    trainer: Any,
    split: str = "test",
    seeds: tuple[int, ...] = (0,),
    temperature: float | None = None,
    batch_size: int = 16,
) -> list[Any]:
    """One :class:`~sapo_gym.records.EpisodeRecord` per (seed, task) of ``split``."""
    from sapo_gym.evaluation import evaluate as play

    cfg = trainer.cfg
    temp = cfg.eval_temperature if temperature is None else temperature
    agent = build_agent(trainer.rollout_policy, cfg, temp, trainer.agent.generator)
    return play(
        agent,
        cfg.env,
        split=split,
        seeds=seeds,
        batch_size=batch_size,
        env_kwargs=cfg.gym_make_kwargs(),
        progress=cfg.progress,
    )


def evaluate(
    trainer: Any, split: str = "test", seeds: tuple[int, ...] = (0,), temperature: float | None = None
) -> dict[str, Any]:
    """Success (overall and per category) on every task of ``split`` at the evaluation temperature."""
    from sapo_gym.evaluation import summarize

    return summarize(evaluation_records(trainer, split, seeds, temperature))
