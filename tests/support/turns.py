"""Hand-made rollout turns for batch tests: :func:`turn` builds the one record a rollout keeps per env turn."""

from __future__ import annotations

from typing import Any

from agents.generation.base import GenerationOutput
from trainers.experience import TurnRecord

__all__ = ["turn"]


def turn(
    prompt_ids: list[int],
    response_ids: list[int],
    log_probs: list[float],
    reward: float = 0.0,
    done: bool = False,
    invalid: bool = False,
    traj_id: int = 0,
    turn_idx: int = 0,
    group_id: int = 0,
    anchor: str | None = None,
    **output: Any,
) -> TurnRecord:
    """A :class:`TurnRecord` whose output samples ``response_ids`` after ``prompt_ids`` (``output``: more
    :class:`GenerationOutput` fields, e.g. ``allowed_tokens`` or ``value_logits``)."""
    sampled = GenerationOutput(list(response_ids), list(log_probs), "", False, prompt_ids=list(prompt_ids), **output)
    return TurnRecord("", sampled, reward, done, invalid, traj_id, turn_idx, group_id, anchor)
