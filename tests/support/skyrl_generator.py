"""SkyRL's generator loop, as the SkyRL adapter's tests drive skyrl-gym envs (skyrl-train itself needs vLLM and Ray).

:func:`agent_loop` follows ``SkyRLGymGenerator.agent_loop_trajectory_wise`` (NovaSky-AI/SkyRL,
skyrl-train/skyrl_train/generators/skyrl_gym_generator.py) in the chat-history form it takes with
``use_conversation_multi_turn`` and a custom chat template (the retokenizing path): the row's extras get
``max_turns``; ``skyrl_gym.make(env_class, env_config=..., extras=...)``; ``chat_history, _ = env.init(prompt)``;
then, until ``done`` or the history passes ``max_input_length`` (characters here, tokens there), one generation on
the whole history, ``env.step(output)``, the output and the step's observations appended to the history, the step's
reward kept; then ``env.get_metrics()`` and ``env.close()``. Generation is a function of the chat history (a scripted
model) instead of the inference engines.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import skyrl_gym


@dataclass
class Trajectory:
    """What the loop saw: the final chat history, each step's reward and metadata, the stop and the env's metrics."""

    chat_history: list[dict[str, Any]]
    rewards: list[float] = field(default_factory=list)
    metadata: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str = "stop"
    env_metrics: dict[str, Any] = field(default_factory=dict)


def agent_loop(
    prompt: list[dict[str, Any]],
    env_class: str,
    env_extras: dict[str, Any],
    generate: Callable[[list[dict[str, Any]]], str],
    max_turns: int,
    env_config: Any = None,
    max_input_length: int = 1 << 30,
) -> Trajectory:
    env_extras = dict(env_extras)
    env_extras["max_turns"] = max_turns
    env = skyrl_gym.make(env_class, env_config=env_config if env_config is not None else {}, extras=env_extras)
    chat_history, _ = env.init(copy.deepcopy(prompt))
    out = Trajectory(chat_history)
    done = False
    while not done:
        if sum(len(m["content"]) for m in out.chat_history) > max_input_length:
            out.stop_reason = "length"
            break
        output = generate(out.chat_history)
        step = env.step(output)
        done = step["done"]
        out.chat_history = out.chat_history + [{"role": "assistant", "content": output}] + list(step["observations"])
        out.rewards.append(float(step["reward"]))
        out.metadata.append(step["metadata"])
    out.env_metrics = env.get_metrics()
    env.close()
    return out
