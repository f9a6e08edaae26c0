"""Training strategies: plain torch on one device, or DeepSpeed ZeRO-2/3 across processes, behind one interface.

Nothing else touches ``loss.backward()`` or ``optimizer.step()``: the actor and PPO's critic both
train through :func:`trainers.update.update`, which asks the strategy::

    strategy = make_strategy(StrategyConfig(backend="deepspeed", zero_stage=2, bf16=True))
    actor = strategy.prepare(model, lr=1e-6, weight_decay=0.0, name="actor")
    for mb in minibatches:                      # one optimizer step per minibatch
        strategy.zero_grad(actor)
        for micro in micro_batches(mb):
            with strategy.autocast(), strategy.train_forward(actor):
                loss, _ = method.actor_loss(micro, forward_positions(actor.module, micro, readout=...))
                strategy.backward(actor, loss * len(micro) / len(mb))   # raises TrainingDiverged on NaN/inf
        grad_norm = strategy.step(actor)        # clips; a non-finite norm raises before the weights move
    weights = strategy.full_state_dict(actor)   # gathered (ZeRO-3 too), for generators / HF export
    strategy.save(actor, dir); strategy.load(actor, dir)

DeepSpeed is driven directly (not through accelerate, which mis-reports ranks with two CPU
processes) and gets a *client* ``torch.optim.AdamW``, so no DeepSpeed C++ op has to be compiled.
On a machine without an accelerator it runs on CPU with the gloo backend (``DS_ACCELERATOR=cpu``).
Launch several processes with ``torchrun --nproc_per_node N`` or ``deepspeed --num_gpus N``.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn

__all__ = [
    "StrategyConfig",
    "Trainable",
    "TrainingDiverged",
    "TrainingStrategy",
    "TorchStrategy",
    "DeepSpeedStrategy",
    "make_strategy",
]


class TrainingDiverged(RuntimeError):
    """A loss or gradient norm became NaN/inf; the optimizer step it would have fed was not taken."""


@dataclass
class StrategyConfig:
    """How the actor (and the PPO critic) are trained."""

    backend: Literal["torch", "deepspeed"] = "torch"
    """``torch``: one process, plain ``AdamW``. ``deepspeed``: ZeRO data parallelism over the launched processes."""
    zero_stage: int = 2
    """DeepSpeed ZeRO stage (0-3): 2 shards gradients and optimizer states, 3 also the parameters."""
    bf16: bool = False
    """bfloat16 compute with float32 master weights (torch: autocast; DeepSpeed: its bf16 mode)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (HF ``gradient_checkpointing_enable``): less memory, ~30% more time."""
    grad_clip: float = 1.0
    """Clip the global gradient norm to this value (0 disables)."""
    cpu_shm_comm: bool = False
    """DeepSpeed on CPU only: build and use DeepSpeed's shared-memory all-reduce op (a one-off gcc build of 60-90 s)."""
    device: str = ""
    """Device for the torch backend (default: ``cuda`` when available, else ``cpu``); DeepSpeed picks its own."""


@dataclass
class Trainable:
    """A model prepared for training: call ``module`` for forward passes, hand the rest to the strategy."""

    module: nn.Module
    """The bare model (under ZeRO-3 its parameters are partitions; use it for no-grad passes only)."""
    optimizer: torch.optim.Optimizer
    engine: Any = None
    """The ``DeepSpeedEngine`` (DeepSpeed backend only)."""
    name: str = "model"
    """What the model is (``actor``, ``critic``): names it in :class:`TrainingDiverged` messages."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """A full forward pass for training, through the DeepSpeed engine when there is one. (Code that
        runs submodules itself wraps them in :meth:`TrainingStrategy.train_forward` instead.)"""
        return (self.engine or self.module)(*args, **kwargs)


class TrainingStrategy(ABC):
    """What the training loop needs from a backend."""

    cfg: StrategyConfig
    rank: int = 0
    world_size: int = 1
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @abstractmethod
    def prepare(self, model: nn.Module, lr: float, weight_decay: float = 0.0, name: str = "model") -> Trainable:
        """Move ``model`` to the device, switch on gradient checkpointing if asked, build the optimizer."""

    def zero_grad(self, trainable: Trainable) -> None:  # noqa: B027 (a hook: nothing to do by default)
        """Start a new accumulation (DeepSpeed's step already zeroes its gradients)."""

    def backward(self, trainable: Trainable, loss: Tensor) -> None:
        """Accumulate gradients of ``loss`` (scaled by the caller) until :meth:`step`.

        Every rank checks the mean of the ranks' losses first, so all stop together on a NaN/inf
        (:class:`TrainingDiverged`), before any gradient of it exists."""
        mean = self.all_reduce_mean(loss.detach())
        if not bool(torch.isfinite(mean).all()):
            raise TrainingDiverged(f"non-finite {trainable.name} loss ({float(mean)})")
        self._backward(trainable, loss)

    def step(self, trainable: Trainable) -> float:
        """Clip the gradients to ``grad_clip``, step the optimizer, zero the gradients; returns the global
        gradient norm (pre-clip).

        A non-finite norm raises :class:`TrainingDiverged` (the torch backend before the weights move;
        DeepSpeed, which clips inside its step, skips a step with overflowing gradients itself)."""
        norm = self._step(trainable)
        if not math.isfinite(norm):
            raise TrainingDiverged(f"non-finite {trainable.name} gradient norm ({norm})")
        return norm

    @abstractmethod
    def _backward(self, trainable: Trainable, loss: Tensor) -> None:
        """The backend's backward pass of ``loss``."""

    @abstractmethod
    def _step(self, trainable: Trainable) -> float:
        """The backend's clip + optimizer step; the pre-clip norm (the torch backend raises before stepping on NaN)."""

    @abstractmethod
    def full_state_dict(self, trainable: Trainable) -> dict[str, Tensor]:
        """The whole model's weights on CPU, on every rank (ZeRO-3 partitions are gathered)."""

    @abstractmethod
    def save(self, trainable: Trainable, directory: str | Path) -> None:
        """Model and optimizer state (every rank writes its own shard under DeepSpeed)."""

    @abstractmethod
    def load(self, trainable: Trainable, directory: str | Path) -> None:
        """Restore what :meth:`save` wrote."""

    def autocast(self) -> contextlib.AbstractContextManager:
        """Context for forward passes (bf16 autocast on the torch backend)."""
        return contextlib.nullcontext()

    def train_forward(self, trainable: Trainable) -> contextlib.AbstractContextManager:
        """Wrap each forward pass whose loss goes to :meth:`backward` (one per micro-batch)."""
        return contextlib.nullcontext()

    def all_reduce_mean(self, x: Tensor) -> Tensor:
        """Mean of ``x`` over ranks (identity in one process)."""
        return x

    def all_gather_object(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order (e.g. each rank's rollout)."""
        return [obj]

    def barrier(self) -> None:  # noqa: B027 (a hook: one process waits for no one)
        """Wait for every rank."""


def _enable_checkpointing(model: nn.Module) -> None:
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.20
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    elif hasattr(model, "gradient_checkpointing_enable"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    else:
        raise ValueError(f"{type(model).__name__} does not support gradient checkpointing")
    if getattr(model, "config", None) is not None:
        model.config.use_cache = False


def _trainable_params(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


class TorchStrategy(TrainingStrategy):
    """One process, one device, ``torch.optim.AdamW``; bf16 through autocast over float32 weights."""

    def __init__(self, cfg: StrategyConfig):
        self.cfg = cfg
        self.device = torch.device(cfg.device or ("cuda" if torch.cuda.is_available() else "cpu"))

    def prepare(self, model: nn.Module, lr: float, weight_decay: float = 0.0, name: str = "model") -> Trainable:
        model.to(self.device)
        if self.cfg.gradient_checkpointing:
            _enable_checkpointing(model)
        optimizer = torch.optim.AdamW(_trainable_params(model), lr=lr, weight_decay=weight_decay)
        return Trainable(model, optimizer, name=name)

    def autocast(self) -> contextlib.AbstractContextManager:
        if not self.cfg.bf16:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)

    def zero_grad(self, trainable: Trainable) -> None:
        trainable.optimizer.zero_grad(set_to_none=True)

    def _backward(self, trainable: Trainable, loss: Tensor) -> None:
        loss.backward()

    def _step(self, trainable: Trainable) -> float:
        params = [p for p in _trainable_params(trainable.module) if p.grad is not None]
        max_norm = self.cfg.grad_clip if self.cfg.grad_clip > 0 else float("inf")
        norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm)) if params else 0.0
        if math.isfinite(norm):
            trainable.optimizer.step()
        # Zeroed in place: the buffers stay allocated until the next zero_grad, so the iteration's
        # memory meter counts them (as it counts everything the step needed).
        trainable.optimizer.zero_grad(set_to_none=False)
        return norm

    def full_state_dict(self, trainable: Trainable) -> dict[str, Tensor]:
        """The weights on CPU; a LoRA model's merged into one plain HF model (:func:`trainers.lora.merged_state_dict`)."""
        from trainers.lora import is_lora, merged_state_dict

        if is_lora(trainable.module):
            return merged_state_dict(trainable.module)
        return {k: v.detach().cpu().clone() for k, v in trainable.module.state_dict().items()}

    def save(self, trainable: Trainable, directory: str | Path) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        torch.save(
            {"model": trainable.module.state_dict(), "optimizer": trainable.optimizer.state_dict()},
            Path(directory) / "strategy_state.pt",
        )

    def load(self, trainable: Trainable, directory: str | Path) -> None:
        state = torch.load(Path(directory) / "strategy_state.pt", map_location=self.device, weights_only=True)
        trainable.module.load_state_dict(state["model"])
        trainable.optimizer.load_state_dict(state["optimizer"])


class DeepSpeedStrategy(TrainingStrategy):
    """DeepSpeed ZeRO over every launched process (``torchrun`` / ``deepspeed`` set RANK and WORLD_SIZE)."""

    def __init__(self, cfg: StrategyConfig):
        if not 0 <= cfg.zero_stage <= 3:
            raise ValueError(f"zero_stage must be 0-3, got {cfg.zero_stage}")
        self.cfg = cfg
        os.environ.setdefault("DS_ACCELERATOR", "cuda" if torch.cuda.is_available() else "cpu")
        for key, default in (
            ("RANK", "0"),
            ("LOCAL_RANK", "0"),
            ("WORLD_SIZE", "1"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29517"),
        ):
            os.environ.setdefault(key, default)  # a plain `python script.py` is a world of one
        import deepspeed
        from deepspeed.accelerator import get_accelerator

        self._ds = deepspeed
        accelerator = get_accelerator()
        if accelerator.device_name() == "cpu" and not cfg.cpu_shm_comm:
            # DeepSpeed compiles a shared-memory all-reduce op (60-90 s of gcc) when its CPU backend
            # starts; plain gloo collectives are all a CPU run needs, so skip the build.
            # (importlib: `import deepspeed.comm.torch as m` would bind the torch package that deepspeed.comm imports)
            importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
        backend = "gloo" if accelerator.device_name() == "cpu" else accelerator.communication_backend_name()
        deepspeed.init_distributed(dist_backend=backend)
        self.rank = torch.distributed.get_rank()
        self.world_size = torch.distributed.get_world_size()
        local_rank = int(os.environ["LOCAL_RANK"])
        if accelerator.device_name() == "cpu":
            self.device = torch.device("cpu")
        else:
            accelerator.set_device(local_rank)
            self.device = torch.device(accelerator.device_name(local_rank))

    def ds_config(self) -> dict[str, Any]:
        """The DeepSpeed JSON config, built once from :class:`StrategyConfig` (DeepSpeed's API is a dict)."""
        zero: dict[str, Any] = {"stage": self.cfg.zero_stage, "contiguous_gradients": True, "overlap_comm": False}
        if self.cfg.zero_stage == 3:
            # keep every parameter partitioned (no persistence shortcut) so ZeRO-3 is exercised even on tiny models
            zero.update(stage3_param_persistence_threshold=0, stage3_gather_16bit_weights_on_model_save=True)
        return {
            "train_micro_batch_size_per_gpu": 1,  # unused: the loop feeds the engine itself
            "gradient_accumulation_steps": 1,
            # the caller owns accumulation: gradients add up over backward() calls until step()
            "managed_gradient_accumulation": False,
            "gradient_clipping": self.cfg.grad_clip,
            "zero_optimization": zero,
            "bf16": {"enabled": self.cfg.bf16},
            "zero_allow_untested_optimizer": True,
            "zero_force_ds_cpu_optimizer": False,
            "steps_per_print": 2**31 - 1,
            "wall_clock_breakdown": False,
        }

    def prepare(self, model: nn.Module, lr: float, weight_decay: float = 0.0, name: str = "model") -> Trainable:
        if self.cfg.gradient_checkpointing:
            _enable_checkpointing(model)
        optimizer = torch.optim.AdamW(_trainable_params(model), lr=lr, weight_decay=weight_decay)
        engine, ds_optimizer, _, _ = self._ds.initialize(
            model=model, optimizer=optimizer, config=self.ds_config(), dist_init_required=False
        )
        return Trainable(engine.module, ds_optimizer, engine, name=name)

    @contextlib.contextmanager
    def train_forward(self, trainable: Trainable) -> Iterator[None]:
        # What DeepSpeedEngine.forward does before running the module, for callers that run submodules
        # themselves (trainers.forward applies the LM head to a few positions only): ZeRO counts a new
        # micro-batch here, without which ZeRO-3 overwrites instead of accumulating micro-batch gradients.
        from deepspeed.runtime.base_optimizer import ZeROOptimizer

        if isinstance(trainable.engine.optimizer, ZeROOptimizer):
            trainable.engine.optimizer.clear_backward_seen_flag()
        yield

    def _backward(self, trainable: Trainable, loss: Tensor) -> None:
        # the loop already scales micro-batch losses, so DeepSpeed must not divide by its accumulation steps
        trainable.engine.backward(loss, scale_wrt_gas=False)

    def _step(self, trainable: Trainable) -> float:
        trainable.engine.step()
        norm = trainable.engine.get_global_grad_norm()
        return float(norm) if norm is not None else float("nan")

    @contextlib.contextmanager
    def gathered(self, trainable: Trainable) -> Iterator[nn.Module]:
        """The full parameters inside the block (ZeRO-3 all-gathers them; other stages already have them)."""
        if self.cfg.zero_stage == 3:
            with self._ds.zero.GatheredParameters(list(trainable.module.parameters()), modifier_rank=None):
                yield trainable.module
        else:
            yield trainable.module

    def full_state_dict(self, trainable: Trainable) -> dict[str, Tensor]:
        with self.gathered(trainable) as module:
            return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}

    def save(self, trainable: Trainable, directory: str | Path) -> None:
        trainable.engine.save_checkpoint(str(directory), tag="strategy")

    def load(self, trainable: Trainable, directory: str | Path) -> None:
        trainable.engine.load_checkpoint(str(directory), tag="strategy")

    def all_reduce_mean(self, x: Tensor) -> Tensor:
        y = x.detach().clone().to(self.device)
        torch.distributed.all_reduce(y)
        return y / self.world_size

    def all_gather_object(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        torch.distributed.barrier()


def make_strategy(cfg: StrategyConfig) -> TrainingStrategy:
    """The strategy named by ``cfg.backend`` (DeepSpeed is imported only when asked for)."""
    if cfg.backend == "torch":
        return TorchStrategy(cfg)
    if cfg.backend == "deepspeed":
        return DeepSpeedStrategy(cfg)
    raise ValueError(f"unknown training backend {cfg.backend!r}")
