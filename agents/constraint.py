"""Admissible-action constrained decoding: inside ``<action>…</action>`` only admissible actions.

``--constrain admissible`` turns the free choice of action tokens into a choice among the turn's
``info["admissible_actions"]``. Decoding is free until the response reaches ``<action>``; from there
each token must continue one of the admissible actions followed by ``</action>`` (a token trie per
turn over the canonical tokenization of ``action + "</action>"``); once an action and its closing
tag are complete, decoding is free again (the model ends its turn). Where only one token continues
the trie (the rest of a long name, the closing tag) that token is forced: its probability is 1.

**The same mask everywhere.** The sampler records, per response token, the token ids it allowed
(``None`` where decoding was free). The trainer keeps them in ``Experience.allowed_tokens`` and
applies :func:`restrict_logits` to the logits of old log-probs, current log-probs, the reference's
log-probs and the entropy, so every importance ratio compares the same distribution the sampler drew
from — the discipline the trainers already follow for SAPO's w⁺/w⁻.

**Templates.** An admissible action whose bracket holds only a placeholder (WebShop's
``search[<your query>]``) is a template: the env takes any text in its place. Its fixed prefix
(``search[``) is constrained like any other action; from the end of that prefix decoding is free, so
the model writes the query itself (nothing in the constraint hands it one) and closes the action; the
env's parser judges what it wrote. The prefix is tokenized on its own: a tokenizer that would merge the
bracket with the query's first characters sees the bracket as its own token here.

**Fallback.** A turn without a usable admissible list (missing, empty, or not a list of non-empty
strings) is decoded freely and flagged (:attr:`ActionConstraint.fallback`); decoding never crashes
on it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["CONSTRAINTS", "ActionConstraint", "ConstraintBuilder", "restrict_logits", "allowed_matrix"]

CONSTRAINTS = ("none", "admissible")
"""``none``: free decoding. ``admissible``: actions restricted to ``info["admissible_actions"]``."""

OPEN_TAG, CLOSE_TAG = "<action>", "</action>"
TEMPLATE = re.compile(r"^([^\[\]<>]+\[)<[^<>\[\]]+>\]$")
"""An action whose bracket holds only a placeholder (``search[<your query>]``); group 1 is its fixed prefix."""


@dataclass
class _Node:
    children: dict[int, _Node] = field(default_factory=dict)
    slot: bool = False
    """A template's prefix ends here: decoding is free from this node on."""


def _trie(sequences: Sequence[Sequence[int]], slots: Sequence[Sequence[int]] = ()) -> _Node:
    root = _Node()
    for seq, slot in [*((s, False) for s in sequences), *((s, True) for s in slots)]:
        node = root
        for token in seq:
            node = node.children.setdefault(int(token), _Node())
        node.slot = node.slot or slot
    return root


class ActionConstraint:
    """The per-turn state machine of one response: free → inside the action trie → free (done).

    Feed every sampled token with :meth:`advance`; :meth:`allowed` says which tokens the next one may
    be (``None``: any). ``fallback`` is True when the turn had no usable admissible list.
    """

    def __init__(self, root: _Node | None, open_ids: tuple[int, ...], is_open_text: Any):
        self._root, self._open_ids, self._is_open = root, open_ids, is_open_text
        self.fallback = root is None
        self._node: _Node | None = None  # inside the action: the current trie node
        self._done = self.fallback
        self._recent: list[int] = []

    def copy(self) -> ActionConstraint:
        """An independent copy of this state: advancing one leaves the other as it was (the trie and the
        tag test are shared; neither is ever modified)."""
        other = copy.copy(self)
        other._recent = list(self._recent)
        return other

    def allowed(self) -> tuple[int, ...] | None:
        """Token ids the next token may take (sorted), or None when decoding is free."""
        if self._node is None:
            return None
        return tuple(sorted(self._node.children))

    def advance(self, token: int) -> None:
        """Record the sampled ``token`` (it must be allowed while inside the action)."""
        if self._node is not None:
            nxt = self._node.children.get(int(token))
            if nxt is None:
                raise ValueError(f"token {token} is outside the admissible-action trie")
            self._node = nxt if nxt.children and not nxt.slot else None
            self._done = self._node is None
            return
        if self._done:
            return
        self._recent.append(int(token))
        if self._entered():
            self._node = self._root

    def _entered(self) -> bool:
        """The response so far ends with the opening tag, on a token boundary."""
        n = len(self._open_ids)
        if n and tuple(self._recent[-n:]) == self._open_ids:
            return True
        return self._is_open(self._recent)


class ConstraintBuilder:
    """Builds one :class:`ActionConstraint` per turn for a tokenizer (tries are cached per action list)."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self._open_ids = tuple(tokenizer(OPEN_TAG, add_special_tokens=False)["input_ids"])
        self._cache: dict[tuple[str, ...], _Node] = {}

    def _ids(self, texts: list[str]) -> list[list[int]]:
        return list(self.tokenizer(texts, add_special_tokens=False)["input_ids"]) if texts else []

    def _ends_with_open_tag(self, recent: list[int]) -> bool:
        # Tokenizers whose "<action>" merges with its neighbours: decode the tail (rare; checked on '>').
        if not recent or ">" not in self.tokenizer.convert_ids_to_tokens(recent[-1]):
            return False
        return self.tokenizer.decode(recent[-8:], skip_special_tokens=False).endswith(OPEN_TAG)

    def build(self, admissible: Any) -> ActionConstraint:
        """The constraint of a turn whose admissible list is ``admissible`` (anything else: fallback)."""
        usable = (
            isinstance(admissible, (list, tuple))
            and admissible
            and all(isinstance(a, str) and a.strip() for a in admissible)
        )
        if not usable:
            return ActionConstraint(None, self._open_ids, self._ends_with_open_tag)
        key = tuple(admissible)
        root = self._cache.get(key)
        if root is None:
            # Lower-cased: the verl-agent parser lower-cases the action before the env sees it.
            actions = {a.strip().lower() for a in key}
            prefixes = sorted({m.group(1) for m in map(TEMPLATE.match, actions) if m})
            texts = sorted(a + CLOSE_TAG for a in actions if not TEMPLATE.match(a))
            root = _trie(self._ids(texts), self._ids(prefixes))
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = root
        return ActionConstraint(root, self._open_ids, self._ends_with_open_tag)


def allowed_matrix(allowed: Sequence[tuple[int, ...] | None], device: Any = "cpu", width: int = 0) -> Tensor:
    """Rows of allowed ids → ``(N, W)`` long, ``-1``-padded; a free row (None) is all ``-1``.

    ``W`` is ``width`` when given, else the longest row (at least 1)."""
    import torch

    width = width or max([len(a) for a in allowed if a is not None], default=0) or 1
    out = torch.full((len(allowed), width), -1, dtype=torch.long)
    for i, ids in enumerate(allowed):
        if ids:
            out[i, : len(ids)] = torch.as_tensor(ids, dtype=torch.long)
    return out.to(device)


def restrict_logits(logits: Tensor, allowed: Tensor | None) -> Tensor:
    """``(N, V)`` logits, ``(N, W)`` allowed ids (``-1`` padding; all ``-1``: free) → logits with ``−inf``
    outside each constrained row's allowed set; free rows unchanged. Out of place; pure.

    The ONE helper for sampling, old, current and reference log-probs and entropy under a constraint.
    """
    if allowed is None or allowed.numel() == 0 or not bool((allowed >= 0).any()):
        return logits
    import torch

    valid = allowed >= 0
    hits = torch.zeros(logits.shape, dtype=torch.int32, device=logits.device)
    hits.scatter_add_(-1, allowed.clamp(min=0), valid.to(torch.int32))  # padding adds 0 (at index 0)
    keep = (hits > 0) | ~valid.any(-1, keepdim=True)  # free rows keep every token
    return logits.masked_fill(~keep, float("-inf"))
