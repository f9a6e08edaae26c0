"""What the ecosystem adapters' tests (tests/sapo_gym/integrations/) share: a scripted expert model and in-process
play of the same episodes to hold an ecosystem's episodes to.

The scripted model answers a prompt with the env's expert action for that prompt (:func:`expert_script`: the
env's own ``info["expert_action"]``, collected by playing the tasks in process), so the episodes are the expert's
and end in success; a prompt it has no answer for gets ``look``. :func:`play` replays replies in process:
``gym.make(env_id, split=...).reset(seed=..., options={"task_id": ...})`` then ``step`` per reply.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

import sapo_gym  # noqa: F401  (registers the ids)

FALLBACK = "<think>No script for this prompt.</think><action>look</action>"


def expert_reply(action: str) -> str:
    return f"<think>The expert's move.</think><action>{action}</action>"


def expert_script(env_id: str, split: str, seeds: Sequence[int], limit: int) -> dict[str, str]:
    """Prompt -> the expert's reply, over every prompt of the first ``limit`` tasks' expert episodes per seed."""
    env = gym.make(env_id, split=split)
    script: dict[str, str] = {}
    try:
        for seed in seeds:
            for task_id in list(env.unwrapped.task_ids)[:limit]:
                obs, info = env.reset(seed=seed, options={"task_id": task_id})
                done = False
                while not done:
                    script[obs] = expert_reply(info["expert_action"])
                    obs, _, terminated, truncated, info = env.step(script[obs])
                    done = terminated or truncated
    finally:
        env.close()
    return script


def scripted_model(script: dict[str, str]) -> Callable[[dict[str, Any]], str]:
    """A chat-completions ``reply`` (tests.support.fake_openai) answering the last user message from ``script``."""

    def reply(body: dict[str, Any]) -> str:
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        return script.get(users[-1], FALLBACK) if users else FALLBACK

    return reply


@dataclass
class Played:
    """An episode as in-process play saw it: each prompt before a step, each reward, the outcome."""

    prompts: list[str] = field(default_factory=list)
    raw_observations: list[str] = field(default_factory=list)
    """The env's raw observation after each step (what a result bundle records)."""
    rewards: list[float] = field(default_factory=list)
    success: bool = False
    done: bool = False

    @property
    def turns(self) -> int:
        return len(self.rewards)


def play(
    env_id: str, split: str, task_id: str, seed: int, replies: Sequence[str], env_args: dict[str, Any] | None = None
) -> Played:
    """Replay ``replies`` in process on the task (stops early only if the env ends the episode first)."""
    env = gym.make(env_id, split=split, **(env_args or {}))
    out = Played()
    try:
        obs, info = env.reset(seed=seed, options={"task_id": task_id})
        for reply in replies:
            if out.done:
                break
            out.prompts.append(obs)
            obs, reward, terminated, truncated, info = env.step(reply)
            out.raw_observations.append(info["raw_observation"])
            out.rewards.append(float(reward))
            out.success, out.done = bool(info["won"]), bool(terminated or truncated)
    finally:
        env.close()
    return out
