"""Batched sampling with plain ``transformers`` forward passes and a KV cache (CPU or one GPU).

Prompts are left-padded into one batch (explicit position ids, so padding never shifts positions)
and prefilled once; then one token per step for the rows still generating. A row leaves the batch,
and the cache, as soon as it emits an end-of-turn token or reaches its budget, so late steps cost
only what is still active. Every step goes through ``agents.logits.mask_value_tokens``: w⁺/w⁻
are never sampled, and the returned log-probs are under the same distribution the trainer uses.

With ``GenerationParams.value_logits`` the sampler also keeps the w⁺/w⁻ logits SAPO reads V and Q
from: V's are in the prefill's last logits (the ones that choose the first action token); Q's need
the last response token fed once more, so a finished row leaves the batch one step later.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from transformers import DynamicCache

from agents.constraint import allowed_matrix
from agents.generation.base import GenerationOutput, GenerationParams, check_prompts, response_budgets
from agents.generation.speculative import DraftMemory, accept_draft, draw_distribution
from agents.policy import PolicyModel

__all__ = ["HFGenerator", "sample_next"]


def sample_next(
    logits: Tensor,
    value_token_ids: Sequence[int],
    params: GenerationParams,
    rng: torch.Generator | None,
    allowed: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """One sampling step: ``(B, V)`` logits → (tokens ``(B,)``, their log-probs ``(B,)``).

    Log-probs are under softmax(restrict(mask(z)) / T) (T = 1 when greedy; ``allowed (B, W)`` the
    constraint's ids, see :func:`agents.constraint.restrict_logits`); ``top_p`` narrows only the draw.
    """
    log_p, weights = draw_distribution(logits, value_token_ids, params.temperature, params.top_p, allowed)
    if params.temperature == 0:
        tokens = weights.argmax(dim=-1)
    else:
        tokens = torch.multinomial(weights, 1, generator=rng).squeeze(-1)
    return tokens, log_p.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def _left_pad(prompts: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
    """(input_ids, attention_mask, position_ids), each ``(B, L)``, prompts aligned to the right."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, p in enumerate(prompts):
        ids[row, width - len(p) :] = torch.as_tensor(list(p), dtype=torch.long)
        mask[row, width - len(p) :] = 1
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    return ids.to(device), mask.to(device), positions.to(device)


class HFGenerator:
    """:class:`~agents.generation.base.Generator` over a :class:`~agents.policy.PolicyModel`'s own module."""

    def __init__(self, policy: PolicyModel, *, max_batch_size: int = 64):
        self.policy = policy
        self.max_batch_size = max_batch_size
        """Prompts per forward batch; larger inputs are generated in chunks."""
        # transformers renamed the cache argument (``past_key_values`` → ``cache``, 5.x): adapt once, here.
        forward_params = inspect.signature(policy.model.forward).parameters
        self._cache_arg = "cache" if "cache" in forward_params else "past_key_values"
        self.drafts = DraftMemory()
        """The responses of the current batch of episodes, where ``GenerationParams.draft_tokens`` drafts come from."""

    def reset(self) -> None:
        """A new batch of episodes: forget the earlier responses (drafts then depend on this batch alone)."""
        self.drafts.clear()

    def push_weights(self, model: Any) -> None:
        """No copy when ``model`` is this generator's policy (the usual case); else load its weights
        (a module, a PolicyModel, or a state dict such as ``strategy.full_state_dict(actor)``)."""
        if isinstance(model, Mapping):
            self.policy.model.load_state_dict(model)
            return
        source = model.model if isinstance(model, PolicyModel) else model
        if source is not self.policy.model:
            self.policy.model.load_state_dict(source.state_dict())

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], params: GenerationParams, constraints: Sequence[Any] | None = None
    ) -> list[GenerationOutput]:
        check_prompts(prompt_ids, constraints)
        rng = None
        if params.seed is not None:
            rng = torch.Generator(device=self.policy.device).manual_seed(params.seed)
        model = self.policy.model
        was_training = model.training
        model.eval()
        try:
            outputs: list[GenerationOutput] = []
            for start in range(0, len(prompt_ids), self.max_batch_size):
                chunk = slice(start, start + self.max_batch_size)
                outputs += self._generate_chunk(
                    prompt_ids[chunk], params, rng, None if constraints is None else constraints[chunk]
                )
            return outputs
        finally:
            model.train(was_training)

    @torch.inference_mode()
    def _generate_chunk(
        self,
        prompts: Sequence[Sequence[int]],
        params: GenerationParams,
        rng: torch.Generator | None,
        constraints: Sequence[Any] | None,
    ) -> list[GenerationOutput]:
        policy = self.policy
        rows = _Responses(
            response_budgets(prompts, params, policy.context_length),
            list(constraints) if constraints is not None else [None] * len(prompts),
        )
        active = [i for i, budget in enumerate(rows.budgets) if budget > 0]
        if active and params.draft_tokens:
            self._speculative_loop(prompts, active, rows, params, rng)
        elif active:
            self._decode_loop(prompts, active, rows, params, rng)
        for tokens in rows.tokens:
            self.drafts.remember(tokens)
        return [
            GenerationOutput(
                tokens,
                lps,
                policy.decode(tokens),
                truncated=not stopped,
                value_logits=rows.readout(i),
                allowed_tokens=rows.allowed[i] if c is not None else None,
                constraint_fallback=bool(c is not None and c.fallback),
                prompt_ids=list(prompt),
            )
            for i, (prompt, tokens, lps, stopped, c) in enumerate(
                zip(prompts, rows.tokens, rows.log_probs, rows.stopped, rows.constraints)
            )
        ]

    def _decode_loop(
        self,
        prompts: Sequence[Sequence[int]],
        active: list[int],
        rows: _Responses,
        params: GenerationParams,
        rng: torch.Generator | None,
    ) -> None:
        """Prefill the ``active`` rows, then sample until each one stopped or used its budget.

        With ``params.value_logits`` a finished row stays in the batch for one more forward pass that
        feeds its last token, whose logits hold Q's readout; it samples nothing there, so the draws
        are the same as without it."""
        policy, eos = self.policy, set(self.policy.eos_token_ids)
        readout = list(policy.value_token_ids) if params.value_logits else None
        mask, pos, cache, last = self._prefill(prompts, active)
        pos = pos[:, -1:]
        if readout:
            rows.read(active, last[:, readout], at_end=False)
        sampling = [True] * len(active)  # False: a finished row whose last token was just fed
        while True:
            if readout and not all(sampling):
                closing = [j for j, s in enumerate(sampling) if not s]
                rows.read([active[j] for j in closing], last[closing][:, readout], at_end=True)
            drawn = [j for j, s in enumerate(sampling) if s]
            if not drawn:
                return
            next_tok, next_lp = sample_next(
                last[drawn],
                policy.value_token_ids,
                params,
                rng,
                rows.allowed_now([active[j] for j in drawn], last.device),
            )
            going = {j: rows.add(active[j], t, lp, eos) for j, t, lp in zip(drawn, next_tok.tolist(), next_lp.tolist())}
            keep = [j for j in drawn if going[j] or readout is not None]  # a finished row still feeds its last token
            if not keep:
                return
            if len(keep) < len(active):  # drop finished rows from the batch and the cache
                index = torch.as_tensor(keep, device=mask.device)
                cache.batch_select_indices(index)
                mask, pos = mask[index], pos[index]
                active = [active[j] for j in keep]
            sampling = [going[j] for j in keep]
            fed = torch.as_tensor([rows.tokens[i][-1] for i in active], device=mask.device)
            mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
            pos = pos + 1
            last = policy.model(
                input_ids=fed.unsqueeze(-1),
                attention_mask=mask,
                position_ids=pos,
                use_cache=True,
                **{self._cache_arg: cache},
            ).logits[:, -1]

    def _speculative_loop(
        self,
        prompts: Sequence[Sequence[int]],
        active: list[int],
        rows: _Responses,
        params: GenerationParams,
        rng: torch.Generator | None,
    ) -> None:
        """:meth:`_decode_loop` with drafts (:mod:`agents.generation.speculative`): each forward feeds a row's
        last drawn token and up to ``params.draft_tokens`` draft tokens; draft tokens not kept stay in the cache as
        masked holes, and positions count kept tokens only, so every row attends to exactly its own tokens."""
        policy, eos = self.policy, set(self.policy.eos_token_ids)
        readout = list(policy.value_token_ids) if params.value_logits else None
        mask, pos, cache, head = self._prefill(prompts, active)  # head: the first token's logits, per row
        pos = pos[:, -1]
        if readout:
            rows.read(active, head[:, readout], at_end=False)
        pending: list[int | None] = [None] * len(active)  # each row's last drawn token, not yet fed
        while active:
            plans = [([], [None]) if rows.finished(r) else self._draft(r, rows, params.draft_tokens) for r in active]
            feeds = [([] if p is None else [p]) + draft for p, (draft, _) in zip(pending, plans)]
            width, out = max(len(f) for f in feeds), None
            if width:
                mask, out = self._feed_block(feeds, width, mask, pos, cache)
            keep = []
            for j, r in enumerate(active):
                lead = 0 if pending[j] is None else 1
                if rows.finished(r):  # only here to feed its last token: Q's readout
                    rows.read([r], out[j, 0:1, readout], at_end=True)  # type: ignore[index]
                    continue
                draft, allowed = plans[j]
                first = out[j, :1] if lead else head[j : j + 1]  # type: ignore[index]
                logits = torch.cat([first, out[j, lead : lead + len(draft)]]) if draft else first  # type: ignore[index]
                emitted, log_probs = accept_draft(logits, draft, allowed, policy.value_token_ids, params, rng)
                added = rows.extend(r, emitted, log_probs, allowed, eos)
                kept = min(added, len(emitted) - 1)  # draft tokens kept: fed, real; the rest of the block is a hole
                if width:
                    mask[j, mask.shape[1] - width + lead + kept :] = 0
                pos[j] += lead + kept
                if rows.finished(r) and added == kept:  # ended on a fed draft token: its logits hold Q's readout
                    if readout:
                        rows.read([r], out[j, lead + added - 1 : lead + added, readout], at_end=True)  # type: ignore[index]
                    continue
                if rows.finished(r) and not readout:
                    continue
                pending[j] = emitted[added - 1]
                keep.append(j)
            if len(keep) < len(active) and keep:
                index = torch.as_tensor(keep, device=mask.device)
                cache.batch_select_indices(index)
                mask, pos = mask[index], pos[index]
            active, pending = [active[j] for j in keep], [pending[j] for j in keep]

    def _prefill(
        self, prompts: Sequence[Sequence[int]], active: list[int]
    ) -> tuple[Tensor, Tensor, DynamicCache, Tensor]:
        """Feed the ``active`` rows' prompts, left-padded, into a new cache: (attention mask and position ids, each
        ``(B, L)``, the cache, and the logits ``(B, V)`` at each prompt's end, which choose the row's first token)."""
        policy = self.policy
        ids, mask, pos = _left_pad([prompts[i] for i in active], policy.pad_token_id, policy.device)
        cache = DynamicCache()
        out = policy.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=pos,
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_arg: cache},
        )
        return mask, pos, cache, out.logits[:, -1]

    def _feed_block(
        self, feeds: list[list[int]], width: int, mask: Tensor, pos: Tensor, cache: DynamicCache
    ) -> tuple[Tensor, Tensor]:
        """Feed row ``j`` the tokens ``feeds[j]`` at the positions after ``pos[j]``, right-padded to ``width`` with
        the padding masked: (the attention mask grown by ``width`` columns, the logits ``(B, width, V)``)."""
        block = torch.full((len(feeds), width), self.policy.pad_token_id, dtype=torch.long)
        fed = torch.zeros((len(feeds), width), dtype=mask.dtype)
        for j, f in enumerate(feeds):
            block[j, : len(f)], fed[j, : len(f)] = torch.as_tensor(f, dtype=torch.long), 1
        mask = torch.cat([mask, fed.to(mask.device)], dim=1)
        steps = torch.arange(1, width + 1, device=pos.device)
        out = self.policy.model(
            input_ids=block.to(mask.device),
            attention_mask=mask,
            position_ids=pos[:, None] + steps,
            use_cache=True,
            **{self._cache_arg: cache},
        ).logits
        return mask, out

    def _draft(self, r: int, rows: _Responses, k: int) -> tuple[list[int], list[tuple[int, ...] | None]]:
        """Row ``r``'s draft (from :attr:`drafts`, cut where its constraint forbids a token and where its budget
        ends: the draft and one drawn token must fit) and the allowed ids at each of its ``len(draft) + 1`` draws."""
        left = rows.budgets[r] - len(rows.tokens[r])
        proposal = self.drafts.propose(rows.tokens[r], min(k, left - 1))
        constraint = rows.constraints[r]
        state = constraint.copy() if constraint is not None else None
        allowed, draft = [state.allowed() if state is not None else None], []
        for token in proposal:
            if allowed[-1] is not None and token not in allowed[-1]:
                break
            draft.append(token)
            if state is not None:
                state.advance(token)
            allowed.append(state.allowed() if state is not None else None)
        return draft, allowed


@dataclass
class _Responses:
    """The responses of one chunk as they grow, indexed by prompt."""

    budgets: list[int]
    constraints: list[Any]
    """Per prompt: its :class:`~agents.constraint.ActionConstraint`, or None (free decoding)."""
    tokens: list[list[int]] = field(init=False)
    log_probs: list[list[float]] = field(init=False)
    stopped: list[bool] = field(init=False)
    value_logits: list[list[tuple[float, float]]] = field(init=False)
    """Per prompt: the (z_w⁺, z_w⁻) read so far (at the last prompt token, then at the last response token)."""
    allowed: list[list[tuple[int, ...] | None]] = field(init=False)
    """Per prompt and response token: the ids its constraint allowed (None: free)."""

    def __post_init__(self) -> None:
        n = len(self.budgets)
        self.tokens, self.log_probs, self.stopped = [[] for _ in range(n)], [[] for _ in range(n)], [False] * n
        self.value_logits = [[] for _ in range(n)]
        self.allowed = [[] for _ in range(n)]

    def allowed_now(self, rows: list[int], device: torch.device) -> Tensor | None:
        """``(len(rows), W)`` ids the next token of each row may take (:func:`allowed_matrix`), or None if all free."""
        now = [c.allowed() if c is not None else None for c in (self.constraints[r] for r in rows)]
        for r, ids in zip(rows, now):
            self.allowed[r].append(ids)
        return allowed_matrix(now, device) if any(a is not None for a in now) else None

    def read(self, rows: list[int], pairs: Tensor, at_end: bool) -> None:
        """Record ``pairs (len(rows), 2)``, the w⁺/w⁻ logits of these rows at one readout position."""
        for row, pair in zip(rows, pairs.float().tolist()):
            assert len(self.value_logits[row]) == int(at_end)
            self.value_logits[row].append((pair[0], pair[1]))

    def readout(self, row: int) -> tuple[tuple[float, float], tuple[float, float]] | None:
        pairs = self.value_logits[row]
        return (pairs[0], pairs[1]) if len(pairs) == 2 else None

    def finished(self, row: int) -> bool:
        """The row ended its response (an end token) or used its budget."""
        return self.stopped[row] or len(self.tokens[row]) >= self.budgets[row]

    def extend(
        self, row: int, tokens: list[int], log_probs: list[float], allowed: list[tuple[int, ...] | None], eos: set[int]
    ) -> int:
        """Append drawn tokens (with the ids the constraint allowed at each) until the row ends; how many were added."""
        for n, (token, lp) in enumerate(zip(tokens, log_probs)):
            self.allowed[row].append(allowed[n])
            if not self.add(row, token, lp, eos):
                return n + 1
        return len(tokens)

    def add(self, row: int, token: int, log_prob: float, eos: set[int]) -> bool:
        """Append one sampled token; True while the row goes on (no end token, budget left)."""
        self.tokens[row].append(token)
        self.log_probs[row].append(log_prob)
        if self.constraints[row] is not None:
            self.constraints[row].advance(token)
        self.stopped[row] = token in eos
        return not self.stopped[row] and len(self.tokens[row]) < self.budgets[row]
