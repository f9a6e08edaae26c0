"""Per-phase wall-clock timings and peak training memory of one iteration.

Phases are the paper's eight (Fig. 2): generation, old log-prob, reward, reference, value,
advantage, critic update, actor update. On CUDA the peak is ``torch.cuda.max_memory_allocated``.
On CPU, where torch keeps no allocator statistics, :class:`MemoryMeter` accounts tensor memory
itself: the persistent training state (parameters, gradients and optimizer states of every model
the method holds) plus the peak bytes of activations saved for backward (counted with
``torch.autograd.graph.saved_tensors_hooks``, each storage once). That is cheap enough to run
every iteration but sees neither temporaries (optimizer and clipping buffers, logits that are not
saved) nor what gradient checkpointing keeps outside autograd's saved tensors, so it can both over-
and under-state the true peak. :class:`LiveTensorMeter` is the exact CPU counterpart of
``torch.cuda.max_memory_allocated``: every live tensor storage, op by op; it costs a Python
call per op, so the benchmark runs it in a separate, untimed pass.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["PHASES", "PhaseTimer", "MemoryMeter", "LiveTensorMeter", "state_bytes"]

PHASES = ("generation", "old_log_prob", "reward", "reference", "value", "advantage", "critic_update", "actor_update")


class PhaseTimer:
    """Accumulates seconds per phase; ``with timer("value"): ...``.

    On a CUDA ``device`` each phase starts and ends with ``torch.cuda.synchronize``: kernels run
    asynchronously, so without it a phase would be charged for its predecessor's queued work."""

    def __init__(self, device: torch.device | None = None) -> None:
        self.seconds: dict[str, float] = {p: 0.0 for p in PHASES}
        self._cuda = device if device is not None and device.type == "cuda" else None

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        if phase not in self.seconds:
            raise KeyError(f"unknown phase {phase!r}; valid choices: {list(PHASES)}")
        self._sync()
        start = time.perf_counter()
        try:
            yield
        finally:
            self._sync()
            self.seconds[phase] += time.perf_counter() - start

    def _sync(self) -> None:
        if self._cuda is not None:
            torch.cuda.synchronize(self._cuda)

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] += seconds

    def as_metrics(self) -> dict[str, float]:
        out = {f"time/{p}": s for p, s in self.seconds.items()}
        out["time/update"] = self.seconds["critic_update"] + self.seconds["actor_update"]
        out["time/iteration"] = sum(self.seconds.values())
        return out


def state_tensors(*objects: torch.nn.Module | torch.optim.Optimizer | None) -> list[torch.Tensor]:
    """The parameters, gradients and buffers of modules and the state tensors of optimizers."""
    out: list[Any] = []
    for obj in objects:
        if isinstance(obj, torch.nn.Module):
            out += [t for p in obj.parameters() for t in (p, p.grad)] + list(obj.buffers())
        elif isinstance(obj, torch.optim.Optimizer):
            out += [v for state in obj.state.values() for v in state.values()]
    return [t for t in out if isinstance(t, torch.Tensor)]


def state_bytes(*objects: torch.nn.Module | torch.optim.Optimizer | None) -> int:
    """Bytes of the parameters, gradients, buffers and optimizer states of modules / optimizers.

    Counted per storage (``nbytes``, so a bfloat16 model counts 2 bytes per element), each once.
    """
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in state_tensors(*objects)}
    return sum(storages.values())


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


class LiveTensorMeter(TorchDispatchMode):
    """Peak bytes of all live tensors inside ``with meter:``: the exact CPU ``max_memory_allocated``.

    The state of the given models and optimizers counts from the start; every storage an op
    creates (forward, backward, optimizer step, temporaries) counts from its creation until it is
    freed (a weakref finalizer on the storage), each storage once however many views share it.
    Unlike CUDA's caching allocator there is no rounding or fragmentation. Slow (one Python call
    per op): meant for a separate, untimed pass.
    """

    def __init__(self, *state: torch.nn.Module | torch.optim.Optimizer | None) -> None:
        super().__init__()
        self.current = 0
        """Bytes live now."""
        self.peak = 0
        """Largest ``current`` seen."""
        self._live: dict[int, int] = {}
        for t in state_tensors(*state):
            self._add(t)

    def _add(self, t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        key, size = id(storage), storage.nbytes()
        if key in self._live or size == 0:
            return
        self._live[key] = size
        self.current += size
        self.peak = max(self.peak, self.current)
        weakref.finalize(storage, self._free, key)

    def _free(self, key: int) -> None:
        self.current -= self._live.pop(key)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self._add(t)
        return out
