"""Deterministic agents for the evaluation harness's tests (``module:Class`` specs).

The reply is a function of the observation only (the Vault panel's colour, pressed, or for some
observations a wrong button), so an interrupted and resumed run must reproduce an uninterrupted one.
``SCRIPTED_DELAY`` (seconds, default 0) slows each turn down, and ``SCRIPTED_HOLD_AT`` holds every turn once the
episodes log has a given number of lines, so a test can kill the run mid-way.
"""

from __future__ import annotations

import os
import re
import time
import zlib
from collections.abc import Sequence
from typing import Any

_COLOURS = ("red", "blue", "green", "yellow")


def scripted_reply(observation: str) -> str:
    """``press <the panel's colour>``, except on about one observation in four a wrong colour."""
    found = re.findall(r"The panel glows (\w+)\.", observation)
    colour = found[-1] if found else "red"
    if zlib.crc32(observation.encode()) % 4 == 0:
        colour = _COLOURS[(_COLOURS.index(colour) + 1) % len(_COLOURS)] if colour in _COLOURS else "red"
    return f"<think>The panel glows.</think><action>press {colour}</action>"


def _delay() -> None:
    delay = float(os.environ.get("SCRIPTED_DELAY", "0") or 0)
    if delay:
        time.sleep(delay)
    _hold()


def _hold(seconds: float = 2.0) -> None:
    """With ``SCRIPTED_HOLD_AT=PATH:LINES``: once the file at PATH (the episodes log) holds LINES lines, every turn
    waits ``seconds`` more, so a test's signal reaches a run that is surely still playing, however late the test gets
    to send it on a loaded machine (the ~60 turns left give it a minute or more). Not longer per turn: after a Ctrl-C
    the harness waits for the agent's call in flight (CI timed out at 60 s with a 120 s hold)."""
    hold = os.environ.get("SCRIPTED_HOLD_AT")
    if not hold:
        return
    path, lines = hold.rsplit(":", 1)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(path, "rb") as fh:
                if fh.read().count(b"\n") < int(lines):
                    return
        except FileNotFoundError:
            return
        time.sleep(0.01)


class ScriptedAgent:
    """Answers one env at a time (``respond``: the evaluation pool's path) with its accounting."""

    name = "scripted"

    def reset(self, num_envs: int) -> None:
        pass

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        return [self.respond(o, i)["output"] for o, i in zip(observations, infos)]

    def respond(self, observation: str, info: dict[str, Any], turn_seed: int | None = None) -> dict[str, Any]:
        _delay()
        output = scripted_reply(observation)
        return {
            "output": output,
            "prompt_tokens": len(observation.split()),
            "completion_tokens": len(output.split()),
            "finish_reason": "stop",
        }


class ScriptedBatchAgent:
    """The same replies through ``act`` only (a batch agent: the lockstep path)."""

    name = "scripted-batch"

    def reset(self, num_envs: int) -> None:
        pass

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        _delay()
        return [scripted_reply(o) for o in observations]
