"""What a method's value function knows of episodes it never trained on: V and Q against their returns.

:func:`held_out_values` plays episodes of a held-out split with the trainer's own sampler at the training
temperature (V estimates the return of the policy that samples), scores their turns exactly as an iteration scores
its batch (the old log-prob and value phases: SAPO's readout, the head control's head, PPO's critic) and compares
each turn's V(s_t) and Q(s_t, a_t) with its discounted Monte-Carlo return ``G_t``, the λ = 1 target of both. On the
same turns it measures the policy's KL from a reference (the run's start). Nothing here trains; the RNG it draws from
is restored afterwards.
"""

from __future__ import annotations

from typing import Any

import torch

from trainers.core_algos import aggregate_loss, discounted_returns, explained_variance, kl_penalty
from trainers.experience import Experience
from trainers.rollout import collect, make_train_vec

__all__ = ["held_out_values", "value_scores"]


def value_scores(values: torch.Tensor | None, q: torch.Tensor | None, returns: torch.Tensor) -> dict[str, float]:
    """``(B,)`` V, Q (either None: the method has none) and returns → ``v_explained_var``, ``v_abs_error`` (mean
    ``|V − G|`` over the turns, in reward units: V's calibration), ``q_explained_var``, ``q_abs_error``."""
    out: dict[str, float] = {}
    for name, pred in (("v", values), ("q", q)):
        if pred is not None:
            out[f"{name}_explained_var"] = float(explained_variance(pred, returns))
            out[f"{name}_abs_error"] = float((pred.float() - returns.float()).abs().mean())
    return out


def _kl_from(trainer: Any, reference: torch.nn.Module, exp: Experience) -> float:
    """Token mean of the k3 KL of the sampled action tokens' log-probs (``exp.old_log_probs``) from ``reference``'s."""
    ref = trainer.log_probs_under(reference, exp)
    return float(aggregate_loss(kl_penalty(exp.old_log_probs, ref), exp.action_mask))


@torch.no_grad()
def held_out_values(
    trainer: Any, split: str | None, episodes: int, reference: torch.nn.Module | None = None, seed: int = 0
) -> dict[str, float]:
    """Play ``episodes`` episodes of ``split`` (one per task of the schedule's first entry under ``seed``: the same
    tasks for every run) and score them (module docstring). Returns ``episodes``, ``turns``, ``success`` and the
    :func:`value_scores` of the method's V and Q (none for a group method), plus ``kl_reference`` when given one."""
    cfg = trainer.cfg
    kwargs = {**cfg.gym_make_kwargs(), **({"split": split} if split else {})}
    vec = make_train_vec(cfg.env, episodes, 1, seed, **kwargs)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        trainer.agent.reset(vec.num_envs)
        try:
            with trainer.strategy.autocast():
                rollout = collect(
                    vec,
                    trainer.agent.act_detailed,
                    episode=0,
                    seed=seed,
                    score_reward=cfg.r_max if cfg.train_reward == "score" else None,
                )
        finally:
            vec.close()
    exp = Experience.collate(rollout.turns, trainer.policy.pad_token_id).to(trainer.device)
    with trainer.strategy.autocast():
        exp = trainer.method.compute_values(trainer.method.old_forward(exp))
        kl = _kl_from(trainer, reference, exp) if reference is not None else None
    returns = discounted_returns(exp.rewards, exp.traj_ids, exp.turn_idx, cfg.gamma)
    out = {
        "episodes": float(len(rollout.episodes)),
        "turns": float(len(exp)),
        "success": sum(e.won for e in rollout.episodes) / max(1, len(rollout.episodes)),
        **value_scores(exp.old_values, exp.old_q, returns),
    }
    if kl is not None:
        out["kl_reference"] = kl
    return out
