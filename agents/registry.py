"""Agent specs as the CLI and the leaderboard take them.

``expert`` · ``random`` · ``search`` (ALFWorld's observation-only search policy) · ``module:Class`` (constructed with no arguments, or ``seed=``) ·
other forms (an HF model path, ``openai:URL#MODEL``, ``smollm2``; see :mod:`agents.loaders`) are resolved by the loaders registered in
``LOADERS``, tried in order; each returns None when the spec is not its kind.

``config`` (:class:`agents.config.AgentConfig`, the command line's agent settings) is applied to the kinds
that honour its fields; a set field the kind cannot honour is refused with its flag named
(:func:`agents.config.check_honoured`). A ``module:Class`` whose constructor takes ``config`` gets it whole.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from agents.baselines import ExpertAgent, RandomAgent, SearchAgent
from agents.config import AgentConfig, agent_kind, check_honoured
from agents.loaders import load_bundled, load_hf, load_openai

__all__ = ["load_agent", "LOADERS"]


def _builtin(spec: str, seed: int, config: AgentConfig) -> Any:
    return {"expert": ExpertAgent, "random": RandomAgent, "search": SearchAgent}.get(spec, lambda seed: None)(seed=seed)


def _import_path(spec: str, seed: int, config: AgentConfig) -> Any:
    if ":" not in spec or spec.startswith(("openai:", "http://", "https://")):
        return None
    module, _, name = spec.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load agent {spec!r}: {exc}") from exc
    params = inspect.signature(cls).parameters
    check_honoured(config, "module", takes_config="config" in params)
    kwargs = {k: v for k, v in (("seed", seed), ("config", config)) if k in params}
    return cls(**kwargs)


LOADERS: list[Callable[[str, int, AgentConfig], Any]] = [_builtin, _import_path, load_openai, load_bundled, load_hf]


def load_agent(spec: str, seed: int = 0, config: AgentConfig | None = None) -> Any:
    """Build the agent named by ``spec`` (see the module docstring) with the settings of ``config``."""
    config = config or AgentConfig()
    if agent_kind(spec) in ("builtin", "openai", "model"):
        check_honoured(config, agent_kind(spec))
    for loader in LOADERS:
        agent = loader(spec, seed, config)
        if agent is not None:
            return agent
    raise ValueError(
        f"unknown agent spec {spec!r}; use 'expert', 'random', 'search', 'module:Class', an HF model path, or openai:URL#MODEL"
    )
