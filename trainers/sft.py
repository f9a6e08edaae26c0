"""Behaviour-cloning warm start: teach the policy a teacher's turns before RL.

The teacher (``ExpertAgent`` by default: the env's oracle) plays episodes through the same
``make_vec`` members and prompts the RL rollout uses, so the policy imitates exactly the
(prompt → output) pairs it will later see. Only format-valid teacher turns are kept. The loss is
the token-level negative log-likelihood of the teacher's output (and the end-of-turn token) under
the policy *without* the value tokens w⁺/w⁻, the distribution RL samples from, at temperature 1: the clone fits
the model's own logits, and RL's sampling temperature (``--temperature``) is a decoding choice on top of them, as
in verl's and TRL's SFT trainers. (A clone fitted at 0.7 would sample at 0.7 what a clone fitted at 1 samples at 1, so
the sharper rollouts that lift ALFWorld-Mini, docs/results-log.md, would be out of reach.)

With ``sft_agent="random"`` (random admissible actions) the warm start teaches the output format
only: success stays at chance, which is what the learning test wants to start from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from agents.generation.base import GenerationOutput
from trainers.config import TrainConfig
from trainers.core_algos import masked_mean
from trainers.experience import Experience, TurnRecord, micro_batches
from trainers.forward import action_log_probs, forward_positions
from trainers.rollout import collect, make_train_vec

__all__ = ["Demonstration", "collect_demonstrations", "clone_step", "behaviour_clone", "warm_start"]


@dataclass(frozen=True)
class Demonstration:
    prompt: str
    """The prompt the teacher acted on (as the env rendered it)."""
    output: str
    """The teacher's raw output (``<think>…</think><action>…</action>``)."""


def collect_demonstrations(
    cfg: TrainConfig, env_kwargs: dict[str, Any], teacher: Any, episodes: int
) -> list[Demonstration]:
    """Play ``episodes`` teacher episodes (16 envs at a time) and keep its format-valid turns."""
    width = min(16, episodes)
    vec = make_train_vec(cfg.env, width, 1, cfg.seed + 7919, **env_kwargs)
    demos: list[Demonstration] = []
    try:
        for round_ in range(math.ceil(episodes / width)):
            teacher.reset(width)
            rollout = collect(vec, teacher.act, episode=round_, seed=cfg.seed)
            demos += [Demonstration(t.prompt, t.output) for t in rollout.turns if not t.invalid]
    finally:
        vec.close()
    return demos


def _batch(policy: Any, demos: list[Demonstration]) -> Experience:
    """Prompts through the policy's chat template; outputs as the model would emit them (+ end of turn)."""
    prompts = policy.encode_prompts([d.prompt for d in demos]).token_ids
    end_of_turn = policy.tokenizer.eos_token_id
    turns = []
    for i, (prompt_ids, demo) in enumerate(zip(prompts, demos)):
        response = list(policy.tokenizer(demo.output, add_special_tokens=False)["input_ids"]) + [end_of_turn]
        output = GenerationOutput(response, [0.0] * len(response), demo.output, False, prompt_ids=prompt_ids)
        turns.append(TurnRecord(demo.prompt, output, 0.0, False, False, i, 0))
    return Experience.collate(turns, policy.pad_token_id)


def clone_step(
    policy: Any, mb: Experience, micro_batch_size: int, *, by_length: bool = False, temperature: float = 1.0
) -> float:
    """Backpropagate one minibatch's NLL (the token mean of its output tokens) in micro-batches of
    ``micro_batch_size`` rows, longest first when ``by_length``, so that each is padded to its own longest row.
    Each micro-batch's token mean is weighted by its share of the tokens: the gradient is the minibatch's.
    Returns the minibatch's loss."""
    value_ids, total, loss = tuple(policy.value_token_ids), int(mb.action_mask.sum()), 0.0
    for micro in micro_batches(mb, micro_batch_size, by_length):
        logits = forward_positions(policy.model, micro)
        part = -masked_mean(action_log_probs(logits, micro, value_ids, temperature), micro.action_mask)
        share = part * (
            int(micro.action_mask.sum()) / max(1, total)
        )  # 1.0 exactly when one micro-batch is the minibatch
        share.backward()
        loss += float(share.detach())
    return loss


def behaviour_clone(
    policy: Any,
    demos: list[Demonstration],
    *,
    epochs: int,
    lr: float,
    batch_size: int = 16,
    seed: int = 0,
    temperature: float = 1.0,
    micro_batch_size: int | None = None,
    by_length: bool = False,
) -> list[float]:
    """Minimize the NLL of the demonstrations' output tokens; returns the mean loss of each epoch.

    Each optimizer step is one shuffled minibatch of ``batch_size`` turns, run in micro-batches of
    ``micro_batch_size`` (default: the minibatch), longest turns together when ``by_length`` (:func:`clone_step`):
    the same steps, less padding."""
    if not demos:
        raise ValueError("no format-valid demonstrations to clone")
    device = next(policy.model.parameters()).device
    data = _batch(policy, demos).to(device)
    optimizer = torch.optim.AdamW([p for p in policy.model.parameters() if p.requires_grad], lr=lr)
    shuffle = torch.Generator().manual_seed(seed)
    history = []
    for _ in range(epochs):
        losses = []
        for mb in data.minibatches(batch_size, generator=shuffle):
            optimizer.zero_grad(set_to_none=True)
            losses.append(
                clone_step(policy, mb, micro_batch_size or batch_size, by_length=by_length, temperature=temperature)
            )
            torch.nn.utils.clip_grad_norm_(policy.model.parameters(), 1.0)
            optimizer.step()
        history.append(sum(losses) / len(losses))
    return history


def warm_start(policy: Any, cfg: TrainConfig, env_kwargs: dict[str, Any]) -> list[float]:
    """Collect ``cfg.sft_episodes`` episodes of ``cfg.sft_agent`` and clone them (``cfg.sft_*``) at temperature 1,
    whatever ``cfg.temperature`` RL samples at."""
    from agents.registry import load_agent

    demos = collect_demonstrations(cfg, env_kwargs, load_agent(cfg.sft_agent, seed=cfg.seed), cfg.sft_episodes)
    return behaviour_clone(
        policy,
        demos,
        epochs=cfg.sft_epochs,
        lr=cfg.sft_lr,
        seed=cfg.seed,
        micro_batch_size=cfg.micro_batch_size,
        by_length=cfg.group_by_length,
    )  # at temperature 1
