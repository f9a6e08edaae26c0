"""Checkpoints: one file per save, written atomically; the newest good one is always on disk.

A checkpoint holds everything the next iteration depends on: the iteration number, the config,
the policy, its optimizer, the frozen reference, the method's own state (PPO's critic and its
optimizer) and every random state (torch's global generator, which sampling uses, and the
minibatch-shuffling generator). Resuming from it reproduces the next iteration exactly on CPU.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

__all__ = ["save_checkpoint", "latest_checkpoint", "load_checkpoint"]

_PREFIX = "checkpoint-"


def save_checkpoint(out_dir: str | Path, iteration: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Write ``checkpoint-<iteration>.pt`` (tmp file + rename) and prune all but the ``keep`` newest."""
    folder = Path(out_dir) / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_PREFIX}{iteration:06d}.pt"
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    for old in sorted(folder.glob(f"{_PREFIX}*.pt"))[:-keep]:
        old.unlink()
    return path


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The newest complete checkpoint in ``out_dir``, or None."""
    found = sorted((Path(out_dir) / "checkpoints").glob(f"{_PREFIX}*.pt"))
    return found[-1] if found else None


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` (it holds only tensors and plain data)."""
    return torch.load(path, map_location="cpu", weights_only=False)
