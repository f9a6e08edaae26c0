"""The generation interface shared by the HF (CPU/GPU) and vLLM back-ends.

A :class:`Generator` turns a batch of prompt token ids into sampled responses with their per-token
log-probabilities under the *policy* distribution: the softmax over the vocabulary without SAPO's
w⁺/w⁻ (``agents.logits.mask_value_tokens``), scaled by the temperature. ``top_p`` only
restricts what is sampled; the log-probs are those of the full tempered distribution, which is what
the trainer recomputes. Greedy decoding (``temperature == 0``) reports log-probs at temperature 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "GenerationParams",
    "GenerationOutput",
    "Generator",
    "TRAIN_TEMPERATURE",
    "EVAL_TEMPERATURE",
    "check_prompts",
    "response_budgets",
]

TRAIN_TEMPERATURE = 1.0
"""Sampling temperature for rollouts during training (verl-agent's default)."""
EVAL_TEMPERATURE = 0.4
"""Sampling temperature for evaluation (the paper's)."""


@dataclass(frozen=True)
class GenerationParams:
    """How to sample one batch of responses."""

    max_new_tokens: int = 512
    """Response budget in tokens (the end-of-turn token included); also capped by the context length."""
    temperature: float = TRAIN_TEMPERATURE
    """Softmax temperature; 0 means greedy."""
    top_p: float = 1.0
    """Nucleus sampling: sample from the smallest set of tokens holding this much probability."""
    seed: int | None = None
    """Seed of the sampling RNG for this call (None: torch's global RNG)."""
    draft_tokens: int = 0
    """Speculative sampling (HF back-end): feed up to this many draft tokens, looked up in the responses of the current
    batch of episodes, in each forward pass and keep what speculative sampling accepts; every token is drawn from the
    same distribution as without drafts (another sample, not the same one). 0: one token per forward pass."""
    value_logits: bool = False
    """Also return the raw w⁺/w⁻ logits at SAPO's two readout positions (the last prompt token and the
    last response token), so the trainer can take V_old and Q_old from the rollout (HF back-end only)."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 0 or self.temperature < 0 or not 0 < self.top_p <= 1 or self.draft_tokens < 0:
            raise ValueError(f"invalid generation params {self}")

    @classmethod
    def for_eval(cls, **overrides: Any) -> GenerationParams:
        """The evaluation defaults (temperature 0.4)."""
        return cls(**{"temperature": EVAL_TEMPERATURE, **overrides})

    def with_seed(self, seed: int | None) -> GenerationParams:
        return replace(self, seed=seed)


@dataclass
class GenerationOutput:
    """One sampled turn: the prompt it answered and the response, token by token.

    The one record of a turn from the sampler to the training batch: the rollout keeps it as its turn's
    ``output`` (:class:`trainers.experience.TurnRecord`, which adds what the env answered) and the batch is
    padded from it (:meth:`trainers.experience.Experience.collate`)."""

    token_ids: list[int]
    """Response tokens, the end-of-turn token included when the model emitted one."""
    log_probs: list[float]
    """log π(token | prefix) per response token, under the masked, tempered distribution."""
    text: str
    """Decoded response without special tokens (the text the env receives)."""
    truncated: bool
    """True when the response hit its token budget before an end-of-turn token."""
    value_logits: tuple[tuple[float, float], tuple[float, float]] | None = None
    """With ``GenerationParams.value_logits``: ((z_w⁺, z_w⁻) at the last prompt token, (z_w⁺, z_w⁻) at the
    last response token), the raw logits SAPO's V and Q are read from; None otherwise."""
    allowed_tokens: list[tuple[int, ...] | None] | None = None
    """Under a constraint (:mod:`agents.constraint`): per response token, the token ids the sampler allowed
    there (None where decoding was free); None when generated without one."""
    constraint_fallback: bool = False
    """A constraint was asked for but the turn had no usable admissible list: decoded freely."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Back-end specific details (never needed by the trainer)."""
    prompt_ids: list[int] = field(kw_only=True)
    """The prompt's tokens (chat template applied, after the truncation rule): at least one, the V readout position."""
    prompt_truncated: bool = field(default=False, kw_only=True)
    """The prompt was longer than its budget and was cut (set by :class:`~agents.llm.LLMAgent`, which encodes it)."""

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise ValueError("a turn needs at least one prompt token (the value readout position)")
        if len(self.log_probs) != len(self.token_ids):
            raise ValueError(f"{len(self.token_ids)} response tokens but {len(self.log_probs)} log-probs")
        if self.allowed_tokens is not None and len(self.allowed_tokens) != len(self.token_ids):
            raise ValueError(f"{len(self.token_ids)} response tokens but {len(self.allowed_tokens)} allowed sets")


@runtime_checkable
class Generator(Protocol):
    """Samples responses for a batch of prompts (token ids, chat template already applied)."""

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], params: GenerationParams, constraints: Sequence[Any] | None = None
    ) -> list[GenerationOutput]:
        """``constraints``: one :class:`~agents.constraint.ActionConstraint` (or None) per prompt."""
        ...

    def push_weights(self, model: Any) -> None:
        """Make the next ``generate`` use ``model``'s current weights (after an update)."""
        ...

    def reset(self) -> None:
        """A new batch of episodes starts: forget what earlier calls generated (where drafts come from)."""
        ...


def check_prompts(prompt_ids: Sequence[Sequence[int]], constraints: Sequence[Any] | None) -> None:
    """What every :meth:`Generator.generate` refuses (ValueError): a constraint list that is not one per prompt, and
    an empty prompt (a response needs a token to condition on, and V is read at the last prompt token)."""
    if constraints is not None and len(constraints) != len(prompt_ids):
        raise ValueError(f"{len(constraints)} constraints for {len(prompt_ids)} prompts")
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("empty prompt: a response needs at least one prompt token to condition on")


def response_budgets(prompt_ids: Sequence[Sequence[int]], params: GenerationParams, context_length: int) -> list[int]:
    """Each prompt's response budget in tokens: ``params.max_new_tokens``, cut to what ``context_length`` leaves after
    the prompt (0 or less: the prompt fills the context, no token is generated)."""
    return [min(params.max_new_tokens, context_length - len(p)) for p in prompt_ids]
