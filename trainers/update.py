"""The one update path: PPO-style epochs × minibatches × micro-batches, for the actor and PPO's critic alike.

Both models are :class:`~trainers.strategy.Trainable` objects of the same strategy, so one function
serves every backend (plain torch, DeepSpeed ZeRO over N ranks) and both models: the strategy owns
``backward`` (with the finiteness check every rank agrees on) and ``step`` (gradient clipping, the
norm's finiteness check, the optimizer step). What differs between the actor and the critic is only
the ``loss`` callable: the method's actor loss on the policy's logits, or PPO's value loss on the
critic's values.

Each minibatch is cut into the micro-batches a single process would use; under data parallelism
rank ``r`` trains micro-batches ``r, r + N, ...`` (:func:`~trainers.distributed.deal`), each loss
weighted ``N · len(micro) / len(minibatch)``, so the averaged gradient is the single-process one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from trainers.distributed import deal, gather_stats, mean_stats
from trainers.experience import Experience, micro_batches
from trainers.strategy import Trainable, TrainingStrategy

__all__ = ["LossFn", "update"]

LossFn = Callable[[Experience], tuple[Tensor, dict[str, Tensor]]]
"""``micro-batch -> (loss, statistics)``: the loss runs the model's forward pass itself."""


def update(
    strategy: TrainingStrategy,
    trainable: Trainable,
    exp: Experience,
    loss: LossFn,
    *,
    epochs: int,
    minibatches: int,
    micro_batch_size: int,
    shuffle: torch.Generator,
    memory: Any,
    by_length: bool = False,
) -> dict[str, float]:
    """``epochs`` passes over ``exp`` in ``minibatches`` shuffled minibatches, one optimizer step each.

    Args:
        strategy: the backend; ``trainable`` was prepared by it.
        exp: the iteration's batch, with advantages and targets filled in.
        loss: the per-micro-batch loss (see :data:`LossFn`), computed under ``strategy.train_forward``.
        shuffle: the minibatch-order generator (the actor and critic share it, in that order of use).
        memory: a :class:`~trainers.profiling.MemoryMeter` that counts each micro-batch's saved activations.
        by_length: cut each minibatch into micro-batches longest rows first (``TrainConfig.group_by_length``).

    Returns:
        The statistics averaged over micro-batches (in single-process order), and ``grad_norm``.
    """
    size, world, stats = math.ceil(len(exp) / minibatches), strategy.world_size, []
    for epoch in range(epochs):
        for m, mb in enumerate(exp.minibatches(size, generator=shuffle)):
            strategy.zero_grad(trainable)
            for j, micro, real in deal(list(micro_batches(mb, micro_batch_size, by_length)), strategy.rank, world):
                with memory.track_activations(), strategy.autocast(), strategy.train_forward(trainable):
                    value, s = loss(micro)
                    strategy.backward(trainable, value * (len(micro) * world if real else 0) / len(mb))
                if real:
                    stats.append(((epoch, m, j), {k: float(v) for k, v in s.items()}))
            grad_norm = strategy.step(trainable)
            if strategy.is_main:  # the global norm, the same on every rank
                stats.append(((epoch, m, math.inf), {"grad_norm": grad_norm}))
    return mean_stats(gather_stats(strategy, stats))
