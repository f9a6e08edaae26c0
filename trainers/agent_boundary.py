"""The trainer's boundary with ``agents/``: build the policy and the rollout agent, read its turns.

Everything model-specific the loop needs passes through these functions, so the loop and
the methods only see a :class:`~agents.policy.PolicyModel` and the agent's turns
(:class:`~agents.generation.base.GenerationOutput`, kept as :class:`~trainers.experience.TurnRecord` outputs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents.base import DetailedAgent
from trainers.config import TrainConfig

__all__ = ["build_policy", "build_generator", "build_agent"]


def build_policy(cfg: TrainConfig) -> Any:
    """``cfg.model``: 'tiny' (random-init tiny Qwen2, seeded), 'smollm2', or an HF model directory."""
    from agents.policy import PolicyModel

    if cfg.model == "tiny":
        hidden = cfg.tiny_hidden_size
        return PolicyModel.tiny(
            seed=cfg.seed,
            max_prompt_tokens=cfg.max_prompt_tokens,
            hidden_size=hidden,
            num_hidden_layers=cfg.tiny_layers,
            num_attention_heads=max(2, hidden // 64),
            intermediate_size=2 * hidden,
        )
    if cfg.model == "smollm2":
        return PolicyModel.smollm2(max_prompt_tokens=cfg.max_prompt_tokens)
    return PolicyModel.from_pretrained(cfg.model, max_prompt_tokens=cfg.max_prompt_tokens)


def build_generator(policy: Any, cfg: TrainConfig, rank: int = 0) -> Any:
    """The rollout sampler ``cfg.generator`` names, over ``policy``'s current weights.

    'hf': :class:`~agents.generation.hf.HFGenerator` on the policy's own module. 'vllm': a colocated
    :class:`~agents.generation.vllm.VLLMGenerator` (built before ``strategy.prepare``: ZeRO-3 partitions
    the weights; bfloat16 with ``cfg.bf16``, else float32; seeded ``cfg.seed + rank``), served from
    ``<out_dir>/vllm-rank<rank>``; the loop pushes the weights to it after every update.
    """
    if cfg.generator == "hf":
        from agents.generation.hf import HFGenerator

        return HFGenerator(policy)
    from agents.generation.vllm import VLLMGenerator  # vllm is imported only when asked for

    return VLLMGenerator(
        policy,
        workdir=Path(cfg.out_dir) / f"vllm-rank{rank}",
        dtype="bfloat16" if cfg.bf16 else "float32",
        gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
        seed=cfg.seed + rank,
    )


def build_agent(
    policy: Any, cfg: TrainConfig, temperature: float, generator: Any | None = None, value_logits: bool = False
) -> DetailedAgent:
    """An :class:`~agents.llm.LLMAgent` sampling from ``policy`` with ``generator`` (default: HF on ``policy``).

    No agent seed: sampling draws from torch's global RNG, which checkpoints save and restore.
    ``value_logits``: the sampler also keeps the w⁺/w⁻ logits SAPO reads V_old and Q_old from.
    """
    from agents.generation.base import GenerationParams
    from agents.generation.hf import HFGenerator
    from agents.llm import LLMAgent

    params = GenerationParams(
        max_new_tokens=cfg.max_response_tokens,
        temperature=temperature,
        value_logits=value_logits,
        draft_tokens=cfg.draft_tokens,
    )
    return LLMAgent(
        policy, generator or HFGenerator(policy), params, name=f"{cfg.algo}:{cfg.model}", constrain=cfg.constrain
    )
