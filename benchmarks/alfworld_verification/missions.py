"""Directed command sequences for the fuzzer: the long chains a random walk almost never completes.

A :class:`Mission` reads the compiled engine's state (white box) to pick commands that reach deep
states — a sliced, cleaned and heated apple being examined; an object moved to a neighbouring
receptacle and the spot looked at; a bowl with something inside it examined — while the reference
engine, played side by side, checks every output. Missions only choose commands; they never decide
what is correct.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from sapo_gym.alfworld.engines.compiled import CompiledEngine

__all__ = ["Mission"]


class _Stuck(Exception):
    """The mission cannot continue from this state (the fuzzer goes on with random chains)."""


class Mission:
    """One directed chain, chosen at random among those the game allows."""

    def __init__(self, engine: CompiledEngine, rng: random.Random, max_commands: int = 40):
        if engine.fallback is not None:
            raise ValueError(f"missions need a compiled game, this one fell back: {engine.fallback}")
        self.engine, self.game, self.rng = engine, engine.game, rng
        self.admissible: list[str] = []
        self.remaining = max_commands
        self._plan = self._choose()

    def next(self, admissible: list[str]) -> str | None:
        """The next command, or None once the mission is done or stuck."""
        self.admissible = admissible
        if self.remaining <= 0:
            return None
        self.remaining -= 1
        try:
            return next(self._plan)
        except (StopIteration, _Stuck):
            self.remaining = 0
            return None

    # -- choice -----------------------------------------------------------------------------------
    def _choose(self) -> Iterator[str]:
        g, rng = self.game, self.rng
        movable = g.properties["pickupable"]
        sliceable = sorted(g.properties["sliceable"] & movable) if g.knives & movable else []
        treatable = sorted(movable & (g.properties["cleanable"] | g.properties["heatable"] | g.properties["coolable"]))
        vessels = sorted(set(g.contained_objects) & movable)
        options = ["neighbour"] + (["prepare"] if sliceable or treatable else []) + (["vessel"] if vessels else [])
        kind = rng.choice(options)
        if kind == "prepare":
            target = rng.choice(sliceable or treatable)
            return self._prepare(target, slice_it=bool(sliceable) and target in sliceable)
        if kind == "vessel":
            return self._vessel(rng.choice(vessels))
        return self._neighbour()

    def _prepare(self, obj: str, slice_it: bool) -> Iterator[str]:
        g, props = self.game, self.game.properties
        steps = [("clean", g.sinks, "cleanable"), ("heat", g.microwaves, "heatable"), ("cool", g.fridges, "coolable")]
        steps = [s for s in steps if obj in props[s[2]] and s[1] and self.rng.random() < 0.7]
        self.rng.shuffle(steps)
        if self.rng.random() < 0.3:
            yield "look"
        if slice_it:
            knife = sorted(g.knives & props["pickupable"])[0]
            yield from self._hold(knife)
            yield from self._slice(obj, knife)
        yield from self._hold(obj)
        yield f"examine {g.names[obj]}"
        for verb, appliances, _ in steps:
            yield from self._treat(obj, verb, sorted(appliances)[0])
            yield f"examine {g.names[obj]}"
        yield from self._drop(obj, avoid=None)
        yield "look"

    def _vessel(self, vessel: str) -> Iterator[str]:
        yield from self._hold(vessel)
        yield f"examine {self.game.names[vessel]}"
        yield "inventory"

    def _neighbour(self) -> Iterator[str]:
        """Take an object from a receptacle that shares its spot, move it next door, look."""
        g, s = self.game, self.engine.state
        shared = [r for rs in g.at_location.values() if len(rs) > 1 for r in rs]
        candidates = sorted((o, r) for r in shared for o in s.contents.get(r, ()) if o in g.properties["pickupable"])
        if not candidates:
            raise _Stuck
        obj, source = self.rng.choice(candidates)
        yield from self._hold(obj, source)
        yield from self._drop(obj, avoid=source)
        yield "look"

    # -- stages -----------------------------------------------------------------------------------
    def _command(self, command: str) -> str:
        if command not in self.admissible:
            raise _Stuck
        return command

    def _reach(self, r: str) -> Iterator[str]:
        g, s = self.game, self.engine.state
        if s.loc != g.location_of[r]:
            yield self._command(f"go to {g.names[r]}")
        if r in g.openable and r not in s.opened:
            yield self._command(f"open {g.names[r]}")

    def _hold(self, obj: str, source: str | None = None) -> Iterator[str]:
        g, s = self.game, self.engine.state
        for _ in range(6):
            if s.holding == obj:
                return
            if s.holding is not None:  # put the held object down somewhere, wandering if needed
                moves = [c for c in self.admissible if c.startswith(f"move {g.names[s.holding]} to ")]
                gotos = [c for c in self.admissible if c.startswith("go to ")]
                yield self.rng.choice(moves or gotos or ["look"])
                continue
            holders = [source] if source else sorted(r for r, objs in s.contents.items() if obj in objs)
            if not holders:
                raise _Stuck
            yield from self._reach(holders[0])
            yield self._command(f"take {g.names[obj]} from {g.names[holders[0]]}")
        raise _Stuck

    def _slice(self, obj: str, knife: str) -> Iterator[str]:
        g, s = self.game, self.engine.state
        holders = sorted(r for r, objs in s.contents.items() if obj in objs)
        if not holders:
            raise _Stuck
        yield from self._reach(holders[0])
        yield self._command(f"slice {g.names[obj]} with {g.names[knife]}")

    def _treat(self, obj: str, verb: str, appliance: str) -> Iterator[str]:
        g, s = self.game, self.engine.state
        if s.loc != g.location_of[appliance]:
            yield self._command(f"go to {g.names[appliance]}")
        yield self._command(f"{verb} {g.names[obj]} with {g.names[appliance]}")

    def _drop(self, obj: str, avoid: str | None) -> Iterator[str]:
        g = self.game
        moves = [c for c in self.admissible if c.startswith(f"move {g.names[obj]} to ")]
        if avoid is not None:
            moves = [c for c in moves if c != f"move {g.names[obj]} to {g.names[avoid]}"] or moves
        if moves:
            yield self.rng.choice(moves)
