"""The one training loop every method shares (CleanRL-style: read it top to bottom).

Each iteration (:meth:`Trainer.run_iteration`) runs the paper's eight phases in order and times each:

1. **generation** + **reward**: play one episode on every env (:func:`trainers.rollout.collect`);
   sampling time is *generation*, env stepping (which computes the rewards) is *reward*;
2. **old log-prob**: recompute log π_old of the sampled tokens (SAPO reads V_old/Q_old here too);
   with ``old_log_probs='rollout'`` the sampler's own log-probs (and w⁺/w⁻ logits) are kept instead;
3. **reference**: log π_ref of the same tokens under the frozen reference (skipped when β = 0);
4. **value**: V_old from PPO's critic (SAPO already has it; the group methods have none);
5. **advantage**: turn GAE + normalization (SAPO, PPO) or group advantages (GRPO, GiGPO, RLOO);
6. **critic update** (PPO only) and 7. **actor update** (every method): both through
   :func:`trainers.update.update` on the same strategy, which clips, checks finiteness and steps.

The method object (:mod:`trainers.methods`, picked from its registry by ``cfg.algo``) supplies only what differs
between methods. Metrics go
to ``metrics.jsonl``; checkpoints (:mod:`trainers.checkpoint`) to ``checkpoints/``; a non-finite
loss or gradient norm stops the run with :class:`TrainingDiverged` before the optimizer step it
would feed, leaving the last good checkpoint in place. Evaluation and export live in
:mod:`trainers.policy_evaluation` and :mod:`trainers.hf_export`.

``strategy='deepspeed'`` trains with DeepSpeed ZeRO over the processes ``torchrun`` launched
(:mod:`trainers.distributed`: each rank plays its share of the tasks, every rank learns from the same
global batch, micro-batches are dealt over the ranks); only rank 0 writes metrics and shows progress.
``generator='vllm'`` samples with a colocated vLLM engine that receives the weights after every update.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import random
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trainers.agent_boundary import build_agent, build_generator, build_policy
from trainers.checkpoint import latest_checkpoint, load_trainer, save_trainer
from trainers.config import TrainConfig
from trainers.core_algos import discounted_returns, equal_return_groups, explained_variance
from trainers.distributed import gather_rollout, map_micro_batches, rank_groups
from trainers.experience import Experience
from trainers.forward import action_log_probs, forward_positions
from trainers.hardware import resolve_dtype
from trainers.lora import adapters_disabled, apply_lora
from trainers.methods import make_method
from trainers.methods.base import pad_to
from trainers.metrics import MetricsLogger, rollout_metrics
from trainers.profiling import MemoryMeter, PhaseTimer
from trainers.rollout import Rollout, collect, make_train_vec
from trainers.strategy import StrategyConfig, Trainable, TrainingDiverged, make_strategy
from trainers.update import update

__all__ = ["Trainer", "TrainingDiverged"]


def _torch_optimizer(optimizer: Any) -> Any:
    """The torch optimizer inside a DeepSpeed ZeRO optimizer (for memory accounting), else itself."""
    return getattr(optimizer, "optimizer", optimizer)


def _strategy_config(cfg: TrainConfig) -> StrategyConfig:
    """The training strategy's settings in ``cfg``: backend, ZeRO stage, precision, clipping, checkpointing, device."""
    return StrategyConfig(
        backend=cfg.strategy,
        zero_stage=cfg.zero_stage,
        bf16=cfg.bf16,
        grad_clip=cfg.grad_clip,
        gradient_checkpointing=cfg.gradient_checkpointing,
        device=cfg.device,
    )


def _rank_train_vec(cfg: TrainConfig, rank: int, world: int) -> Any:
    """The training envs of rank ``rank`` of ``world``: all of ``cfg``'s task groups, or this rank's share of them."""
    groups = rank_groups(cfg.num_tasks, rank, world) if world > 1 else None
    return make_train_vec(
        cfg.env,
        cfg.num_tasks,
        cfg.rollouts_per_task,
        cfg.seed,
        groups,
        env_workers=cfg.env_workers,
        ray_address=cfg.ray_address,
        **cfg.gym_make_kwargs(),
    )


class Trainer:
    """Builds the policy, reference, method, optimizers and envs from a :class:`TrainConfig`; trains."""

    def __init__(self, cfg: TrainConfig, policy: Any | None = None):
        self.cfg = cfg
        self.distributed = cfg.strategy == "deepspeed"
        if self.distributed and (cfg.sft_episodes > 0 or cfg.readout_warmup_episodes > 0):
            raise ValueError(
                "the warm starts (--sft-episodes, --readout-warmup-episodes) train outside the strategy: run "
                "them with --strategy torch, then start the DeepSpeed run from the saved model (--model DIR)"
            )
        self.strategy = make_strategy(_strategy_config(cfg))
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
        """The frozen KL reference copy (None with LoRA: the policy with its adapters disabled is the reference)."""
        self.rollout_policy = self.policy
        """The weights rollouts sample from: the policy itself, or (ZeRO-3 partitions it) a full copy kept in sync."""
        if self.distributed:
            self._before_prepare()
        self.agent = build_agent(
            self.rollout_policy,
            cfg,
            cfg.temperature,
            build_generator(self.rollout_policy, cfg, self.rank),
            value_logits=self.method.readout and cfg.old_log_probs == "rollout",
        )
        # LoRA comes last: the sampler was built on the plain model (vLLM serves a saved copy of it, and
        # receives merged weights from then on); the HF sampler reads policy.model, adapters included.
        self.lora = apply_lora(self.policy, cfg, self.method.critic)
        """Whether the policy (and PPO's critic backbone) train LoRA adapters (``cfg.lora_rank`` > 0)."""
        self.actor = self.strategy.prepare(self.policy.model, lr=cfg.lr, weight_decay=cfg.weight_decay, name="actor")
        self.optimizer = self.actor.optimizer
        self.critic: Trainable | None = None
        """PPO's critic, trained through the same strategy as the actor."""
        if self.method.critic is not None:
            self.critic = self.strategy.prepare(
                self.method.critic, lr=cfg.critic_lr, weight_decay=cfg.weight_decay, name="critic"
            )
        self.shuffle = torch.Generator().manual_seed(cfg.seed)
        self.iteration = 0
        self.last_checkpoint: Path | None = None
        self.vec = _rank_train_vec(cfg, self.rank, self.world)
        if self.world > 1:
            torch.manual_seed(cfg.seed + 1_000_003 * (self.rank + 1))  # each rank samples its own random stream
        if cfg.resume and latest_checkpoint(self.out_dir) is not None:
            self.load(latest_checkpoint(self.out_dir))

    def _before_prepare(self) -> None:
        """DeepSpeed only: what needs the full weights before ZeRO takes them over (no warm start runs under it)."""
        if self.cfg.kl_coef > 0:
            self.reference = self.frozen_copy()
        if self.cfg.zero_stage == 3 and self.cfg.generator == "hf":
            self.rollout_policy = copy.deepcopy(self.policy)

    def frozen_copy(self) -> torch.nn.Module:
        """A frozen copy of the current policy in ``cfg.reference_dtype``: the KL reference."""
        dtype = resolve_dtype(self.cfg.reference_dtype, self.cfg.device)
        return copy.deepcopy(self.policy.model).to(getattr(torch, dtype)).eval().requires_grad_(False)

    @property
    def fits_readout(self) -> bool:
        """Whether :meth:`train` warm-starts SAPO's readout first (``cfg.readout_warmup_episodes``; SAPO only)."""
        if self.cfg.readout_warmup_episodes > 0 and not self.method.readout:
            warnings.warn(
                f"--readout-warmup-episodes fits SAPO's readout; {self.cfg.algo} has none, so it is skipped",
                stacklevel=2,
            )
        return self.cfg.readout_warmup_episodes > 0 and self.method.readout

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

    # ------------------------------------------------------------------ one iteration
    def start_reinforcement(self) -> None:
        """Freeze the current policy as the KL reference (after any warm start)."""
        if self.reference is None and self.cfg.kl_coef > 0 and not self.lora:
            self.reference = self.frozen_copy()

    def run_iteration(self) -> dict[str, Any]:
        """One iteration: rollout → old log-probs → reference → values → advantages → updates; its metrics row."""
        self.start_reinforcement()
        timer, memory = PhaseTimer(self.device), MemoryMeter(self.device)
        rollout, exp = self.collect_batch(timer)
        if exp is None:  # every episode was lost with its env worker: nothing to learn from, the weights stay
            self.iteration += 1
            return {
                "iteration": self.iteration - 1,
                "rollout/dropped_episodes": len(rollout.dropped),
                "rollout/skipped_update": 1,
                **timer.as_metrics(),
            }
        stats = self.learn(exp, timer, memory)
        with timer("actor_update"):  # the new weights reach the sampler as part of the update
            push_s = self.sync_generator()
        critic = self.critic
        peak = memory.peak_bytes(
            self.policy.model,
            _torch_optimizer(self.optimizer),
            self.reference,
            critic and critic.module,
            critic and _torch_optimizer(critic.optimizer),
        )
        row = {
            "iteration": self.iteration,
            **rollout_metrics(rollout, exp, self.cfg.constrain != "none"),
            **stats,
            **timer.as_metrics(),
            "memory/peak_bytes": peak,
        }
        if self.pushes_weights:
            row["time/weight_push"] = push_s
        if rollout.dropped:  # episodes lost with their env worker (--env-workers ray): not in the batch
            row["rollout/dropped_episodes"] = len(rollout.dropped)
        self.iteration += 1
        return row

    def collect_batch(self, timer: PhaseTimer) -> tuple[Rollout, Experience | None]:
        """Phases *generation* and *reward*: one episode per env, as a padded batch of turns (None: no turn left)."""
        self.agent.reset(self.vec.num_envs)  # each iteration's episodes are a batch of their own (the sampler's drafts)
        with torch.no_grad(), self.strategy.autocast():  # --bf16 samples in bf16 too, as verl's rollouts do
            rollout = collect(
                self.vec,
                self.agent.act_detailed,
                episode=self.iteration,
                seed=self.cfg.seed,
                score_reward=self.cfg.r_max if self.cfg.train_reward == "score" else None,
            )
        rollout = gather_rollout(self.strategy, rollout)  # every rank: the whole iteration's turns
        timer.add("generation", rollout.generation_s)
        timer.add("reward", rollout.env_s)
        if not rollout.turns:
            return rollout, None
        exp = Experience.collate(rollout.turns, self.policy.pad_token_id).to(self.device)
        # rows carry their trajectory ids, so their order is free: longest first, the inference passes' micro-batches
        # (old log-probs, reference, PPO's values) pad alike too
        return rollout, exp.longest_first() if self.cfg.group_by_length else exp

    def learn(self, exp: Experience, timer: PhaseTimer, memory: MemoryMeter) -> dict[str, float]:
        """The six learning phases on one batch (the order every method follows)."""
        method, strategy = self.method, self.strategy
        with timer("old_log_prob"), strategy.autocast():
            exp = method.old_forward(exp)
        with timer("reference"), strategy.autocast():
            exp.ref_log_probs = self.reference_log_probs(exp)
        with timer("value"), strategy.autocast():  # PPO's critic runs at the actor's precision
            exp = method.compute_values(exp)
        with timer("advantage"):
            exp = method.compute_advantages(exp)
        stats = self.machinery_stats(exp)
        try:
            with timer("critic_update"), strategy.autocast():
                if self.critic is not None:
                    stats.update(
                        {
                            f"critic/{k}": v
                            for k, v in self._update(self.critic, exp, method.critic_loss, memory).items()
                        }
                    )
            warming = self.iteration < self.cfg.critic_warmup  # the value function alone (TrainConfig.critic_warmup)
            with timer("actor_update"):
                if not warming or method.readout:  # SAPO's V and Q are the actor's own: its update keeps them
                    actor_loss = functools.partial(self._actor_loss, policy=not warming)
                    stats.update(
                        {f"actor/{k}": v for k, v in self._update(self.actor, exp, actor_loss, memory).items()}
                    )
        except TrainingDiverged as err:
            where = self.last_checkpoint or "none saved yet"
            raise TrainingDiverged(
                f"{err} at iteration {self.iteration} of {self.cfg.algo}; weights not updated; "
                f"last good checkpoint: {where}"
            ) from None
        return stats

    def machinery_stats(self, exp: Experience) -> dict[str, float]:
        """What the method's machinery did with this batch: the share of turns whose advantage is not exactly 0; how
        much variance the frozen V_old explains (SAPO's readout, PPO's critic) of its GAE targets (``explained_var``,
        CleanRL's: the λ-returns hold V_old's own bootstrap, about (1 − λ)γ/(1 − γλ) ≈ 0.83 of a discounted mean of
        the later V_old) and of the Monte-Carlo returns (``explained_var_mc``: the discounted rewards alone); and
        for the group methods the share of task groups whose returns are all equal (no signal)."""
        assert exp.advantages is not None
        stats = {"advantage/nonzero_turns": float((exp.advantages != 0).float().mean())}
        if exp.old_values is not None and exp.value_targets is not None:
            stats["value/explained_var"] = float(explained_variance(exp.old_values, exp.value_targets))
            returns = discounted_returns(exp.rewards, exp.traj_ids, exp.turn_idx, self.cfg.gamma)
            stats["value/explained_var_mc"] = float(explained_variance(exp.old_values, returns))
        if self.cfg.rollouts_per_task > 1:
            stats["advantage/equal_return_groups"] = float(
                equal_return_groups(exp.rewards, exp.traj_ids, exp.group_ids)
            )
        return stats

    def _actor_loss(self, micro: Experience, policy: bool = True) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        logits = forward_positions(self.actor.module, micro, readout=self.method.readout)
        return self.method.actor_loss(micro, logits, policy)

    def _update(self, trainable: Trainable, exp: Experience, loss: Any, memory: MemoryMeter) -> dict[str, float]:
        """One model's update phase, in train mode (the models have no dropout; it lets gradient checkpointing engage)."""
        cfg = self.cfg
        trainable.module.train()
        try:
            return update(
                self.strategy,
                trainable,
                exp,
                loss,
                epochs=cfg.ppo_epochs,
                minibatches=cfg.minibatches,
                micro_batch_size=cfg.micro_batch_size,
                shuffle=self.shuffle,
                memory=memory,
                by_length=cfg.group_by_length,
            )
        finally:
            trainable.module.eval()

    @torch.no_grad()
    def reference_log_probs(self, exp: Experience) -> torch.Tensor | None:
        """``(B, T)`` log π_ref of the sampled tokens under the frozen reference (None without one).

        With LoRA the reference is the policy's own module with its adapters disabled (the frozen base)."""
        base = self.lora and self.cfg.kl_coef > 0
        if self.reference is None and not base:
            return None
        with adapters_disabled(self.policy.model) if base else contextlib.nullcontext(self.reference) as reference:
            return self.log_probs_under(reference, exp)

    @torch.no_grad()
    def log_probs_under(self, model: torch.nn.Module, exp: Experience) -> torch.Tensor:
        """``(B, T)`` log-probs of the batch's sampled tokens under ``model``, in micro-batches (0 off the actions)."""
        width = exp.input_ids.shape[1]

        def score(mb: Experience) -> torch.Tensor:
            lp = action_log_probs(forward_positions(model, mb), mb, self.method.value_token_ids, self.cfg.temperature)
            return pad_to(lp, width)

        return torch.cat(map_micro_batches(self.strategy, exp, self.cfg.micro_batch_size, score))

    # ------------------------------------------------------------------ checkpoints
    def save(self) -> Path:
        """Write a checkpoint (every rank calls this under DeepSpeed); see :mod:`trainers.checkpoint`."""
        self.last_checkpoint = save_trainer(self)
        return self.last_checkpoint

    def load(self, path: str | Path) -> None:
        """Restore a checkpoint of this config (a file, or a DeepSpeed folder written by as many ranks)."""
        load_trainer(self, path)
        self.last_checkpoint = Path(path)

    # ------------------------------------------------------------------ the run
    def train(self, after_iteration: Callable[[Trainer], dict[str, float]] | None = None) -> list[dict[str, Any]]:
        """Warm start (once, when configured), then iterate to ``cfg.iterations`` with checkpoints.

        ``after_iteration(trainer)``: called after each iteration's update, before its row is logged and
        its checkpoint saved; the metrics it returns join the row (compare's periodic held-out evaluation).
        """
        from tqdm import tqdm

        cfg = self.cfg
        fresh = self.iteration == 0 and self.last_checkpoint is None
        fit_readout = fresh and self.fits_readout
        if fresh and (cfg.sft_episodes > 0 or fit_readout):
            if cfg.sft_episodes > 0:
                from trainers.sft import warm_start

                warm_start(self.policy, cfg, cfg.gym_make_kwargs())
                if self.method.critic is not None:  # PPO's critic starts from the cloned backbone, as in compare
                    self.method.critic.copy_backbone_from(self.policy)
            if fit_readout:
                from trainers.readout_warmup import readout_warm_start

                readout_warm_start(self)
            self.start_reinforcement()
            self.save()
        logger = MetricsLogger(self.out_dir, self.iteration, cfg.tensorboard) if self.is_main else None
        rows: list[dict[str, Any]] = []
        bar = tqdm(
            total=cfg.iterations,
            initial=self.iteration,
            desc=f"train {cfg.algo}",
            disable=not (cfg.progress and self.is_main),
        )
        try:
            while self.iteration < cfg.iterations:
                row = self.run_iteration()
                if after_iteration is not None:
                    row.update(after_iteration(self))
                if logger is not None:
                    logger.log(row)
                rows.append(row)
                if self.iteration == cfg.iterations or (
                    cfg.checkpoint_every and self.iteration % cfg.checkpoint_every == 0
                ):
                    self.save()
                bar.update(1)
                # a row may lack either: a critic warm-up has no actor update, a lost batch neither
                bar.set_postfix(
                    {
                        name: f"{row[key]:.{digits}f}"
                        for name, key, digits in (("success", "rollout/success", 2), ("loss", "actor/loss", 3))
                        if key in row
                    }
                )
        finally:
            bar.close()
            if logger is not None:
                logger.close()
        return rows

    def close(self) -> None:
        """Close the training envs."""
        self.vec.close()
