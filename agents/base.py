"""The agent interface shared by evaluation, the leaderboard and the trainers."""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

__all__ = ["Agent", "format_action"]


@runtime_checkable
class Agent(Protocol):
    """Acts for a batch of envs at once.

    ``act`` receives the observations (prompts) and infos of the *active* envs only and returns
    one raw output per env (the text a model would produce, ``<think>…</think><action>…</action>``).
    ``reset`` is called before a new batch of episodes.
    """

    name: str

    def reset(self, num_envs: int) -> None: ...

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]: ...


def format_action(action: str, think: str = "") -> str:
    """Wrap an action in the protocol's tags, the way a well-formed model output looks."""
    return f"<think>{think}</think><action>{action}</action>"
