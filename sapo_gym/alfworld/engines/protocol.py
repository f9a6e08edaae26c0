"""What every ALFWorld engine speaks: the :class:`GameEngine` protocol and its :class:`EngineState`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["EngineState", "FileVersion", "GameEngine", "file_version"]

FileVersion = tuple[str, int, int, int]
"""A game file's path, modification time (ns), size and inode: what a per-process cache of what was read from the
file is keyed by, so that a file rewritten in place is read again."""


def file_version(game_file: str | os.PathLike[str]) -> FileVersion:
    """The :data:`FileVersion` of ``game_file`` now (one ``stat``)."""
    stat = os.stat(game_file)
    return str(game_file), stat.st_mtime_ns, stat.st_size, stat.st_ino


@dataclass(frozen=True)
class EngineState:
    """What an engine reports after a reset or a step (raw engine output, nothing converted)."""

    obs: str
    """The engine's feedback text (the intro after a reset)."""
    admissible: list[str]
    """The engine's own admissible-command list: sorted, ``help`` included."""
    won: bool
    """Whether the goal holds in the current state (stays True if play continues after a win)."""


@runtime_checkable
class GameEngine(Protocol):
    """One loaded game. Not thread-safe; one engine per env, one env per process."""

    def reset(self) -> EngineState:
        """Restart the game from its initial state and return the intro."""
        ...

    def step(self, command: str) -> EngineState:
        """Execute ``command`` (an unknown one answers "Nothing happens." and changes nothing)."""
        ...
