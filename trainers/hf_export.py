"""Export a :class:`~trainers.loop.Trainer`'s policy in Hugging Face format (weights + tokenizer).

A LoRA policy is exported merged (base + adapters, SAPO's w⁺/w⁻ rows in the head): a plain HF model
that ``--model DIR``, evaluation, the leaderboard and vLLM load without peft. The adapters alone are
in the run's checkpoints. The merged (or ZeRO-gathered) weights are the strategy's
:meth:`~trainers.strategy.TrainingStrategy.full_state_dict`, the same tensors a vLLM weight push receives:
one merge path (:func:`trainers.lora.merged_state_dict`), not one per caller.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["export_policy"]


def export_policy(trainer: Any, path: str | Path) -> None:
    """The trained policy at ``path`` (every rank calls this under DeepSpeed: ZeRO-3 gathers; rank 0 writes)."""
    if not (trainer.lora or trainer.distributed):
        trainer.policy.save_pretrained(path)
        return
    from trainers.lora import base_model

    weights = trainer.strategy.full_state_dict(trainer.actor)  # a collective; LoRA: merged into plain HF weights
    if trainer.is_main:
        base_model(trainer.policy.model).save_pretrained(str(path), state_dict=weights)
        trainer.policy.tokenizer.save_pretrained(str(path))
    trainer.strategy.barrier()
