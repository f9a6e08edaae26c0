"""Warm-starting SAPO's value readout: regress V and Q on the returns of the policy's own rollouts before RL.

SAPO reads V(s_t) and Q(s_t, a_t) from two logits of the policy (``agents.logits.value_readout``), and the RL
loop trains them with one optimizer step per iteration, weighted c_V and c_Q against the policy term. At the CPU
scale that is about 20 steps for a whole run, and the readout stays near a constant (``value/explained_var`` ≈ 0,
docs/results-log.md). Offline, the same readout does generalize to episodes it never saw once it has been fitted on a
few hundred of them. This is that fit, as a phase between the behaviour-cloning warm start and RL:

1. roll the policy out on ``readout_warmup_episodes`` training episodes at the training temperature;
2. each turn's target is its Monte-Carlo discounted return ``G_t = r_t + γ·G_{t+1}`` (``discounted_returns``),
   the λ = 1 return of both V(s_t) and Q(s_t, a_t) under the policy that played it;
3. minimize ``((V − G)/R_max)² + ((Q − G)/R_max)²`` over every weight, plus ``readout_warmup_kl`` × the KL of the
   policy's action tokens from the log-probs they were sampled with, for ``readout_warmup_epochs`` epochs of
   shuffled 16-turn minibatches at ``readout_warmup_lr`` (AdamW, gradient norm clipped at 1, as the clone).
   Without the KL the fit moved the policy: the CPU default's clone went from 0 % to 78 % format-invalid turns.

The paper leaves warm-starting the readout open; this is our choice, off by default (``readout_warmup_episodes=0``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from trainers.config import TrainConfig
from trainers.core_algos.group import discounted_returns
from trainers.core_algos.losses import explained_variance, kl_penalty
from trainers.experience import Experience, micro_batches
from trainers.forward import action_log_probs, forward_positions, readout_values
from trainers.rollout import collect

__all__ = [
    "readout_loss",
    "readout_step",
    "fit_readout",
    "collect_returns",
    "readout_v",
    "explained",
    "readout_warm_start",
]

BATCH_TURNS = 16
"""Turns per optimizer step (the clone's minibatch)."""


def readout_loss(v: Tensor, q: Tensor, returns: Tensor, r_max: float) -> Tensor:
    """``(B,)`` V, Q and their target returns, in reward units → ``(B,)``: the squared errors in R_max units, summed."""
    return ((v - returns) / r_max).pow(2) + ((q - returns) / r_max).pow(2)


def _readout(policy: Any, batch: Experience, cfg: TrainConfig) -> tuple[Tensor, Tensor]:
    logits = forward_positions(policy.model, batch, readout=True)
    return readout_values(logits, tuple(policy.value_token_ids), cfg.tau_v, cfg.r_max)


def readout_step(policy: Any, mb: Experience, cfg: TrainConfig) -> float:
    """Backpropagate one minibatch's loss: the mean :func:`readout_loss` against ``mb.value_targets`` plus
    ``cfg.readout_warmup_kl`` × the token mean of the low-variance KL of the policy's action tokens from the sampler's
    own log-probs (``mb.old_log_probs``). The fit moves every weight; the KL keeps the actions where the sampler left
    them. Micro-batches of ``cfg.micro_batch_size`` rows (longest first under ``cfg.group_by_length``) weigh their
    row sums by the minibatch's rows and their token sums by its tokens, so they add up to the minibatch's loss: the
    same gradient whatever the micro-batch size. Returns the minibatch's loss."""
    ids, tokens, loss = tuple(policy.value_token_ids), max(1, int(mb.action_mask.sum())), 0.0
    for micro in micro_batches(mb, cfg.micro_batch_size, cfg.group_by_length):
        logits = forward_positions(policy.model, micro, readout=True)
        v, q = readout_values(logits, ids, cfg.tau_v, cfg.r_max)
        part = readout_loss(v, q, micro.value_targets, cfg.r_max).sum() / len(mb)
        if cfg.readout_warmup_kl > 0:
            lp = action_log_probs(logits, micro, ids, cfg.temperature)
            kl = kl_penalty(lp, micro.old_log_probs) * micro.action_mask
            part = part + cfg.readout_warmup_kl * kl.sum() / tokens
        part.backward()
        loss += float(part.detach())
    return loss


def fit_readout(
    policy: Any, data: Experience, returns: Tensor, cfg: TrainConfig, on_step: Callable[[int], None] | None = None
) -> list[float]:
    """Fit the readout of ``policy`` to ``returns (B,)`` of the turns in ``data``; the mean loss of each epoch.
    Each step is one shuffled minibatch of :data:`BATCH_TURNS` turns (:func:`readout_step`); ``on_step(k)`` is
    called after the k-th (benchmarks/value_learning_curve.py scores held-out episodes there)."""
    params = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.readout_warmup_lr)
    shuffle = torch.Generator().manual_seed(cfg.seed)
    data = replace(data, value_targets=returns.to(data.input_ids.device))  # the targets travel with their rows
    history = []
    for _ in range(cfg.readout_warmup_epochs):
        total, steps = 0.0, 0
        for mb in data.minibatches(BATCH_TURNS, generator=shuffle):
            optimizer.zero_grad(set_to_none=True)
            total += readout_step(policy, mb, cfg)
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            steps += 1
            if on_step is not None:
                on_step(len(history) * -(-len(data) // BATCH_TURNS) + steps)
        history.append(total / max(steps, 1))
    return history


def collect_returns(
    trainer: Any, episodes: int, on_batch: Callable[[int], None] | None = None
) -> tuple[Experience, Tensor]:
    """Roll ``trainer``'s policy out for at least ``episodes`` training episodes (whole batches of
    ``episodes_per_iteration``) → their turns and each turn's discounted return ``(B,)``; ``on_batch(n)`` is called
    with the episodes played so far after each batch (a progress bar's hook).

    The batches play the task schedule's entries after the RL iterations' (``iterations + k``), so the readout's
    episodes are not the ones RL starts with."""
    cfg = trainer.cfg
    per_batch = max(1, cfg.episodes_per_iteration)
    parts, targets = [], []
    for k in range(-(-episodes // per_batch)):
        with torch.no_grad():
            rollout = collect(
                trainer.vec,
                trainer.agent.act_detailed,
                episode=cfg.iterations + k,
                seed=cfg.seed,
                score_reward=cfg.r_max if cfg.train_reward == "score" else None,
            )  # RL's own reward
        if not rollout.turns:
            continue
        exp = Experience.collate(rollout.turns, trainer.policy.pad_token_id)
        exp = replace(exp, traj_ids=exp.traj_ids + k * per_batch)  # ids are per batch: one id per episode across them
        parts.append(exp)
        targets.append(discounted_returns(exp.rewards, exp.traj_ids, exp.turn_idx, cfg.gamma))
        if on_batch is not None:
            on_batch((k + 1) * per_batch)
    if not parts:
        raise RuntimeError("the readout warm start collected no turns")
    return Experience.cat(parts, trainer.policy.pad_token_id), torch.cat(targets)


def readout_warm_start(trainer: Any) -> dict[str, Any]:
    """Collect ``readout_warmup_episodes`` episodes and fit SAPO's readout to their returns (module docstring).

    Returns ``loss`` (per epoch), ``turns``, and ``explained_var_before`` / ``explained_var_after``: how much of
    the returns' variance V explains on those same turns before and after the fit (the RL loop's
    ``value/explained_var`` is the measure on episodes the fit never saw)."""
    from tqdm import tqdm

    cfg = trainer.cfg
    show = cfg.progress and trainer.is_main
    with tqdm(total=cfg.readout_warmup_episodes, desc="readout warm start: episodes", disable=not show) as bar:
        data, returns = collect_returns(trainer, cfg.readout_warmup_episodes, on_batch=lambda n: bar.update(n - bar.n))
    data, returns = data.to(trainer.device), returns.to(trainer.device)
    before = explained(trainer.policy, data, returns, cfg)
    loss = fit_readout(trainer.policy, data, returns, cfg)
    return {
        "loss": loss,
        "turns": len(data),
        "explained_var_before": before,
        "explained_var_after": explained(trainer.policy, data, returns, cfg),
    }


def readout_v(policy: Any, data: Experience, cfg: TrainConfig) -> Tensor:
    """The readout's V ``(B,)`` at the turns of ``data``, in reward units (no gradient)."""
    with torch.no_grad():
        return torch.cat(
            [_readout(policy, micro, cfg)[0] for micro in micro_batches(data, cfg.micro_batch_size, False)]
        )


def explained(policy: Any, data: Experience, returns: Tensor, cfg: TrainConfig) -> float:
    """How much of ``returns (B,)`` the readout's V explains on the turns of ``data`` (``explained_variance``)."""
    return float(explained_variance(readout_v(policy, data, cfg), returns))
