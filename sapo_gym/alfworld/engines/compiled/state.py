"""The mutable part of a compiled game: the dynamic facts, in indexed form.

Mirrors what the reference engine's fact set holds for the predicates that matter to the text and
the goal, including TextWorld's habit of keeping deleted facts as ``not_*`` facts: only
``not_inreceptacle`` is ever read (by the "look" rule), so only that one is kept.
"""

from __future__ import annotations

from collections.abc import Iterable

from sapo_gym.alfworld.engines.compiled.pddl import Fact, UnsupportedGame

__all__ = ["GameState", "SUPPORTED_GOAL_PREDICATES"]

_FLAG_NAMES = ("isclean", "ishot", "iscool", "issliced", "istoggled", "ison")
SUPPORTED_GOAL_PREDICATES = frozenset(
    ("atlocation", "objectatlocation", "opened", "inreceptacle", "holds", "holdsany", *_FLAG_NAMES)
)


class GameState:
    """Dynamic facts of one game. Ids are lower-cased PDDL names."""

    __slots__ = ("loc", "holding", "contents", "not_in", "placed", "opened", "flags")

    def __init__(self, facts: Iterable[Fact]):
        self.loc = ""
        """``atlocation(agent, loc)``."""
        self.holding: str | None = None
        """``holds(agent, o)`` (``holdsany`` is ``holding is not None``; the domain allows one object)."""
        self.contents: dict[str, set[str]] = {}
        """``inreceptacle(o, r)``: receptacle -> objects."""
        self.not_in: set[tuple[str, str]] = set()
        """``not_inreceptacle(o, r)``: left behind by taking ``o`` from ``r`` until it is put back."""
        self.placed: dict[str, set[str]] = {}
        """``objectatlocation(o, l)``: location -> objects."""
        self.opened: set[str] = set()
        self.flags: dict[str, set[str]] = {name: set() for name in _FLAG_NAMES}
        for fact in facts:
            self._add(fact)

    def _add(self, fact: Fact) -> None:
        pred = fact[0]
        if pred == "atlocation":
            self.loc = fact[2]
        elif pred == "inreceptacle":
            self.contents.setdefault(fact[2], set()).add(fact[1])
        elif pred == "objectatlocation":
            self.placed.setdefault(fact[2], set()).add(fact[1])
        elif pred == "opened":
            self.opened.add(fact[1])
        elif pred in self.flags:
            self.flags[pred].add(fact[1])
        elif pred != "checked":
            raise UnsupportedGame(f"initial fact {fact} is not modelled")

    def has(self, fact: Fact) -> bool:
        """Whether a dynamic ground fact holds (the goal's building block)."""
        pred = fact[0]
        if pred == "inreceptacle":
            return fact[1] in self.contents.get(fact[2], ())
        if pred in self.flags:
            return fact[1] in self.flags[pred]
        if pred == "atlocation":
            return self.loc == fact[2]
        if pred == "holds":
            return self.holding == fact[2]
        if pred == "holdsany":
            return self.holding is not None
        if pred == "objectatlocation":
            return fact[1] in self.placed.get(fact[2], ())
        if pred == "opened":
            return fact[1] in self.opened
        raise KeyError(pred)
