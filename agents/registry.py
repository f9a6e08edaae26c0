"""Agent specs as the CLI and the leaderboard take them.

``expert`` · ``random`` · ``search`` (ALFWorld's observation-only search policy) · ``module:Class`` (constructed with no arguments, or ``seed=``) ·
other forms (an HF model path, ``openai:URL#MODEL``, ``smollm2``; see :mod:`agents.loaders`) are resolved by the loaders registered in
``LOADERS``, tried in order; each returns None when the spec is not its kind.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable

from agents.baselines import ExpertAgent, RandomAgent, SearchAgent
from agents.loaders import load_bundled, load_hf, load_openai

__all__ = ["load_agent", "LOADERS"]


def _builtin(spec: str, seed: int) -> Any:
    return {"expert": ExpertAgent, "random": RandomAgent, "search": SearchAgent}.get(spec, lambda seed: None)(seed=seed)


def _import_path(spec: str, seed: int) -> Any:
    if ":" not in spec or spec.startswith(("openai:", "http://", "https://")):
        return None
    module, _, name = spec.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load agent {spec!r}: {exc}") from exc
    return cls(seed=seed) if "seed" in inspect.signature(cls).parameters else cls()


LOADERS: list[Callable[[str, int], Any]] = [_builtin, _import_path, load_openai, load_bundled, load_hf]


def load_agent(spec: str, seed: int = 0) -> Any:
    """Build the agent named by ``spec`` (see the module docstring)."""
    for loader in LOADERS:
        agent = loader(spec, seed)
        if agent is not None:
            return agent
    raise ValueError(f"unknown agent spec {spec!r}; use 'expert', 'random', 'search', 'module:Class', an HF model path, or openai:URL#MODEL")
