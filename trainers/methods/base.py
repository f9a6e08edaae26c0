"""What every method shares: the forward passes over a batch and the actor loss.

A method is a small object the loop calls phase by phase (see :mod:`trainers.loop`):

``old_forward`` (old log-prob) → ``compute_values`` (value) → ``compute_advantages`` (advantage)
→ ``critic_loss`` per micro-batch (critic update, PPO only) → ``actor_loss`` per micro-batch (actor
update). Both updates run through :func:`trainers.update.update`; a method only supplies losses.

:class:`Method` implements the shared parts; the subclasses override only where the methods
differ: where V comes from (``readout``: SAPO reads V_old and Q_old from the old forward pass;
PPO's critic in the value phase; none for the group methods), SAPO's value and Q losses, PPO's critic loss and
the group methods' advantages. A subclass is used once it has a line in :mod:`trainers.method_registry`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor

from agents.logits import value_readout
from trainers.config import TrainConfig
from trainers.core_algos import (
    aggregate_loss,
    clipped_policy_loss,
    group_entries,
    kl_penalty,
    normalize_turn_advantages,
    turn_scores,
    turn_targets,
)
from trainers.distributed import map_micro_batches
from trainers.experience import Experience
from trainers.forward import PositionLogits, action_entropy, action_log_probs, forward_positions, readout_values

__all__ = ["Method", "pad_to"]


def pad_to(x: Tensor, width: int) -> Tensor:
    """Right-pad the token dim of a ``(B, t)`` tensor with zeros to ``(B, width)``."""
    return F.pad(x, (0, width - x.shape[1]))


class Method:
    """The shared parts of the methods (a turn-level GAE actor, as in PPO)."""

    name: ClassVar[str] = "base"
    """The method's ``--algo`` name, its registry key (:data:`trainers.method_registry.METHODS`)."""
    readout: ClassVar[bool] = False
    """Whether V and Q are the policy's own w⁺/w⁻ readout (SAPO): the old forward pass fills
    ``old_values``/``old_q`` and the losses read the logits at the V/Q positions."""
    critic: torch.nn.Module | None = None
    """A separate value model (PPO); the trainer prepares it with the strategy, as the actor."""
    strategy: Any = None
    """The trainer's strategy under data parallelism (inference micro-batches are dealt over its ranks)."""

    def __init__(self, cfg: TrainConfig, policy: Any):
        self.cfg = cfg
        self.policy = policy
        self.value_token_ids = tuple(int(i) for i in policy.value_token_ids)

    # ----------------------------------------------------------------- phases
    @torch.no_grad()
    def old_forward(self, exp: Experience) -> Experience:
        """Old log-prob phase: log π_old of the sampled tokens, and for a readout method V_old and Q_old,
        from one forward pass. With ``old_log_probs='rollout'`` the sampler's own are kept instead (a
        readout method needs the sampler's w⁺/w⁻ logits, ``exp.value_logits``, else it recomputes)."""
        cfg = self.cfg
        if cfg.old_log_probs == "rollout" and not self.readout:
            return exp  # ``exp.old_log_probs`` already holds the sampler's (``Experience.collate``)
        if cfg.old_log_probs == "rollout" and exp.value_logits is not None:
            exp.old_values = value_readout(exp.value_logits[:, 0], 0, 1, cfg.tau_v, cfg.r_max)
            exp.old_q = value_readout(exp.value_logits[:, 1], 0, 1, cfg.tau_v, cfg.r_max)
            return exp
        width = exp.input_ids.shape[1]

        def score(mb: Experience) -> tuple[Tensor, ...]:
            logits = forward_positions(self.policy.model, mb, readout=self.readout)
            lp = pad_to(action_log_probs(logits, mb, self.value_token_ids, cfg.temperature), width)
            return (lp, *self.read_values(logits)) if self.readout else (lp,)

        parts = map_micro_batches(self.strategy, exp, cfg.micro_batch_size, score)
        exp.old_log_probs = torch.cat([p[0] for p in parts])
        if self.readout:
            exp.old_values, exp.old_q = torch.cat([p[1] for p in parts]), torch.cat([p[2] for p in parts])
        return exp

    def read_values(self, logits: PositionLogits) -> tuple[Tensor, Tensor]:
        """``(V (B,), Q (B,))`` of a readout method from a forward pass with ``readout=True``: SAPO's
        :func:`~trainers.forward.readout_values` of the w⁺/w⁻ logits (the head control overrides it)."""
        return readout_values(logits, self.value_token_ids, self.cfg.tau_v, self.cfg.r_max)

    def compute_values(self, exp: Experience) -> Experience:
        """Value phase: fill ``exp.old_values`` (and ``old_q``); the group methods have none."""
        return exp

    def compute_advantages(self, exp: Experience) -> Experience:
        """Advantage phase: turn-level GAE on V_old and the value / SARSA targets, then :meth:`turn_advantages`."""
        cfg = self.cfg
        assert exp.old_values is not None
        gae, exp.value_targets, exp.q_targets = turn_targets(
            exp.rewards, exp.old_values, exp.dones, exp.traj_ids, exp.turn_idx, cfg.gamma, cfg.lam, exp.old_q
        )
        exp.advantages = self.turn_advantages(gae, exp)
        return exp

    def turn_advantages(self, gae: Tensor, exp: Experience) -> Tensor:
        """``(B,)`` Â from the raw turn GAE: the invalid penalty, then the batch normalization (eq. 7)."""
        return normalize_turn_advantages(gae, exp.invalid, self.cfg.c_inv)

    def group_scores(self, exp: Experience) -> tuple[Tensor, Tensor]:
        """GRPO's and RLOO's inputs, as verl-agent prepares them: ``(scores, entries)``, both ``(B,)``.

        ``scores``: each turn row's trajectory return minus ``c_inv`` on an invalid turn
        (:func:`~trainers.core_algos.turn_scores`); ``entries``: the rows of the group statistics
        (:func:`~trainers.core_algos.group_entries`, per ``grpo_stats_across_steps``).
        """
        cfg = self.cfg
        scores = turn_scores(exp.rewards, exp.traj_ids, cfg.c_inv * exp.invalid.float())
        return scores, group_entries(exp.traj_ids, exp.turn_idx, cfg.grpo_stats_across_steps)

    def critic_loss(self, micro: Experience) -> tuple[Tensor, dict[str, Tensor]]:
        """Critic-update loss on one micro-batch (a method with a :attr:`critic` defines it)."""
        raise NotImplementedError(f"{self.name} has no critic")

    # ----------------------------------------------------------------- actor loss
    def actor_loss(
        self, mb: Experience, logits: PositionLogits, policy: bool = True
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """``L = L_pol + β·L_KL − c_H·H (+ the method's value terms)`` on one micro-batch; without ``L_pol`` when not
        ``policy`` (the critic warm-up, ``TrainConfig.critic_warmup``: its statistic is still reported)."""
        cfg = self.cfg
        assert mb.advantages is not None
        lp = action_log_probs(logits, mb, self.value_token_ids, cfg.temperature)
        loss, stats = clipped_policy_loss(lp, mb.old_log_probs, mb.advantages, mb.action_mask, cfg.clip_eps)
        stats["policy_loss"] = loss.detach()
        loss = loss if policy else loss.new_zeros(())
        if mb.ref_log_probs is not None and cfg.kl_coef > 0:
            kl = aggregate_loss(kl_penalty(lp, mb.ref_log_probs), mb.action_mask)
            loss = loss + cfg.kl_coef * kl
            stats["kl"] = kl.detach()
        with torch.set_grad_enabled(cfg.entropy_coef > 0 and torch.is_grad_enabled()):
            per_token = action_entropy(logits, mb, self.value_token_ids, cfg.temperature)
            entropy = per_token.sum() / max(1, per_token.numel())  # token-mean (0 without action tokens)
        if cfg.entropy_coef > 0:
            loss = loss - cfg.entropy_coef * entropy
        stats["entropy"] = entropy.detach()
        loss = loss + self.value_terms(mb, logits, stats)
        stats["loss"] = loss.detach()
        return loss, stats

    def value_terms(self, mb: Experience, logits: PositionLogits, stats: dict[str, Tensor]) -> Tensor:
        """Extra actor-loss terms (SAPO: ``c_V·L_V + c_Q·L_Q``); 0 for the others."""
        return logits.action.new_zeros(())
