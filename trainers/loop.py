"""The one training loop shared by SAPO, PPO and GRPO (CleanRL-style: read it top to bottom).

Each iteration runs the paper's eight phases in order and times each of them:

1. **generation** + **reward**: play one episode on every env (:func:`trainers.rollout.collect`);
   sampling time is *generation*, env stepping (which computes the rewards) is *reward*;
2. **old log-prob**: recompute log π_old of the sampled tokens (SAPO reads V/Q logits here too);
   with ``old_log_probs='rollout'`` the HF sampler's own log-probs (and w⁺/w⁻ logits) are kept instead;
3. **reference**: log π_ref of the same tokens under the frozen reference (skipped when β = 0);
4. **value**: V_old (SAPO: readout; PPO: critic forward; GRPO: nothing);
5. **advantage**: turn GAE + normalization (SAPO, PPO) or group advantages (GRPO);
6. **critic update** (PPO only) and 7. **actor update** (every method).

The method object (:mod:`trainers.methods`) supplies only what differs between methods. Metrics go
to ``metrics.jsonl``; checkpoints to ``checkpoints/``; a non-finite loss stops the run with
:class:`TrainingDiverged` before any weight is touched, leaving the last good checkpoint in place.

``strategy='deepspeed'`` trains with DeepSpeed ZeRO over the processes ``torchrun`` launched
(:mod:`trainers.distributed`: each rank plays its share of the tasks, every rank learns from the same
global batch, micro-batches are dealt over the ranks); only rank 0 writes metrics and shows progress.
``generator='vllm'`` samples with a colocated vLLM engine that receives the weights after every update.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainers.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint, save_sharded
from trainers.config import TrainConfig
from trainers.core_algos import explained_variance
from trainers.distributed import (critic_update, deal, gather_rollout, gather_stats, map_micro_batches, mean_stats,
                                  rank_groups)
from trainers.experience import Experience
from trainers.hardware import resolve_dtype
from trainers.methods import make_method
from trainers.forward import action_log_probs, forward_positions
from trainers.methods.base import micro_batches, pad_to
from trainers.metrics import MetricsLogger
from trainers.models import build_agent, build_generator, build_policy, turn_samples
from trainers.profiling import MemoryMeter, PhaseTimer
from trainers.rollout import Rollout, collect, make_train_vec
from trainers.strategy import StrategyConfig, make_strategy

__all__ = ["Trainer", "TrainingDiverged"]


class TrainingDiverged(RuntimeError):
    """A loss or gradient became NaN/inf; the weights were not updated."""


def _torch_optimizer(optimizer: Any) -> Any:
    """The torch optimizer inside a DeepSpeed ZeRO optimizer (for memory accounting), else itself."""
    return getattr(optimizer, "optimizer", optimizer)


class Trainer:
    """Builds the policy, reference, method, optimizer and envs from a :class:`TrainConfig`; trains."""

    def __init__(self, cfg: TrainConfig, policy: Any | None = None):
        self.cfg = cfg
        self.distributed = cfg.strategy == "deepspeed"
        if self.distributed and cfg.sft_episodes > 0:
            raise ValueError("the warm start (--sft-episodes) trains outside the strategy: run it with --strategy torch, "
                             "then start the DeepSpeed run from the saved model (--model DIR)")
        self.strategy = make_strategy(StrategyConfig(
            backend=cfg.strategy, zero_stage=cfg.zero_stage, bf16=cfg.bf16, grad_clip=cfg.grad_clip,
            gradient_checkpointing=cfg.gradient_checkpointing, device=cfg.device))
        self.rank, self.world = self.strategy.rank, self.strategy.world_size
        self.device = self.strategy.device
        self.out_dir = Path(cfg.out_dir)
        torch.manual_seed(cfg.seed)
        random.seed(cfg.seed)
        self.policy = policy if policy is not None else build_policy(cfg)
        self.policy.model.to(self.device)
        self.policy.max_prompt_tokens = cfg.max_prompt_tokens  # the config's budget, also for a given policy
        self.method = make_method(cfg, self.policy)
        self.method.strategy = self.strategy
        self.reference: torch.nn.Module | None = None
        self.rollout_policy = self.policy
        """The weights rollouts sample from: the policy itself, or (ZeRO-3 partitions it) a full copy kept in sync."""
        if self.distributed:
            self._before_prepare()
        self.agent = build_agent(self.rollout_policy, cfg, cfg.temperature, build_generator(self.rollout_policy, cfg, self.rank),
                                 value_logits=self.method.readout and cfg.old_log_probs == "rollout")
        self.actor = self.strategy.prepare(self.policy.model, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.optimizer = self.actor.optimizer
        self.critic = None
        if self.distributed and self.method.critic is not None:  # PPO's critic trains through the strategy too
            self.critic = self.strategy.prepare(self.method.critic, lr=cfg.critic_lr, weight_decay=cfg.weight_decay)
            self.method.critic_optimizer = self.critic.optimizer
        self.shuffle = torch.Generator().manual_seed(cfg.seed)
        self.iteration = 0
        self.last_checkpoint: Path | None = None
        groups = rank_groups(cfg.num_tasks, self.rank, self.world) if self.world > 1 else None
        self.vec = make_train_vec(cfg.env, cfg.num_tasks, cfg.rollouts_per_task, cfg.seed, groups, **self.env_kwargs())
        if self.world > 1:
            torch.manual_seed(cfg.seed + 1_000_003 * (self.rank + 1))  # each rank samples its own random stream
        if cfg.resume and latest_checkpoint(self.out_dir) is not None:
            self.load(latest_checkpoint(self.out_dir))

    def _before_prepare(self) -> None:
        """DeepSpeed only: what needs the full weights before ZeRO takes them over (no warm start runs under it)."""
        if self.cfg.kl_coef > 0:
            self.reference = self._frozen_copy()
        if self.cfg.zero_stage == 3 and self.cfg.generator == "hf":
            self.rollout_policy = copy.deepcopy(self.policy)

    def _frozen_copy(self) -> torch.nn.Module:
        """A frozen copy of the current policy in ``cfg.reference_dtype``: the KL reference."""
        dtype = resolve_dtype(self.cfg.reference_dtype, self.cfg.device)
        return copy.deepcopy(self.policy.model).to(getattr(torch, dtype)).eval().requires_grad_(False)

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that writes metrics, shows progress and exports the model."""
        return self.rank == 0

    @property
    def pushes_weights(self) -> bool:
        """Whether the rollout sampler holds its own copy of the weights (vLLM, or the ZeRO-3 HF copy)."""
        return self.cfg.generator == "vllm" or self.rollout_policy is not self.policy

    def sync_generator(self) -> float:
        """Push the trained weights to the rollout sampler (every rank: ZeRO-3 gathers); seconds taken."""
        if not self.pushes_weights:
            return 0.0
        start = time.perf_counter()
        self.agent.generator.push_weights(self.strategy.full_state_dict(self.actor))
        return time.perf_counter() - start

    def env_kwargs(self) -> dict[str, Any]:
        """The env's prompt and history settings plus the ``--env-arg`` entries."""
        return self.cfg.env_make_kwargs()

    # ------------------------------------------------------------------ one iteration
    def start_reinforcement(self) -> None:
        """Freeze the current policy as the KL reference (after any warm start)."""
        if self.reference is None and self.cfg.kl_coef > 0:
            self.reference = self._frozen_copy()

    def step(self) -> dict[str, Any]:
        """One iteration: rollout → old log-probs → reference → values → advantages → updates."""
        self.start_reinforcement()
        timer, memory = PhaseTimer(self.device), MemoryMeter(self.device)
        rollout, exp = self.collect_batch(timer)
        stats = self.learn(exp, timer, memory)
        with timer("actor_update"):  # the new weights reach the sampler as part of the update
            push_s = self.sync_generator()
        peak = memory.peak_bytes(self.policy.model, _torch_optimizer(self.optimizer), self.reference,
                                 self.method.critic, _torch_optimizer(self.method.critic_optimizer))
        row = {"iteration": self.iteration, **self._rollout_metrics(rollout, exp), **stats,
               **timer.as_metrics(), "memory/peak_bytes": peak}
        if self.pushes_weights:
            row["time/weight_push"] = push_s
        self.iteration += 1
        return row

    def collect_batch(self, timer: PhaseTimer) -> tuple[Rollout, Experience]:
        """Phases *generation* and *reward*: one episode per env, as a padded batch of turns."""
        with torch.no_grad(), self.strategy.autocast():  # --bf16 samples in bf16 too, as verl's rollouts do
            rollout = collect(self.vec, self.agent.act_detailed, episode=self.iteration, seed=self.cfg.seed)
        rollout = gather_rollout(self.strategy, rollout)  # every rank: the whole iteration's turns
        timer.add("generation", rollout.generation_s)
        timer.add("reward", rollout.env_s)
        return rollout, Experience.collate(turn_samples(rollout), self.policy.pad_token_id).to(self.device)

    def learn(self, exp: Experience, timer: PhaseTimer, memory: MemoryMeter) -> dict[str, float]:
        """The six learning phases on one batch (the order every method follows)."""
        with timer("old_log_prob"), self.strategy.autocast():
            exp = self.method.old_forward(exp)
        with timer("reference"), self.strategy.autocast():
            exp.ref_log_probs = self._reference_log_probs(exp)
        with timer("value"), self.strategy.autocast():  # PPO's critic runs at the actor's precision
            exp = self.method.compute_values(exp)
        with timer("advantage"):
            exp = self.method.compute_advantages(exp)
        value_stats = {}  # how much of its targets' variance the frozen V_old explains (SAPO's readout, PPO's critic)
        if exp.old_values is not None and exp.value_targets is not None:
            value_stats["value/explained_var"] = float(explained_variance(exp.old_values, exp.value_targets))
        with timer("critic_update"), self.strategy.autocast():
            if self.critic is not None:
                critic_stats = critic_update(self.strategy, self.critic, exp, self.cfg, self.method.critic_loss,
                                             self.shuffle, memory)
            else:
                critic_stats = self.method.critic_update(exp, self.shuffle, memory)
        with timer("actor_update"):
            actor_stats = self._actor_update(exp, memory)
        return {**actor_stats, **critic_stats, **value_stats}

    @torch.no_grad()
    def _reference_log_probs(self, exp: Experience) -> torch.Tensor | None:
        if self.reference is None:
            return None
        width, reference = exp.input_ids.shape[1], self.reference

        def score(mb: Experience) -> torch.Tensor:
            lp = action_log_probs(forward_positions(reference, mb), mb, self.method.value_token_ids, self.cfg.temperature)
            return pad_to(lp, width)

        return torch.cat(map_micro_batches(self.strategy, exp, self.cfg.micro_batch_size, score))

    def _actor_update(self, exp: Experience, memory: MemoryMeter) -> dict[str, float]:
        """Each minibatch's micro-batches (this rank's share of them, :func:`~trainers.distributed.deal`),
        gradients accumulated with weight ``world · len(micro) / len(minibatch)``, then one step."""
        cfg, stats, strategy, world = self.cfg, [], self.strategy, self.world
        size = math.ceil(len(exp) / cfg.minibatches)
        self.policy.model.train()  # the models have no dropout; train mode lets gradient checkpointing engage
        try:
            for epoch in range(cfg.ppo_epochs):
                for m, mb in enumerate(exp.minibatches(size, generator=self.shuffle)):
                    if not self.distributed:
                        self.optimizer.zero_grad(set_to_none=True)  # (DeepSpeed's step zeroes them)
                    for j, micro, real in deal(list(micro_batches(mb, cfg.micro_batch_size)), self.rank, world):
                        with memory.track_activations(), strategy.autocast(), strategy.train_forward(self.actor):
                            logits = forward_positions(self.actor.module, micro, readout=self.method.readout)
                            loss, s = self.method.actor_loss(micro, logits)
                            self._check_finite("actor loss", strategy.all_reduce_mean(loss.detach()))  # every rank stops
                            strategy.backward(self.actor, loss * (len(micro) * world if real else 0) / len(mb))
                        if real:
                            stats.append(((epoch, m, j), {k: float(v) for k, v in s.items()}))
                    grad_norm = self._optimizer_step()
                    if self.is_main:  # the global norm, the same on every rank
                        stats.append(((epoch, m, math.inf), {"grad_norm": grad_norm}))
        finally:
            self.policy.model.eval()
        return {f"actor/{k}": v for k, v in mean_stats(gather_stats(strategy, stats)).items()}

    def _optimizer_step(self) -> float:
        """Clip, check the gradient norm is finite (else stop before touching the weights), step.

        Under DeepSpeed the engine clips inside its step, so the norm is checked after it (a NaN loss
        is still caught before any backward)."""
        if self.distributed:
            grad_norm = torch.tensor(self.strategy.step(self.actor))
            self._check_finite("actor gradient norm", grad_norm)
            return float(grad_norm)
        grad_norm = self._clip(self.policy.model.parameters(), self.cfg.grad_clip)
        self._check_finite("actor gradient norm", grad_norm)
        self.optimizer.step()
        return float(grad_norm)

    @staticmethod
    def _clip(params: Any, max_norm: float) -> torch.Tensor:
        params = [p for p in params if p.grad is not None]
        if max_norm > 0:
            return torch.nn.utils.clip_grad_norm_(params, max_norm)
        return torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params]))

    def _check_finite(self, what: str, value: torch.Tensor) -> None:
        if not bool(torch.isfinite(value).all()):
            where = self.last_checkpoint or "none saved yet"
            raise TrainingDiverged(
                f"non-finite {what} ({float(value.detach())}) at iteration {self.iteration} of {self.cfg.algo}; "
                f"weights not updated; last good checkpoint: {where}"
            )

    def _rollout_metrics(self, rollout: Rollout, exp: Experience) -> dict[str, float]:
        eps = rollout.episodes
        outputs = [t.output for t in rollout.turns]
        constrained = {"rollout/constraint_fallbacks": sum(bool(getattr(o, "constraint_fallback", False)) for o in outputs)}
        return {**(constrained if self.cfg.constrain != "none" else {}),
            "rollout/success": float(np.mean([e.won for e in eps])),
            "rollout/score": float(np.mean([e.score for e in eps])),
            "rollout/return": float(np.mean([e.episode_return for e in eps])),
            "rollout/episode_length": float(np.mean([e.length for e in eps])),
            "rollout/truncated_episodes": float(np.mean([e.truncated for e in eps])),
            "rollout/invalid_rate": float(exp.invalid.float().mean()),
            "rollout/turns": len(exp),
            "rollout/response_tokens": float(exp.response_lengths.float().mean()),
            "rollout/empty_responses": int((exp.response_lengths == 0).sum()),
            "rollout/response_truncated": sum(bool(getattr(o, "truncated", False)) for o in outputs),
            "rollout/prompt_truncated": sum(bool(getattr(o, "prompt_truncated", False)) for o in outputs),
        }

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything a one-process checkpoint holds (DeepSpeed: :meth:`save` writes a sharded folder instead)."""
        return {
            "iteration": self.iteration,
            "config": dataclasses.asdict(self.cfg),
            "policy": self.policy.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "reference": None if self.reference is None else self.reference.state_dict(),
            "method": self.method.state_dict(),
            "rng": {"torch": torch.get_rng_state(), "shuffle": self.shuffle.get_state(),
                    "python": random.getstate(), "numpy": np.random.get_state()},
        }

    def save(self) -> Path:
        """Write a checkpoint (every rank calls this under DeepSpeed)."""
        if self.distributed:
            self.last_checkpoint = save_sharded(self.out_dir, self.iteration, self._write_shards, self.is_main,
                                                self.strategy.barrier)
        else:
            self.last_checkpoint = save_checkpoint(self.out_dir, self.iteration, self.state_dict())
        return self.last_checkpoint

    def _trained(self) -> dict[str, Any]:
        """The models the strategy trains, by checkpoint sub-folder."""
        return {"actor": self.actor, **({"critic": self.critic} if self.critic is not None else {})}

    def _write_shards(self, folder: Path) -> None:
        """DeepSpeed checkpoint: engine shards, rank 0's trainer state, each rank's sampling RNG."""
        for name, trainable in self._trained().items():
            self.strategy.save(trainable, folder / name)
        torch.save({"torch": torch.get_rng_state()}, folder / f"rank{self.rank}.pt")
        if self.is_main:
            state = {k: v for k, v in self.state_dict().items() if k not in ("policy", "optimizer", "method")}
            torch.save({**state, "world_size": self.world}, folder / "trainer.pt")

    def load(self, path: str | Path) -> None:
        """Restore a checkpoint of this config (a file, or a DeepSpeed folder written by as many ranks)."""
        path = Path(path)
        state = load_checkpoint(path / "trainer.pt" if path.is_dir() else path)
        free = ("resume", "iterations", "progress", "device", "checkpoint_every", "tensorboard",
                "generator", "vllm_gpu_memory_utilization")  # may change on resume
        saved = {k: v for k, v in state["config"].items() if k not in free}
        mine = {k: v for k, v in dataclasses.asdict(self.cfg).items() if k in saved}
        if saved != mine:
            diff = sorted(k for k in saved if saved[k] != mine.get(k))
            raise ValueError(f"cannot resume from {path}: the config differs in {diff}")
        if path.is_dir():
            if state["world_size"] != self.world:
                raise ValueError(f"cannot resume from {path}: written by {state['world_size']} processes, not {self.world}")
            for name, trainable in self._trained().items():
                self.strategy.load(trainable, path / name)
            state["rng"]["torch"] = load_checkpoint(path / f"rank{self.rank}.pt")["torch"]
        else:
            self.policy.model.load_state_dict(state["policy"])
            self.optimizer.load_state_dict(state["optimizer"])
        if state["reference"] is not None:
            if self.reference is None:
                self.reference = self._frozen_copy()
            self.reference.load_state_dict(state["reference"])
        if not path.is_dir():
            self.method.load_state_dict(state["method"])
        self.sync_generator()
        torch.set_rng_state(state["rng"]["torch"])
        self.shuffle.set_state(state["rng"]["shuffle"])
        random.setstate(state["rng"]["python"])
        np.random.set_state(state["rng"]["numpy"])
        self.iteration, self.last_checkpoint = int(state["iteration"]), Path(path)

    # ------------------------------------------------------------------ the run
    def train(self, after_step: Callable[[Trainer], dict[str, float]] | None = None) -> list[dict[str, Any]]:
        """Warm start (once, when configured), then iterate to ``cfg.iterations`` with checkpoints.

        ``after_step(trainer)``: called after each iteration's update, before its row is logged and its
        checkpoint saved; the metrics it returns join the row (compare's periodic held-out evaluation).
        """
        from tqdm import tqdm

        cfg = self.cfg
        if self.iteration == 0 and self.last_checkpoint is None and cfg.sft_episodes > 0:
            from trainers.sft import warm_start

            warm_start(self.policy, cfg, self.env_kwargs())
            self.start_reinforcement()
            self.save()
        logger = MetricsLogger(self.out_dir, self.iteration, cfg.tensorboard) if self.is_main else None
        rows: list[dict[str, Any]] = []
        bar = tqdm(total=cfg.iterations, initial=self.iteration, desc=f"train {cfg.algo}",
                   disable=not (cfg.progress and self.is_main))
        try:
            while self.iteration < cfg.iterations:
                row = self.step()
                if after_step is not None:
                    row.update(after_step(self))
                if logger is not None:
                    logger.log(row)
                rows.append(row)
                if self.iteration == cfg.iterations or (cfg.checkpoint_every and self.iteration % cfg.checkpoint_every == 0):
                    self.save()
                bar.update(1)
                bar.set_postfix(success=f"{row['rollout/success']:.2f}", loss=f"{row['actor/loss']:.3f}")
        finally:
            bar.close()
            if logger is not None:
                logger.close()
        return rows

    def export(self, path: str | Path) -> None:
        """The trained policy in HF format at ``path`` (every rank calls this; rank 0 writes)."""
        if not self.distributed:
            self.policy.save_pretrained(path)
            return
        weights = self.strategy.full_state_dict(self.actor)  # ZeRO-3 gathers: a collective
        if self.is_main:
            self.policy.model.save_pretrained(str(path), state_dict=weights)
            self.policy.tokenizer.save_pretrained(str(path))
        self.strategy.barrier()

    def evaluate(self, split: str = "test", seeds: tuple[int, ...] = (0,), temperature: float | None = None) -> dict[str, Any]:
        """Success on every task of ``split`` at the evaluation temperature (``sapo_gym.evaluation``)."""
        from sapo_gym.evaluation import summarize

        return summarize(self.evaluation_records(split, seeds, temperature))

    def evaluation_records(self, split: str = "test", seeds: tuple[int, ...] = (0,), temperature: float | None = None,
                           batch_size: int = 16) -> list[Any]:
        """One :class:`~sapo_gym.evaluation.EpisodeRecord` per (seed, task) of ``split``."""
        from sapo_gym.evaluation import evaluate

        temp = self.cfg.eval_temperature if temperature is None else temperature
        agent = build_agent(self.rollout_policy, self.cfg, temp, self.agent.generator)
        return evaluate(agent, self.cfg.env, split=split, seeds=seeds, batch_size=batch_size,
                        env_kwargs=self.env_kwargs(), progress=self.cfg.progress)

    def close(self) -> None:
        """Close the training envs."""
        self.vec.close()
