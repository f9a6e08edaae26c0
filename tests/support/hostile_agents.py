"""Agents whose answers the harness must bound or refuse (``module:Class`` specs for ``sapo-gym evaluate``).

* :class:`SurrogateAgent`: an output holding a lone surrogate (no UTF-8 form: no pipe, log or bundle can carry it);
* :class:`UnsendableAgent`: a reply with an extra value JSON has no form for;
* :class:`HugeNumbersAgent`: the right action with accounting no server should report (10^400 prompt tokens, a
  negative count, an infinite latency, a finish reason of a thousand characters);
* :class:`LongOutputAgent`: the right action followed by more characters than the action space allows;
* :class:`BatchSurrogateAgent`: :class:`SurrogateAgent`'s output through ``act`` (a batch agent, lockstep).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.support.scripted_agent import scripted_reply

LONG_PADDING = 70_000
"""Characters appended by :class:`LongOutputAgent` (the action bound is 65,536)."""


class _OneAtATime:
    name = "hostile"

    def reset(self, num_envs: int) -> None:
        pass

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        return [self.respond(o, i)["output"] for o, i in zip(observations, infos)]

    def respond(self, observation: str, info: dict[str, Any], turn_seed: int | None = None) -> dict[str, Any]:
        raise NotImplementedError


class SurrogateAgent(_OneAtATime):
    def respond(self, observation: str, info: dict[str, Any], turn_seed: int | None = None) -> dict[str, Any]:
        return {"output": scripted_reply(observation) + "\ud800"}


class UnsendableAgent(_OneAtATime):
    def respond(self, observation: str, info: dict[str, Any], turn_seed: int | None = None) -> dict[str, Any]:
        return {"output": scripted_reply(observation), "extra": object()}


class HugeNumbersAgent(_OneAtATime):
    def respond(self, observation: str, info: dict[str, Any], turn_seed: int | None = None) -> dict[str, Any]:
        return {
            "output": scripted_reply(observation),
            "prompt_tokens": 10**400,
            "completion_tokens": -1,
            "latency_s": 1e308 * 10,
            "finish_reason": "x" * 1000,
        }


class LongOutputAgent(_OneAtATime):
    def respond(self, observation: str, info: dict[str, Any], turn_seed: int | None = None) -> dict[str, Any]:
        return {"output": scripted_reply(observation) + " " * LONG_PADDING}


class BatchSurrogateAgent:
    name = "hostile-batch"

    def reset(self, num_envs: int) -> None:
        pass

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        return [scripted_reply(o) + "\ud800" for o in observations]
