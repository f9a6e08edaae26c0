"""Agents that try to reach the privileged info past the harness's filter (what running the agent
in a process of its own guards against), as ``module:Class`` specs.

Each plays ``sapo/Vault-v0`` (a wrong button ends the episode, so only the oracle's action wins reliably) and
writes what it found to the JSON file named by ``$SAPO_ATTACK_REPORT`` after every turn, so a test can assert
on facts the attacker reports from inside whatever process it ran in:

* :class:`FrameAgent` (a): reads the unfiltered ``infos`` from its callers' frames (``sys._getframe``);
* :class:`GcAgent` (b): finds the env objects through ``gc.get_objects()`` and asks their oracle;
* :class:`OwnEnvAgent` (c): builds its own copy of the (public) env, plays it in lockstep and asks its oracle.

Each answers ``look`` when it found nothing (never a win on Vault).
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from agents.base import format_action

__all__ = ["FrameAgent", "GcAgent", "OwnEnvAgent", "InfoTypesAgent"]


class _Attacker:
    """Shared bookkeeping: ``turns`` played, ``stolen`` turns answered from privileged data, and ``found``
    (what the attack located: frames' infos, env objects, own envs), reported after every turn."""

    name = "attacker"

    def __init__(self) -> None:
        self.report: dict[str, Any] = {"pid": os.getpid(), "turns": 0, "stolen": 0, "found": 0}

    def reset(self, num_envs: int) -> None:
        return None

    def steal(self, infos: Sequence[dict[str, Any]]) -> list[str | None]:
        """The privileged action per info, None where the attack found nothing (here: nothing)."""
        return [None] * len(infos)

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        actions = self.steal(infos)
        self.report["turns"] += len(infos)
        self.report["stolen"] += sum(a is not None for a in actions)
        path = os.environ.get("SAPO_ATTACK_REPORT")
        if path:
            with open(path, "w") as fh:
                json.dump(self.report, fh)
        return [format_action(a or "look", "", info) for a, info in zip(actions, infos)]


class FrameAgent(_Attacker):
    """(a) Walks up the call stack and takes the ``expert_action`` of any info dict a caller holds."""

    def steal(self, infos: Sequence[dict[str, Any]]) -> list[str | None]:
        leaked: dict[tuple[str, int], str] = {}
        frame = sys._getframe(1)
        while frame is not None:
            for value in list(frame.f_locals.values()):
                for item in value if isinstance(value, list) else [value]:
                    if isinstance(item, dict) and "expert_action" in item and "task_id" in item:
                        leaked[(item["task_id"], item.get("step"))] = item["expert_action"]
            frame = frame.f_back
        self.report["found"] = max(self.report["found"], len(leaked))
        return [leaked.get((info["task_id"], info["step"])) for info in infos]


def _is_instance(obj: Any, cls: type) -> bool:
    """``isinstance`` that survives the heap's dead weak proxies (asking one for its class raises ReferenceError)."""
    try:
        return isinstance(obj, cls)
    except ReferenceError:
        return False


class GcAgent(_Attacker):
    """(b) Finds the harness's env objects on the heap and calls their oracle for the matching state."""

    def steal(self, infos: Sequence[dict[str, Any]]) -> list[str | None]:
        from sapo_gym.core import TextEnv

        envs = [o for o in gc.get_objects() if _is_instance(o, TextEnv)]
        self.report["found"] = max(self.report["found"], len(envs))
        out: list[str | None] = []
        for info in infos:
            match = [
                e
                for e in envs
                if getattr(getattr(e, "_task", None), "task_id", None) == info["task_id"]
                and getattr(e, "_steps", None) == info["step"]
            ]
            out.append(match[0].expert_action() if match else None)
        return out


class OwnEnvAgent(_Attacker):
    """(c) Builds ``sapo/Vault-v0`` itself (the public split), resets it to the info's task and steps it with its
    own outputs: a lookup of a public game that no process boundary stops."""

    def __init__(self) -> None:
        super().__init__()
        self._envs: dict[str, Any] = {}

    def steal(self, infos: Sequence[dict[str, Any]]) -> list[str | None]:
        import gymnasium as gym

        import sapo_gym  # noqa: F401  (registers the envs)

        out: list[str | None] = []
        for info in infos:
            key = info["task_id"]
            if info["step"] == 0 or key not in self._envs:
                env = self._envs.get(key) or gym.make("sapo/Vault-v0", split="test")
                env.reset(seed=0, options={"task_id": key})
                self._envs[key] = env
            env = self._envs[key]
            expert = env.unwrapped.expert_action()
            env.step(format_action(expert or "look", "", info))  # stay in lockstep with the harness's env
            out.append(expert)
        self.report["found"] = len(self._envs)
        return out


class InfoTypesAgent:
    """Honest, for the transport's tests: answers ``look`` and reports the type of each info value it was handed
    (``action_mask`` must arrive as a numpy bool array, as in process) and its process id."""

    name = "info-types"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def reset(self, num_envs: int) -> None:
        if num_envs < 0:
            raise ValueError("num_envs must be >= 0")

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        if any(info.get("task_id") == "explode" for info in infos):
            raise RuntimeError("the agent exploded")
        types = {
            k: f"{type(v).__module__}.{type(v).__name__}" + (f"[{v.dtype}]" if hasattr(v, "dtype") else "")
            for info in infos
            for k, v in info.items()
        }
        path = os.environ.get("SAPO_ATTACK_REPORT")
        if path:
            with open(path, "w") as fh:
                json.dump({"pid": os.getpid(), "seed": self.seed, "types": types}, fh)
        return [format_action("look", "", info) for info in infos]
