"""Per-phase wall-clock timings and peak training memory of one iteration.

Phases are the paper's eight (Fig. 2): generation, old log-prob, reward, reference, value,
advantage, critic update, actor update. On CUDA the peak is ``torch.cuda.max_memory_allocated``.
On CPU, where torch keeps no allocator statistics, :class:`MemoryMeter` accounts tensor memory
itself: the persistent training state (parameters, gradients and optimizer states of every model
the method holds) plus the peak bytes of activations saved for backward (counted with
``torch.autograd.graph.saved_tensors_hooks``, each storage once).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

import torch

__all__ = ["PHASES", "PhaseTimer", "MemoryMeter", "state_bytes"]

PHASES = ("generation", "old_log_prob", "reward", "reference", "value", "advantage", "critic_update", "actor_update")


class PhaseTimer:
    """Accumulates seconds per phase; ``with timer("value"): ...``."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {p: 0.0 for p in PHASES}

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        if phase not in self.seconds:
            raise KeyError(f"unknown phase {phase!r}; valid choices: {list(PHASES)}")
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] += time.perf_counter() - start

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] += seconds

    def as_metrics(self) -> dict[str, float]:
        out = {f"time/{p}": s for p, s in self.seconds.items()}
        out["time/update"] = self.seconds["critic_update"] + self.seconds["actor_update"]
        out["time/iteration"] = sum(self.seconds.values())
        return out


def state_bytes(*objects: torch.nn.Module | torch.optim.Optimizer | None) -> int:
    """Bytes of the parameters, gradients and optimizer states of modules / optimizers."""
    seen: set[int] = set()
    total = 0

    def add(t: torch.Tensor | None) -> None:
        nonlocal total
        if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in seen:
            seen.add(t.untyped_storage().data_ptr())
            total += t.untyped_storage().nbytes()

    for obj in objects:
        if isinstance(obj, torch.nn.Module):
            for p in obj.parameters():
                add(p)
                add(p.grad)
        elif isinstance(obj, torch.optim.Optimizer):
            for state in obj.state.values():
                for v in state.values():
                    add(v)
    return total


class MemoryMeter:
    """Peak training memory of one iteration (see the module docstring)."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.peak_activations = 0
        self._live: dict[int, int] = {}
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(device)
        self.device = device

    @contextmanager
    def track_activations(self) -> Iterator[None]:
        """Count the bytes saved for backward inside this block (one forward + backward)."""
        if self.cuda:
            yield
            return
        self._live = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            storage = t.untyped_storage()
            self._live.setdefault(storage.data_ptr(), storage.nbytes())
            self.peak_activations = max(self.peak_activations, sum(self._live.values()))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            yield
        self._live = {}

    def peak_bytes(self, *state: torch.nn.Module | torch.optim.Optimizer | None) -> int:
        """The iteration's peak: CUDA allocator peak, or persistent state + peak saved activations."""
        if self.cuda:
            return int(torch.cuda.max_memory_allocated(self.device))
        return state_bytes(*state) + self.peak_activations
