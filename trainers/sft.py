"""Behaviour-cloning warm start: teach the policy a teacher's turns before RL.

The teacher (``ExpertAgent`` by default: the env's oracle) plays episodes through the same
``make_vec`` members and prompts the RL rollout uses, so the policy imitates exactly the
(prompt → output) pairs it will later see. Only format-valid teacher turns are kept. The loss is
the token-level negative log-likelihood of the teacher's output (and the end-of-turn token) under
the policy *without* the value tokens w⁺/w⁻, the same distribution RL samples from.

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
from trainers.experience import Experience, TurnRecord
from trainers.forward import action_log_probs, forward_positions
from trainers.rollout import collect, make_train_vec

__all__ = ["Demonstration", "collect_demonstrations", "behaviour_clone", "warm_start"]


@dataclass(frozen=True)
class Demonstration:
    prompt: str
    """The prompt the teacher acted on (as the env rendered it)."""
    output: str
    """The teacher's raw output (``<think>…</think><action>…</action>``)."""


def collect_demonstrations(cfg: TrainConfig, env_kwargs: dict[str, Any], teacher: Any, episodes: int) -> list[Demonstration]:
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


def behaviour_clone(
    policy: Any, demos: list[Demonstration], *, epochs: int, lr: float, batch_size: int = 16, seed: int = 0,
    temperature: float = 1.0,
) -> list[float]:
    """Minimize the NLL of the demonstrations' output tokens; returns the mean loss of each epoch."""
    if not demos:
        raise ValueError("no format-valid demonstrations to clone")
    device = next(policy.model.parameters()).device
    data = _batch(policy, demos).to(device)
    optimizer = torch.optim.AdamW([p for p in policy.model.parameters() if p.requires_grad], lr=lr)
    shuffle = torch.Generator().manual_seed(seed)
    value_ids = tuple(policy.value_token_ids)
    history = []
    for _ in range(epochs):
        losses = []
        for mb in data.minibatches(batch_size, generator=shuffle):
            logits = forward_positions(policy.model, mb)
            loss = -masked_mean(action_log_probs(logits, mb, value_ids, temperature), mb.action_mask)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.model.parameters(), 1.0)
            optimizer.step()
            losses.append(float(loss.detach()))
        history.append(sum(losses) / len(losses))
    return history


def warm_start(policy: Any, cfg: TrainConfig, env_kwargs: dict[str, Any]) -> list[float]:
    """Collect ``cfg.sft_episodes`` episodes of ``cfg.sft_agent`` and clone them (``cfg.sft_*``)."""
    from agents.registry import load_agent

    demos = collect_demonstrations(cfg, env_kwargs, load_agent(cfg.sft_agent, seed=cfg.seed), cfg.sft_episodes)
    return behaviour_clone(policy, demos, epochs=cfg.sft_epochs, lr=cfg.sft_lr, seed=cfg.seed,
                           temperature=cfg.temperature)
