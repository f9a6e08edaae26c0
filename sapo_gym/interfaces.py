"""What the evaluation harness asks of the objects it is handed: the agents it plays and the progress it reports to.

An agent reaches the harness in one of two shapes (an agent may have both):

* :class:`BatchActor` — ``reset(num_envs)`` before a batch of episodes, then ``act`` on the observations and
  infos of the envs still playing, one raw output each: the lockstep runner (:func:`sapo_gym.pool.run_batch`,
  :func:`sapo_gym.evaluation.evaluate`) calls it;
* :class:`TurnResponder` — ``respond(observation, info, turn_seed)`` for one env's turn, thread-safe: the
  continuous pool (:func:`sapo_gym.pool.run_pool`) and the leaderboard's live client call it, and choose it
  over ``act`` when an agent has it (``isinstance(agent, TurnResponder)``).

Both runners report to one :class:`EpisodeProgress` (:class:`sapo_gym.accounting.Progress` prints it). The
agent-side declarations built on these (a name, the trainer's ``act_detailed``) are :mod:`agents.base`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["BatchActor", "TurnResponder", "EpisodeProgress"]


class BatchActor(Protocol):
    """Acts for a batch of envs at once."""

    def reset(self, num_envs: int) -> None:
        """A new batch of ``num_envs`` episodes starts (an agent with per-episode memory clears it)."""
        ...

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        """One raw output per env, for the *active* envs only (in the order given)."""
        ...


@runtime_checkable
class TurnResponder(Protocol):
    """Answers one env's turn at a time; called from several threads at once."""

    def respond(self, observation: str, info: dict[str, Any], turn_seed: int | None = None) -> Any:
        """The turn's answer: ``{"output": text, ...}`` with the request's accounting (``prompt_tokens``,
        ``completion_tokens``, ``latency_s``, ``finish_reason``), or the output text alone
        (:func:`sapo_gym.pool.as_reply` reads either). ``turn_seed``: a seed for this request that depends
        on the episode and turn only (:func:`sapo_gym.pool.turn_seed`), or None."""
        ...


class EpisodeProgress(Protocol):
    """What a runner reports to as it plays: episodes in flight, each env step, each ended episode."""

    in_flight: int
    """Episodes in progress (the runner sets it)."""

    def turn(self, n: int = 1) -> None:
        """``n`` env steps were taken."""
        ...

    def episode(self, turns: int) -> None:
        """An episode of ``turns`` steps ended."""
        ...
