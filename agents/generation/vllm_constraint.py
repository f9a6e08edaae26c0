"""Admissible-action constraints inside vLLM: a V1 logits processor that runs each request's
:class:`~agents.constraint.ActionConstraint` (``--constrain admissible`` with ``--generator vllm``).

vLLM's V1 logits processors are batch-level: one instance per engine, told by :class:`BatchUpdate` which
request sits in which row of the logits (``added`` / ``removed`` / ``moved``), with a *reference* to each
request's running list of output tokens. A request opts in through ``SamplingParams.extra_args``:
``{CONSTRAINT_KEY: key}``, where ``key`` names an ActionConstraint the generator registered in this process
(:func:`registered`). For every opted-in row the processor feeds the tokens generated since the last step to
its own copy of that constraint (:meth:`ActionConstraint.advance`), asks :meth:`~ActionConstraint.allowed`,
and sets every other logit of the row to −inf with :func:`agents.constraint.restrict_logits`: the same
helper, trie and rule as the HF sampler and the trainer. It runs before temperature and sampling, and the
engine's ``processed_logprobs`` are taken after it, so the reported log-probs are the constrained ones.

**Same process only.** The constraint objects (a token trie and a tokenizer-backed tag test) are not
serialized to the engine: the processor looks them up here. That is exact and cheap in the colocated set-up
:class:`~agents.generation.vllm.VLLMGenerator` builds (tensor parallel 1: engine and worker in this
process), and impossible when the worker runs elsewhere; :attr:`AdmissibleActionLogitsProcessor.created`
lets the generator tell, and it refuses constraints then rather than decode freely.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor
from vllm.v1.sample.logits_processor.builtin import process_dict_updates

from agents.constraint import ActionConstraint, allowed_matrix, restrict_logits

__all__ = ["AdmissibleActionLogitsProcessor", "CONSTRAINT_KEY", "registered", "replay"]

CONSTRAINT_KEY = "sapo_gym_constraint"
"""Key in ``SamplingParams.extra_args`` naming the request's registered :class:`ActionConstraint`."""

_REGISTRY: dict[str, ActionConstraint] = {}
"""Registered constraints by key: the state each request starts from (never advanced itself)."""
_KEYS = itertools.count()


@contextlib.contextmanager
def registered(constraints: Sequence[ActionConstraint]) -> Iterator[list[str]]:
    """Register independent copies of ``constraints`` for the duration of one ``LLM.generate`` call;
    yields their keys (for ``extra_args``). A request re-added after preemption starts from the same copy."""
    keys = [f"c{next(_KEYS)}" for _ in constraints]
    _REGISTRY.update((k, c.copy()) for k, c in zip(keys, constraints))
    try:
        yield keys
    finally:
        for k in keys:
            _REGISTRY.pop(k, None)


def replay(constraint: ActionConstraint, tokens: Sequence[int]) -> list[tuple[int, ...] | None]:
    """Feed ``tokens`` to ``constraint``, recording before each one the ids it allowed (None: free): the
    record the HF sampler keeps for the same tokens. Raises if a token left the trie (the mask did not hold)."""
    allowed = []
    for token in tokens:
        allowed.append(constraint.allowed())
        constraint.advance(int(token))
    return allowed


@dataclass
class _Row:
    """One constrained request: its own constraint state and vLLM's running list of its output tokens."""

    constraint: ActionConstraint
    output: list[int]
    """A reference to the request's output token ids (vLLM appends to it; async placeholders are -1)."""
    seen: int = 0
    """How many of ``output`` the constraint has been fed."""

    def allowed_next(self) -> tuple[int, ...] | None:
        """Catch up on the tokens sampled since the last step; the ids the next token may take."""
        new = self.output[self.seen :]
        if any(t < 0 for t in new):  # vLLM resolves async placeholders before the sampler runs; never guess
            raise RuntimeError("the constraint saw an unresolved output-token placeholder")
        for token in new:
            self.constraint.advance(token)
        self.seen += len(new)
        return self.constraint.allowed()


class AdmissibleActionLogitsProcessor(LogitsProcessor):
    """Restricts each opted-in request's next token to what its :class:`ActionConstraint` allows."""

    created = 0
    """Instances made in this process (0 after the engine started: the worker runs elsewhere)."""

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool):
        AdmissibleActionLogitsProcessor.created += 1
        self.rows: dict[int, _Row] = {}
        """Batch row → state, for the constrained requests only."""

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        key = (sampling_params.extra_args or {}).get(CONSTRAINT_KEY)
        if key is not None and key not in _REGISTRY:
            raise ValueError(f"no admissible-action constraint registered under {key!r}")

    def is_argmax_invariant(self) -> bool:
        return False  # it changes greedy choices too

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        process_dict_updates(self.rows, batch_update, self._new_row)

    @staticmethod
    def _new_row(params: SamplingParams, prompt_ids: list[int] | None, output_ids: list[int]) -> _Row | None:
        key = (params.extra_args or {}).get(CONSTRAINT_KEY)
        if key is None:
            return None
        if key not in _REGISTRY:
            raise RuntimeError(f"admissible-action constraint {key!r} is not registered in this process")
        return _Row(_REGISTRY[key].copy(), output_ids)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.rows:
            return logits
        now = {i: row.allowed_next() for i, row in self.rows.items()}
        rows = [i for i, ids in now.items() if ids is not None]
        if rows:
            index = torch.as_tensor(rows, device=logits.device)
            logits[index] = restrict_logits(logits[index], allowed_matrix([now[i] for i in rows], logits.device))
        return logits
