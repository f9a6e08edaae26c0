"""The typed batch the trainers learn from: one row per env turn (verl-agent layout).

A row is the prompt tokens (the chat-templated observation) followed by the response tokens (the
model's output), right-padded. :class:`TurnRecord` is one turn as the rollout records it: the sampler's
:class:`~agents.generation.base.GenerationOutput` (prompt and response token ids, log-probs, allowed tokens,
value logits) and what the env answered; :meth:`Experience.collate` pads a list of them into tensors.
Trajectory ids and turn indices travel with every row through :meth:`Experience.select`,
:meth:`Experience.minibatches` and :meth:`Experience.cat`, so targets can be rebuilt per trajectory at any point.

Every field of :class:`Experience` declares its shape role (``field(metadata={"role": ...})``, one of
:data:`TOKEN`, :data:`TOKEN_SET`, :data:`TURN`, :data:`READOUT`) and, for token-level fields, its padding:
the shape check, :meth:`Experience.cat` and :meth:`Experience.trim` read them from the field.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import torch
from torch import Tensor

from agents.constraint import allowed_matrix
from agents.generation.base import GenerationOutput

__all__ = ["TurnRecord", "Experience", "micro_batches", "anchor_id", "TOKEN", "TOKEN_SET", "TURN", "READOUT"]

TOKEN, TOKEN_SET, TURN, READOUT = "token", "token_set", "turn", "readout"
"""Shape roles: ``(B, T)`` per token, ``(B, T, W)`` a set of token ids per token, ``(B,)`` per turn, ``(B, 2, 2)``
SAPO's two readout positions × (w⁺, w⁻)."""
PAD_ID = "pad_id"
"""The ``pad`` of a token field padded with the tokenizer's pad id (``pad_id`` of :meth:`Experience.cat`)."""
_CAST = {torch.float32: float, torch.bool: bool, torch.long: int}


def anchor_id(group_id: int, observation: str) -> int:
    """GiGPO's anchor-state id of a turn: a 63-bit hash (BLAKE2b) of its task group and raw observation.

    Equal (group, observation) pairs get equal ids in every batch, process and rank (not Python's salted
    ``hash``), so ids from separately collated batches agree; distinct pairs collide with probability
    ~B²/2⁶⁴ per batch."""
    digest = hashlib.blake2b(f"{int(group_id)}\x00{observation}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


@dataclass
class TurnRecord:
    """One env turn, from the rollout to the batch: what the agent saw and wrote, and what the env answered."""

    prompt: str
    """The observation (prompt text) the agent acted on."""
    output: GenerationOutput | str
    """The agent's output: an LLM policy's :class:`~agents.generation.base.GenerationOutput` (what the batch is
    built from), or a text agent's raw text (a teacher's demonstrations)."""
    reward: float
    """Env reward of the turn (no invalid-action penalty: SAPO adds c_inv in normalization)."""
    done: bool
    """The episode TERMINATED at this turn (won or lost); a horizon truncation is not done."""
    invalid: bool
    """The output was format-invalid (``info["is_action_valid"]`` False)."""
    traj_id: int
    """Trajectory id, unique within a batch."""
    turn_idx: int
    """0-based turn index within the trajectory."""
    group_id: int = 0
    """Task group (GRPO: the members of a group played the same task)."""
    anchor: str | None = None
    """The env's raw observation at this turn (``info["raw_observation"]``, the backend's own text, not the rendered
    prompt with its step counter and history): GiGPO's anchor state. Turns of one group with equal anchors are
    grouped (:meth:`Experience.collate` hashes (group_id, anchor) into ``anchor_ids``)."""


def _field(
    role: str,
    *,
    pad: int | str = 0,
    source: str | None = None,
    dtype: torch.dtype | None = None,
    optional: bool = False,
) -> Any:
    """A batch field with its shape ``role``; token fields pad with ``pad``; a turn field collated straight from
    :class:`TurnRecord` names its ``source`` attribute and ``dtype``. ``optional``: None until a phase sets it."""
    meta = {"role": role, "pad": pad, "source": source, "dtype": dtype}
    return field(default=None, metadata=meta) if optional else field(metadata=meta)


@dataclass
class Experience:
    """A padded batch of turns. Shapes: ``B`` turns, ``T`` padded tokens."""

    input_ids: Tensor = _field(TOKEN, pad=PAD_ID)
    """(B, T) long: prompt ⊕ response, right-padded with the pad id."""
    attention_mask: Tensor = _field(TOKEN)
    """(B, T) bool: real tokens."""
    action_mask: Tensor = _field(TOKEN)
    """(B, T) bool: response tokens that are trained (the action)."""
    prompt_lengths: Tensor = _field(TURN)
    """(B,) long: prompt tokens; the last prompt token (V readout) is at ``prompt_lengths - 1``."""
    response_lengths: Tensor = _field(TURN)
    """(B,) long: response tokens; the last one (Q readout) is at ``prompt_lengths + response_lengths - 1``."""
    old_log_probs: Tensor = _field(TOKEN)
    """(B, T) float: log π_old(a_k | ·) at response positions, 0 elsewhere."""
    rewards: Tensor = _field(TURN, source="reward", dtype=torch.float32)
    """(B,) float: r_t of the turn."""
    dones: Tensor = _field(TURN, source="done", dtype=torch.bool)
    """(B,) bool: the episode terminated at this turn."""
    invalid: Tensor = _field(TURN, source="invalid", dtype=torch.bool)
    """(B,) bool: format-invalid action."""
    traj_ids: Tensor = _field(TURN, source="traj_id", dtype=torch.long)
    """(B,) long: trajectory id."""
    turn_idx: Tensor = _field(TURN, source="turn_idx", dtype=torch.long)
    """(B,) long: turn index within the trajectory."""
    group_ids: Tensor = _field(TURN, source="group_id", dtype=torch.long)
    """(B,) long: task group."""
    anchor_ids: Tensor | None = _field(TURN, optional=True)
    """(B,) long: :func:`anchor_id` of (group, raw observation), equal for turns of one group that acted on the same
    env state (GiGPO's anchor groups); set by :meth:`collate` when every turn recorded its observation."""
    ref_log_probs: Tensor | None = _field(TOKEN, optional=True)
    """(B, T) float: log π_ref at response positions."""
    old_values: Tensor | None = _field(TURN, optional=True)
    """(B,) float: V_old(s_t) (SAPO readout or PPO critic)."""
    old_q: Tensor | None = _field(TURN, optional=True)
    """(B,) float: Q_old(s_t, a_t) (SAPO only)."""
    advantages: Tensor | None = _field(TURN, optional=True)
    """(B,) float: normalized turn advantage Â_t."""
    value_targets: Tensor | None = _field(TURN, optional=True)
    """(B,) float: y^V."""
    q_targets: Tensor | None = _field(TURN, optional=True)
    """(B,) float: y^Q."""
    allowed_tokens: Tensor | None = _field(TOKEN_SET, pad=-1, optional=True)
    """(B, T, W) long: under constrained decoding, the token ids allowed at each response position (``-1``
    padding; a row of ``-1`` is free). The losses restrict the policy's logits to them
    (:func:`agents.constraint.restrict_logits`), as the sampler did."""
    value_logits: Tensor | None = _field(READOUT, optional=True)
    """(B, 2, 2) float: the sampler's (z_w⁺, z_w⁻) at the V position (``[:, 0]``) and at the Q position
    (``[:, 1]``), when it kept them (SAPO with ``old_log_probs='rollout'``)."""

    def __post_init__(self) -> None:
        b, t = self.input_ids.shape
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, Tensor):
                continue
            role = f.metadata["role"]
            want = {
                TOKEN: (b, t),
                TURN: (b,),
                READOUT: (b, 2, 2),
                TOKEN_SET: (b, t, value.shape[-1] if value.dim() == 3 else 1),
            }[role]
            if tuple(value.shape) != want:
                raise ValueError(f"Experience.{f.name} has shape {tuple(value.shape)}, expected {want}")

    # ---- construction ---------------------------------------------------------------------
    @classmethod
    def collate(cls, turns: Sequence[TurnRecord], pad_id: int) -> Experience:
        """Pad turns into a batch, keeping their order (row i is ``turns[i]``)."""
        if not turns:
            raise ValueError("cannot collate an empty list of turns")
        outs = [_generation(turn) for turn in turns]
        lengths = [len(o.prompt_ids) + len(o.token_ids) for o in outs]
        b, t = len(turns), max(lengths)
        input_ids = torch.full((b, t), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((b, t), dtype=torch.bool)
        action_mask = torch.zeros((b, t), dtype=torch.bool)
        old_log_probs = torch.zeros((b, t), dtype=torch.float32)
        for i, o in enumerate(outs):
            p, r = len(o.prompt_ids), len(o.token_ids)
            input_ids[i, : p + r] = torch.tensor(o.prompt_ids + o.token_ids, dtype=torch.long)
            attention_mask[i, : p + r] = True
            action_mask[i, p : p + r] = True
            old_log_probs[i, p : p + r] = torch.tensor(o.log_probs, dtype=torch.float32)
        anchors = None
        if all(turn.anchor is not None for turn in turns):
            anchors = torch.tensor(
                [anchor_id(turn.group_id, turn.anchor) for turn in turns],  # type: ignore[arg-type]
                dtype=torch.long,
            )
        value_logits = None
        if all(o.value_logits is not None for o in outs):
            value_logits = torch.tensor([o.value_logits for o in outs], dtype=torch.float32)  # (B, 2, 2)
        return cls(
            input_ids=input_ids,
            attention_mask=attention_mask,
            action_mask=action_mask,
            prompt_lengths=torch.tensor([len(o.prompt_ids) for o in outs], dtype=torch.long),
            response_lengths=torch.tensor([len(o.token_ids) for o in outs], dtype=torch.long),
            old_log_probs=old_log_probs,
            **_turn_columns(cls, turns),
            anchor_ids=anchors,
            allowed_tokens=_allowed_tokens(outs, t),
            value_logits=value_logits,
        )

    @classmethod
    def cat(cls, parts: Sequence[Experience], pad_id: int) -> Experience:
        """Concatenate batches row-wise, right-padding token fields to the longest ``T`` (each with its own pad)."""
        t = max(p.input_ids.shape[1] for p in parts)
        merged = {}
        for f in fields(cls):
            values = [getattr(p, f.name) for p in parts]
            role, fill = f.metadata["role"], pad_id if f.metadata["pad"] == PAD_ID else f.metadata["pad"]
            if all(v is None for v in values):
                merged[f.name] = None
            elif any(v is None for v in values):
                raise ValueError(f"field {f.name} is set in some parts and not in others")
            elif role == TOKEN_SET:
                w = max(v.shape[2] for v in values)
                merged[f.name] = torch.cat(
                    [torch.nn.functional.pad(v, (0, w - v.shape[2], 0, t - v.shape[1]), value=fill) for v in values]
                )
            elif role == TOKEN:
                merged[f.name] = torch.cat(
                    [torch.nn.functional.pad(v, (0, t - v.shape[1]), value=fill) for v in values]
                )
            else:
                merged[f.name] = torch.cat(values)
        return cls(**merged)

    # ---- views ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.input_ids.shape[0]

    @property
    def num_action_tokens(self) -> int:
        return int(self.action_mask.sum())

    @property
    def state_positions(self) -> Tensor:
        """(B,) index of the last prompt token: where V(s_t) is read."""
        return self.prompt_lengths - 1

    @property
    def action_end_positions(self) -> Tensor:
        """(B,) index of the last response token: where Q(s_t, a_t) is read.

        An empty response falls back to the last prompt token (then Q is read where V is).
        """
        return self.prompt_lengths - 1 + self.response_lengths

    def _map(self, fn) -> Experience:
        changes = {f.name: fn(getattr(self, f.name)) for f in fields(self) if isinstance(getattr(self, f.name), Tensor)}
        return replace(self, **changes)

    def to(self, device: torch.device | str) -> Experience:
        """Move every tensor to ``device``."""
        return self._map(lambda x: x.to(device))

    def select(self, idx: Tensor | Sequence[int]) -> Experience:
        """Rows ``idx`` (in that order), every field included; ``T`` unchanged."""
        idx = torch.as_tensor(idx, dtype=torch.long, device=self.input_ids.device)
        return self._map(lambda x: x[idx])

    def trim(self) -> Experience:
        """Drop trailing token columns that are padding in every row (cheaper forward passes)."""
        t = int(self.attention_mask.any(0).nonzero().max()) + 1 if self.attention_mask.any() else 1
        changes = {
            f.name: getattr(self, f.name)[:, :t]
            for f in fields(self)
            if f.metadata["role"] in (TOKEN, TOKEN_SET) and getattr(self, f.name) is not None
        }
        return replace(self, **changes)

    def longest_first(self) -> Experience:
        """The rows sorted by length, longest first (ties keep their order): consecutive rows pad alike."""
        return self.select(torch.sort(self.attention_mask.sum(1), descending=True, stable=True).indices)

    def minibatches(
        self, size: int, generator: torch.Generator | None = None, shuffle: bool = True
    ) -> Iterator[Experience]:
        """Yield trimmed minibatches of ``size`` rows, the last one holding the rest (shuffled with ``generator`` when
        ``shuffle``)."""
        if size <= 0:
            raise ValueError("minibatch size must be positive")
        n = len(self)
        order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
        for start in range(0, n, size):
            yield self.select(order[start : start + size]).trim()


def micro_batches(exp: Experience, size: int, by_length: bool = False) -> Iterator[Experience]:
    """Consecutive, trimmed chunks of ``size`` rows: in the batch's order, or, when ``by_length``, longest rows first
    (ties in the batch's order), so that each chunk is padded to its own longest row, not to the batch's."""
    yield from (exp.longest_first() if by_length else exp).minibatches(size, shuffle=False)


def _generation(turn: TurnRecord) -> GenerationOutput:
    """The sampled turn a batch row is built from (a text agent's turn has no tokens to train on)."""
    if not isinstance(turn.output, GenerationOutput):
        raise TypeError(
            f"turn {turn.traj_id}.{turn.turn_idx} has no token ids to train on: its output is a "
            f"{type(turn.output).__name__}, not a GenerationOutput"
        )
    return turn.output


def _turn_columns(cls: type[Experience], turns: Sequence[TurnRecord]) -> dict[str, Tensor]:
    """The (B,) fields read straight off the records: each names its ``source`` attribute and ``dtype``."""
    columns = {}
    for f in fields(cls):
        source, dtype = f.metadata["source"], f.metadata["dtype"]
        if source is not None:
            columns[f.name] = torch.tensor([_CAST[dtype](getattr(turn, source)) for turn in turns], dtype=dtype)
    return columns


def _allowed_tokens(outs: Sequence[GenerationOutput], t: int) -> Tensor | None:
    """(B, T, W) long: each response position's allowed ids, ``-1`` padded (None: no turn was constrained)."""
    if all(o.allowed_tokens is None for o in outs):
        return None
    width = max([len(ids) for o in outs for ids in (o.allowed_tokens or ()) if ids], default=0) or 1
    allowed = torch.full((len(outs), t, width), -1, dtype=torch.long)
    for i, o in enumerate(outs):
        if o.allowed_tokens:
            p = len(o.prompt_ids)
            allowed[i, p : p + len(o.allowed_tokens)] = allowed_matrix(o.allowed_tokens, width=width)
    return allowed
