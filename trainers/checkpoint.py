"""Checkpoints: one file per save, written atomically; the newest good one is always on disk.

A checkpoint holds everything the next iteration depends on: the iteration number, the config,
the policy, its optimizer, the frozen reference, the method's own state (PPO's critic and its
optimizer) and every random state (torch's global generator, which sampling uses, and the
minibatch-shuffling generator). Resuming from it reproduces the next iteration exactly on CPU.

Under DeepSpeed a checkpoint is a folder, ``checkpoint-<iteration>/`` (:func:`save_sharded`): each
trained model's engine checkpoint (every rank writes its ZeRO shard), ``trainer.pt`` (rank 0: the
config, the reference, the shared random states) and ``rank<r>.pt`` (each rank's sampling RNG). It
counts only once rank 0 has marked it ``COMPLETE`` after every rank finished writing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable

import torch

__all__ = ["save_checkpoint", "save_sharded", "latest_checkpoint", "load_checkpoint"]

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


def save_sharded(out_dir: str | Path, iteration: int, write: Callable[[Path], None], is_main: bool,
                 barrier: Callable[[], None], keep: int = 2) -> Path:
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
    return int(path.name[len(_PREFIX):].removesuffix(".pt"))


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
