"""PPO's critic: the policy's base model (a separate copy, own optimizer) plus a scalar head.

V(s_t) is read at the last prompt token, the same position as SAPO's V readout, so the two methods
differ only in where V comes from. Causal attention means tokens after that position cannot change
it: :meth:`CriticModel.values` runs the backbone on the prompt columns only.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor, nn

from agents.policy import PolicyModel

__all__ = ["CriticModel"]


class CriticModel(nn.Module):
    """``backbone`` (an HF base model returning ``last_hidden_state``) + ``Linear(hidden, 1)``."""

    def __init__(self, backbone: nn.Module, hidden_size: int, *, value_scale: float = 1.0, seed: int = 0):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(hidden_size, 1)
        self.value_scale = value_scale
        """Multiplies the head's output (e.g. R_max, so the head learns in normalized units)."""
        with torch.no_grad():  # OpenRLHF's init: small but non-zero, so the backbone gets gradient at once
            rng = torch.Generator().manual_seed(seed)
            self.head.weight.copy_(torch.randn(self.head.weight.shape, generator=rng) / (hidden_size + 1))
            self.head.bias.zero_()
        self.head.to(next(backbone.parameters()).device)

    @classmethod
    def from_policy(cls, policy: PolicyModel, *, value_scale: float = 1.0, seed: int = 0) -> CriticModel:
        """A critic initialized from the policy's current base model (deep copy; no LM head)."""
        backbone = copy.deepcopy(policy.model.get_decoder())
        return cls(backbone, policy.model.config.hidden_size, value_scale=value_scale, seed=seed).to(
            next(backbone.parameters()).dtype
        )

    @torch.no_grad()
    def copy_backbone_from(self, policy: PolicyModel) -> None:
        """Set the backbone's weights to the policy's current base model's (after a warm start that trained the
        policy once the critic was built; the head is kept)."""
        self.backbone.load_state_dict(policy.model.get_decoder().state_dict())

    def activation_checkpointing_enable(self, activation_checkpointing_kwargs: dict[str, Any] | None = None) -> None:
        """Recompute the backbone's activations in the backward pass (the HF switch, under either name).

        ``trainers.strategy`` calls this for ``gradient_checkpointing``, as it does on the actor; it
        engages in the critic update (see :meth:`forward`).
        """
        kwargs = activation_checkpointing_kwargs or {"use_reentrant": False}
        if hasattr(self.backbone, "activation_checkpointing_enable"):  # transformers >= 5.20
            self.backbone.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            self.backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)

    def forward(self, input_ids: Tensor, attention_mask: Tensor, positions: Tensor) -> Tensor:
        """``(B, T)`` right-padded rows, ``positions (B,)`` → values ``(B,)`` float32 read at those positions.

        The backbone runs in train mode only while gradients flow (the critic update: dropout, if the
        model has any, and gradient checkpointing engage) and in eval mode for the no-grad value pass,
        as verl's critic does; ``critic.eval()`` keeps it in eval mode throughout.
        """
        self.backbone.train(self.training and torch.is_grad_enabled())
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
        picked = hidden[torch.arange(hidden.shape[0], device=hidden.device), positions.to(hidden.device)]
        return self.value_scale * self.head(picked).squeeze(-1).float()

    def values(self, input_ids: Tensor, attention_mask: Tensor, prompt_lengths: Tensor) -> Tensor:
        """V(s_t) at the last prompt token, ``(B,)``; only the first ``max(prompt_lengths)`` columns are run."""
        width = int(prompt_lengths.max())
        return self(input_ids[:, :width], attention_mask[:, :width], prompt_lengths.long() - 1)
