"""Replay of the golden reference traces (``golden/valid_traces.jsonl.gz``) through any engine."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from benchmarks.alfworld_verification.diff import Mismatch, first_difference
from sapo_gym.alfworld.engines.protocol import EngineState, GameEngine

__all__ = ["GoldenTrace", "load_golden", "replay"]


@dataclass(frozen=True)
class GoldenTrace:
    """One game's recorded episodes: ``kind -> [(command or None for the reset, expected state)]``."""

    game: str
    """``valid_seen/<task folder>/<trial>``, relative to ``json_2.1.1``."""
    episodes: dict[str, list[tuple[str | None, EngineState]]]

    def game_file(self, data_root: str | os.PathLike[str]) -> str:
        return os.path.join(data_root, "json_2.1.1", self.game, "game.tw-pddl")


def _episode(steps: list[dict[str, Any]]) -> list[tuple[str | None, EngineState]]:
    return [(s["cmd"], EngineState(obs=s["obs"], admissible=list(s["adm"]), won=bool(s["won"]))) for s in steps]


def load_golden(data_root: str | os.PathLike[str]) -> Iterator[GoldenTrace]:
    """Traces in file order (the walkthrough, then the 40-command random walk, of each valid game)."""
    with gzip.open(os.path.join(data_root, "golden", "valid_traces.jsonl.gz"), "rt", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            yield GoldenTrace(record["game"], {k: _episode(record[k]) for k in ("walkthrough", "random_walk")})


def replay(engine: GameEngine, trace: GoldenTrace) -> tuple[int, Mismatch | None]:
    """Replay every episode of ``trace``; ``(states compared, first mismatch or None)``."""
    compared = 0
    for kind, episode in trace.episodes.items():
        for step, (command, expected) in enumerate(episode):
            got = engine.reset() if command is None else engine.step(command)
            compared += 1
            diff = first_difference(expected, got)
            if diff is not None:
                return compared, Mismatch(step, f"{kind}: {command}", *diff)
    return compared, None
