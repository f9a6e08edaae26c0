"""Checkpoints: one file per save, written atomically; the newest good one is always on disk.

A checkpoint holds everything the next iteration depends on: the iteration number, the config,
the policy, its optimizer, the frozen reference, PPO's critic and its optimizer, and every random
state (torch's global generator, which sampling uses, and the minibatch-shuffling generator).
Resuming from it reproduces the next iteration exactly on CPU (:func:`save_trainer`,
:func:`load_trainer`; a run resumes only under the same config, :meth:`TrainConfig.resume_conflicts`).

Under DeepSpeed a checkpoint is a folder, ``checkpoint-<iteration>/`` (:func:`save_sharded`): each
trained model's engine checkpoint (every rank writes its ZeRO shard), ``trainer.pt`` (rank 0: the
config, the reference, the shared random states) and ``rank<r>.pt`` (each rank's sampling RNG). It
counts only once rank 0 has marked it ``COMPLETE`` after every rank finished writing.

With LoRA (``lora_rank`` > 0) the policy and PPO's critic are saved as their trainable tensors only
(:func:`trainers.lora.trainable_state`: adapters, SAPO's w⁺/w⁻ rows, the critic's head) with their
optimizer states, and there is no reference copy to save; resuming rebuilds the frozen base from the
config (``model``, ``seed``) and loads them over it.
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainers.lora import load_trainable_state, trainable_state

__all__ = ["save_checkpoint", "save_sharded", "latest_checkpoint", "load_checkpoint", "save_trainer", "load_trainer"]

_PREFIX = "checkpoint-"
_COMPLETE = "COMPLETE"


def save_checkpoint(out_dir: str | Path, iteration: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Write ``checkpoint-<iteration>.pt`` (tmp file + rename) and prune all but the ``keep`` newest."""
    folder = Path(out_dir) / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_PREFIX}{iteration:06d}.pt"
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    _prune(folder, keep)
    return path


def save_sharded(
    out_dir: str | Path,
    iteration: int,
    write: Callable[[Path], None],
    is_main: bool,
    barrier: Callable[[], None],
    keep: int = 2,
) -> Path:
    """Every rank calls this: ``write(folder)`` writes its part, rank 0 marks the folder complete and prunes."""
    folder = Path(out_dir) / "checkpoints"
    path = folder / f"{_PREFIX}{iteration:06d}"
    if is_main:
        (path / _COMPLETE).unlink(missing_ok=True)  # a rewrite of the same iteration is incomplete until marked
    barrier()
    path.mkdir(parents=True, exist_ok=True)
    write(path)
    barrier()
    if is_main:
        (path / _COMPLETE).touch()
        _prune(folder, keep)
    barrier()
    return path


def _iteration(path: Path) -> int:
    return int(path.name[len(_PREFIX) :].removesuffix(".pt"))


def _complete(folder: Path) -> list[Path]:
    """The folder's complete checkpoints (files, and sharded folders marked COMPLETE), oldest first."""
    found = [p for p in folder.glob(f"{_PREFIX}*") if p.suffix == ".pt" or (p / _COMPLETE).exists()]
    return sorted(found, key=_iteration)


def _prune(folder: Path, keep: int) -> None:
    """Delete all but the ``keep`` newest complete checkpoints, and unfinished folders older than those."""
    done = _complete(folder)
    for old in done[:-keep]:
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    if done:
        newest = _iteration(done[-1])
        for stale in folder.glob(f"{_PREFIX}*"):
            if stale.is_dir() and not (stale / _COMPLETE).exists() and _iteration(stale) < newest:
                shutil.rmtree(stale)


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The newest complete checkpoint in ``out_dir`` (a file, or a sharded folder), or None."""
    found = _complete(Path(out_dir) / "checkpoints")
    return found[-1] if found else None


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` (it holds only tensors and plain data)."""
    return torch.load(path, map_location="cpu", weights_only=False)


# ---------------------------------------------------------------------------- a Trainer's state
def _model_state(trainer: Any, module: torch.nn.Module) -> dict[str, Any]:
    """A trained model's tensors: all of them, or with LoRA only the ones that train."""
    return trainable_state(module) if trainer.lora else module.state_dict()


def _load_model_state(trainer: Any, module: torch.nn.Module, state: dict[str, Any]) -> None:
    if trainer.lora:
        load_trainable_state(module, state)
    else:
        module.load_state_dict(state)


def _trainer_state(trainer: Any) -> dict[str, Any]:
    """Everything a one-process checkpoint holds (DeepSpeed: :func:`_write_shards` writes a folder instead)."""
    critic = trainer.critic
    return {
        "iteration": trainer.iteration,
        "config": dataclasses.asdict(trainer.cfg),
        "policy": _model_state(trainer, trainer.policy.model),
        "optimizer": trainer.optimizer.state_dict(),
        "critic": None
        if critic is None
        else {"model": _model_state(trainer, critic.module), "optimizer": critic.optimizer.state_dict()},
        "reference": None if trainer.reference is None else trainer.reference.state_dict(),
        "rng": {
            "torch": torch.get_rng_state(),
            "shuffle": trainer.shuffle.get_state(),
            "python": random.getstate(),
            "numpy": np.random.get_state(),
        },
    }


def _trained(trainer: Any) -> dict[str, Any]:
    """The models the strategy trains, by checkpoint sub-folder."""
    return {"actor": trainer.actor, **({"critic": trainer.critic} if trainer.critic is not None else {})}


def _write_shards(trainer: Any, folder: Path) -> None:
    """DeepSpeed checkpoint: engine shards, rank 0's trainer state, each rank's sampling RNG."""
    for name, trainable in _trained(trainer).items():
        trainer.strategy.save(trainable, folder / name)
    torch.save({"torch": torch.get_rng_state()}, folder / f"rank{trainer.rank}.pt")
    if trainer.is_main:
        state = {k: v for k, v in _trainer_state(trainer).items() if k not in ("policy", "optimizer", "critic")}
        torch.save({**state, "world_size": trainer.world}, folder / "trainer.pt")


def save_trainer(trainer: Any) -> Path:
    """Checkpoint a :class:`~trainers.loop.Trainer` at its iteration (every rank calls this under DeepSpeed)."""
    if trainer.distributed:
        return save_sharded(
            trainer.out_dir,
            trainer.iteration,
            lambda folder: _write_shards(trainer, folder),
            trainer.is_main,
            trainer.strategy.barrier,
        )
    return save_checkpoint(trainer.out_dir, trainer.iteration, _trainer_state(trainer))


def load_trainer(trainer: Any, path: str | Path) -> None:
    """Restore a checkpoint of ``trainer``'s config (a file, or a DeepSpeed folder written by as many ranks)."""
    path = Path(path)
    state = load_checkpoint(path / "trainer.pt" if path.is_dir() else path)
    conflicts = trainer.cfg.resume_conflicts(state["config"])
    if conflicts:
        raise ValueError(f"cannot resume from {path}: the config differs in {conflicts}")
    if path.is_dir():
        if state["world_size"] != trainer.world:
            raise ValueError(
                f"cannot resume from {path}: written by {state['world_size']} processes, not {trainer.world}"
            )
        for name, trainable in _trained(trainer).items():
            trainer.strategy.load(trainable, path / name)
        state["rng"]["torch"] = load_checkpoint(path / f"rank{trainer.rank}.pt")["torch"]
    else:
        _load_model_state(trainer, trainer.policy.model, state["policy"])
        trainer.optimizer.load_state_dict(state["optimizer"])
        if state["critic"] is not None:
            _load_model_state(trainer, trainer.critic.module, state["critic"]["model"])
            trainer.critic.optimizer.load_state_dict(state["critic"]["optimizer"])
    if state["reference"] is not None:
        if trainer.reference is None:
            trainer.reference = trainer.frozen_copy()
        trainer.reference.load_state_dict(state["reference"])
    trainer.sync_generator()
    torch.set_rng_state(state["rng"]["torch"])
    trainer.shuffle.set_state(state["rng"]["shuffle"])
    random.setstate(state["rng"]["python"])
    np.random.set_state(state["rng"]["numpy"])
    trainer.iteration = int(state["iteration"])
