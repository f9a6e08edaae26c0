"""Speculative sampling with drafts looked up in earlier responses: several tokens per forward pass, same distribution.

A rollout's responses repeat themselves: a cloned agent writes the same ``<think>…</think><action>`` frame every
turn and often the same action. :class:`DraftMemory` keeps the responses generated since the agent's last
``reset`` (a batch of episodes) and proposes, for a response so far, the continuation of an earlier response
that starts with it or shares its last tokens (n-gram drafting, as vLLM's ``ngram`` speculator, over responses).
The sampler feeds the draft in one forward pass and :func:`accept_draft` keeps the longest prefix that speculative
sampling accepts (Leviathan et al. 2023, Chen et al. 2023, with a deterministic draft): draft token ``d`` is kept
with probability ``q(d)``, the sampler's own draw probability there; on the first rejection one token is drawn
from ``q`` without ``d`` (renormalized); when every draft token is kept, one more is drawn from the distribution
after the last. Each emitted token is therefore distributed exactly as token-by-token sampling would draw it,
and its log-prob is read from the same masked, tempered (and constrained) distribution; only the random draws
differ, so a run with drafts is another sample of the same process, not the same numbers. Greedy decoding keeps
a draft token iff it is the argmax.

Drafts depend only on responses of the current batch of episodes, so a resumed run proposes the same drafts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from agents.constraint import allowed_matrix, restrict_logits
from agents.logits import mask_value_tokens

__all__ = ["DraftMemory", "accept_draft", "draw_distribution"]


class DraftMemory:
    """The distinct responses (token ids) of the current batch of episodes, indexed for drafting.

    A draft continues the newest remembered response that starts with the whole response so far; without one, the
    newest that holds its last ``ngram`` (then fewer) tokens somewhere, from there on (n-gram lookup, which picks up
    e.g. the rest of an action another response took). At most ``size`` distinct responses are indexed; later ones
    are not (the index never forgets within a batch, so drafts depend only on what the batch generated)."""

    def __init__(self, size: int = 1024, ngram: int = 3):
        self.size, self.ngram = size, ngram
        self._seen: set[tuple[int, ...]] = set()
        self._by_prefix: dict[tuple[int, ...], tuple[tuple[int, ...], int]] = {}
        self._by_ngram: dict[tuple[int, ...], tuple[tuple[int, ...], int]] = {}

    def clear(self) -> None:
        self._seen.clear()
        self._by_prefix.clear()
        self._by_ngram.clear()

    def remember(self, tokens: Sequence[int]) -> None:
        response = tuple(int(t) for t in tokens)
        if not response or response in self._seen or len(self._seen) >= self.size:
            return
        self._seen.add(response)
        for i in range(
            len(response)
        ):  # every position with a continuation: the prefix before it, the n-grams ending there
            self._by_prefix[response[:i]] = (response, i)
            for n in range(1, min(self.ngram, i) + 1):
                self._by_ngram[response[i - n : i]] = (response, i)

    def propose(self, prefix: Sequence[int], k: int) -> list[int]:
        """Up to ``k`` tokens to try after ``prefix`` ([] when nothing remembered continues it)."""
        if k <= 0:
            return []
        key = tuple(prefix)
        hit = self._by_prefix.get(key)
        for n in range(min(self.ngram, len(key)), 0, -1):
            if hit is not None:
                break
            hit = self._by_ngram.get(key[-n:])
        if hit is None:
            return []
        response, at = hit
        return list(response[at : at + k])


def draw_distribution(
    logits: Tensor, value_token_ids: Sequence[int], temperature: float, top_p: float, allowed: Tensor | None
) -> tuple[Tensor, Tensor]:
    """``(K, V)`` logits → (log-probs ``(K, V)`` the sampler reports, draw weights ``(K, V)``): the one computation
    behind every draw (:func:`agents.generation.hf.sample_next` and :func:`accept_draft`). The weights are the tempered
    probabilities, cut to the ``top_p`` nucleus and not renormalized (``torch.multinomial`` normalizes); greedy:
    log-probs at temperature 1 and a one-hot weight on the argmax."""
    z = restrict_logits(mask_value_tokens(logits.float(), value_token_ids), allowed)
    if temperature == 0:
        return torch.log_softmax(z, dim=-1), torch.nn.functional.one_hot(z.argmax(-1), z.shape[-1]).float()
    log_p = torch.log_softmax(z / temperature, dim=-1)
    probs = log_p.exp()
    if top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        outside = sorted_p.cumsum(dim=-1) - sorted_p >= top_p  # mass before this token already enough
        probs = probs.scatter(-1, order, sorted_p.masked_fill(outside, 0.0))
    return log_p, probs


def accept_draft(
    logits: Tensor,
    draft: Sequence[int],
    allowed: Sequence[tuple[int, ...] | None],
    value_token_ids: Sequence[int],
    params: Any,
    rng: torch.Generator | None,
) -> tuple[list[int], list[float]]:
    """One row's speculative step: the tokens to emit and their log-probs.

    Args:
        logits: ``(m + 1, V)``: row ``i`` is the distribution of the token after ``draft[:i]``.
        draft: ``m`` proposed tokens (each allowed by the constraint at its position; see ``allowed``).
        allowed: ``m + 1`` allowed-id sets (None: free), one per row of ``logits``.
        params: the call's :class:`~agents.generation.base.GenerationParams` (temperature, top_p).

    Returns ``n`` kept draft tokens and one drawn token (``n + 1`` in all), with their log-probs.
    """
    log_p, weights = draw_distribution(
        logits,
        value_token_ids,
        params.temperature,
        params.top_p,
        allowed_matrix(allowed, logits.device) if any(a is not None for a in allowed) else None,
    )
    probs = weights / weights.sum(-1, keepdim=True) if params.top_p < 1.0 else weights  # a cut nucleus sums below 1
    tokens: list[int] = []
    for i, d in enumerate(draft):
        q = float(probs[i, d])
        keep = q > 0 and (q >= 1.0 or float(torch.rand((), generator=rng)) < q)
        if not keep:  # draw from q without d: q(x) / (1 − q(d)) for x ≠ d
            residual = probs[i].clone()
            residual[d] = 0.0
            x = int(torch.multinomial(residual, 1, generator=rng))
            return [*tokens, x], [float(log_p[j, t]) for j, t in enumerate([*tokens, x])]
        tokens.append(int(d))
    m = len(draft)
    x = int(torch.multinomial(probs[m], 1, generator=rng))
    return [*tokens, x], [float(log_p[j, t]) for j, t in enumerate([*tokens, x])]
