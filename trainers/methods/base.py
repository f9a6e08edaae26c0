"""What SAPO, PPO and GRPO share: the forward passes over a batch and the actor loss.

A method is a small object the loop calls phase by phase (see :mod:`trainers.loop`):

``old_forward`` (old log-prob) → ``compute_values`` (value) → ``compute_advantages`` (advantage)
→ ``critic_update`` → ``actor_loss`` per micro-batch (actor update).

:class:`Method` implements the shared parts; the subclasses override only where the methods
differ: where V comes from (SAPO's readout of the policy's own logits, PPO's critic, none for
GRPO), SAPO's value and Q losses, and GRPO's group advantages.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor

from trainers.config import TrainConfig
from trainers.core_algos import aggregate_loss, clipped_policy_loss, kl_penalty, normalize_turn_advantages, turn_targets
from trainers.distributed import map_micro_batches
from trainers.experience import Experience, micro_batches
from trainers.forward import PositionLogits, action_entropy, action_log_probs, forward_positions

__all__ = ["Method", "micro_batches", "pad_to"]


def pad_to(x: Tensor, width: int) -> Tensor:
    """Right-pad the token dim of a ``(B, t)`` tensor with zeros to ``(B, width)``."""
    return F.pad(x, (0, width - x.shape[1]))


class Method:
    """The shared parts of the three methods (a turn-level GAE actor, as in PPO)."""

    name: ClassVar[str] = "base"
    readout: ClassVar[bool] = False
    """Whether the losses read the logits at the V/Q positions (SAPO)."""
    critic: torch.nn.Module | None = None
    critic_optimizer: torch.optim.Optimizer | None = None
    strategy: Any = None
    """The trainer's strategy under data parallelism (inference micro-batches are dealt over its ranks)."""

    def __init__(self, cfg: TrainConfig, policy: Any):
        self.cfg = cfg
        self.policy = policy
        self.value_token_ids = tuple(int(i) for i in policy.value_token_ids)

    # ----------------------------------------------------------------- phases
    @torch.no_grad()
    def old_forward(self, exp: Experience) -> Experience:
        """Old log-prob phase: recompute log π_old of the sampled tokens with one forward pass
        (with ``old_log_probs='rollout'``, keep the sampler's: ``rollout_scores``)."""
        if self.cfg.old_log_probs == "rollout" and self.rollout_scores(exp):
            return exp
        width = exp.input_ids.shape[1]

        def score(mb: Experience) -> tuple[Tensor, tuple[Tensor, ...]]:
            logits = forward_positions(self.policy.model, mb, readout=self.readout)
            return pad_to(action_log_probs(logits, mb, self.value_token_ids, self.cfg.temperature), width), self.old_readout(logits)

        parts = map_micro_batches(self.strategy, exp, self.cfg.micro_batch_size, score)
        exp.old_log_probs = torch.cat([lp for lp, _ in parts])
        self.keep_old_readout(exp, [readout for _, readout in parts])
        return exp

    def rollout_scores(self, exp: Experience) -> bool:
        """Take what the old forward pass would compute from the rollout instead; False if it lacks it.

        ``exp.old_log_probs`` already holds the sampler's log-probs (``Experience.collate``)."""
        return True

    def old_readout(self, logits: PositionLogits) -> tuple[Tensor, ...]:
        """What the method reads from one micro-batch's old forward pass besides log-probs (SAPO: V, Q)."""
        return ()

    def keep_old_readout(self, exp: Experience, parts: list[tuple[Tensor, ...]]) -> None:
        """Store the micro-batches' :meth:`old_readout` results on ``exp`` (SAPO: its old V and Q)."""

    def compute_values(self, exp: Experience) -> Experience:
        """Value phase: fill ``exp.old_values`` (and ``old_q``); GRPO has none."""
        return exp

    def compute_advantages(self, exp: Experience) -> Experience:
        """Advantage phase: turn-level GAE on V_old, the invalid penalty, batch normalization."""
        cfg = self.cfg
        assert exp.old_values is not None
        adv, exp.value_targets, exp.q_targets = turn_targets(
            exp.rewards, exp.old_values, exp.dones, exp.traj_ids, exp.turn_idx, cfg.gamma, cfg.lam, exp.old_q
        )
        exp.advantages = normalize_turn_advantages(adv, exp.invalid, cfg.c_inv)
        return exp

    def critic_update(self, exp: Experience, generator: torch.Generator, track: Any) -> dict[str, float]:
        """Critic-update phase (PPO only)."""
        return {}

    # ----------------------------------------------------------------- actor loss
    def actor_loss(self, mb: Experience, logits: PositionLogits) -> tuple[Tensor, dict[str, Tensor]]:
        """``L = L_pol + β·L_KL − c_H·H (+ the method's value terms)`` on one micro-batch."""
        cfg = self.cfg
        assert mb.advantages is not None
        lp = action_log_probs(logits, mb, self.value_token_ids, cfg.temperature)
        loss, stats = clipped_policy_loss(lp, mb.old_log_probs, mb.advantages, mb.action_mask, cfg.clip_eps)
        stats["policy_loss"] = loss.detach()
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
        """Extra actor-loss terms (SAPO: ``c_V·L_V + c_Q·L_Q``); 0 for PPO and GRPO."""
        return logits.action.new_zeros(())

    # ----------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        if self.critic is None or self.critic_optimizer is None:
            return {}
        return {"critic": self.critic.state_dict(), "critic_optimizer": self.critic_optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.critic is not None and self.critic_optimizer is not None:
            self.critic.load_state_dict(state["critic"])
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])
