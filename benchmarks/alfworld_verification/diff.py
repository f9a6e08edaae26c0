"""Where two engine outputs first differ: the one comparison every check in this package uses.

The golden replay (:mod:`.golden`), the differential fuzzer (:mod:`.fuzz`) and
``benchmarks/alfworld_engines.py`` all compare two
:class:`~sapo_gym.alfworld.engines.protocol.EngineState` objects through :func:`first_difference`
and report the first disagreement as a :class:`Mismatch`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sapo_gym.alfworld.engines.protocol import EngineState

__all__ = ["Mismatch", "first_difference"]


@dataclass(frozen=True)
class Mismatch:
    """The first point where the engines disagreed."""

    step: int
    command: str | None
    field: str
    reference: object
    compiled: object


def first_difference(reference: EngineState, compiled: EngineState) -> tuple[str, object, object] | None:
    """``(field, reference value, compiled value)`` of the first differing field, or None."""
    for name in ("obs", "admissible", "won"):
        ref, comp = getattr(reference, name), getattr(compiled, name)
        if ref != comp or type(ref) is not type(comp):
            return name, ref, comp
    return None
