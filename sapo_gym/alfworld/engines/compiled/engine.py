"""``CompiledEngine``: an ALFWorld game as a plain Python state machine.

Same protocol and byte-identical output as
:class:`sapo_gym.alfworld.engines.reference.ReferenceEngine` (TextWorld ``PddlEnv`` + Fast Downward
+ a tatsu-parsed grammar), without any of them: the domain's operators are evaluated directly over
:class:`.state.GameState`, the feedback comes from :mod:`.text`, ``won`` from the goal compiled in
:mod:`.game`.

Semantics kept from the reference (see docs/alfworld_engine.md): a command is stripped and looked up
exactly among the admissible ones, anything else answers "Nothing happens." and changes nothing;
``examine <object>`` only while holding it; no "go to" for a receptacle at the agent's own location;
``use X`` always turns X on; ``help`` is always admissible.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from functools import lru_cache

from sapo_gym.alfworld.engines.compiled import text
from sapo_gym.alfworld.engines.compiled.game import CompiledGame, compile_game
from sapo_gym.alfworld.engines.compiled.pddl import UnsupportedGame
from sapo_gym.alfworld.engines.compiled.state import GameState
from sapo_gym.alfworld.engines.protocol import EngineState, FileVersion, file_version
from sapo_gym.alfworld.engines.reference import ReferenceEngine

__all__ = ["CompiledEngine", "COMPILED_CACHE_SIZE", "compiled_game"]

COMPILED_CACHE_SIZE = 512
"""Compiled games a process keeps (tens of KB each for ALFWorld-Mini's rooms, more for the full floor plans)."""


def compiled_game(game_file: str | os.PathLike[str]) -> CompiledGame:
    """The compiled tables of ``game_file``, compiled once per process and version of the file (every engine of the
    process shares them: play never changes a :class:`CompiledGame`). Raises :class:`UnsupportedGame`."""
    return _compiled(file_version(game_file))


@lru_cache(maxsize=COMPILED_CACHE_SIZE)
def _compiled(version: FileVersion) -> CompiledGame:
    with open(version[0]) as f:
        return compile_game(json.load(f))


Effect = tuple[Callable[..., str], tuple[str, ...]]
"""One ground operator: ``(method, args)``; ``method(engine, *args)`` applies it to the engine's state and returns its
feedback. A function of the class, not a closure or bound method: the engine's table of effects refers to no engine,
so a dropped engine is freed by reference counting, not left to the cycle collector (a reset makes a new one)."""


class CompiledEngine:
    """One ALFWorld game, compiled. Falls back to the reference engine for an unknown domain/grammar.

    ``fallback`` is ``None`` when the compiled engine plays, else why the reference plays instead.
    """

    name = "compiled"
    game: CompiledGame
    """The compiled game (absent when the reference engine plays instead)."""

    def __init__(self, game_file: str | os.PathLike[str]):
        self.game_file = str(game_file)
        self.fallback: str | None = None
        self._reference: ReferenceEngine | None = None
        try:
            self.game = compiled_game(self.game_file)
        except UnsupportedGame as err:
            self.fallback = str(err)
            self._reference = ReferenceEngine(self.game_file)
            return
        self.state = GameState(self.game.init)
        self._goto: dict[str, dict[str, str]] = {}  # agent location -> {"go to X": X}, built on first visit
        self._actions: dict[str, Effect] = {}
        self._admissible: list[str] = []
        self._won = False
        self._history: list[str] = []  # commands that changed something since the last reset
        self._planner: ReferenceEngine | None = None  # built on the first replan()
        self._planner_history: list[str] = []

    # -- protocol ---------------------------------------------------------------------------------
    def reset(self) -> EngineState:
        if self._reference is not None:
            return self._reference.reset()
        self.state = GameState(self.game.init)
        self._history = []
        return self._observe(text.intro(self.game, self.state))

    def step(self, command: str) -> EngineState:
        if self._reference is not None:
            return self._reference.step(command)
        command = command.strip()
        effect = self._actions.get(command)
        if effect is None:
            return EngineState("Nothing happens.", list(self._admissible), self._won)
        self._history.append(command)
        method, args = effect
        return self._observe(method(self, *args))

    def replan(self) -> list[str] | None:
        """Fast Downward's plan from the current state, as ``ReferenceEngine.replan`` gives it.

        Planning is the one thing not compiled: a reference engine is loaded on the first call and
        kept in step by replaying the commands played since the reset (slow, like the planner).
        """
        if self._reference is not None:
            return self._reference.replan()
        if self._planner is None:
            self._planner = ReferenceEngine(self.game_file)
            self._planner.reset()
        done = self._planner_history
        if done != self._history[: len(done)]:
            self._planner.reset()
            done.clear()
        for command in self._history[len(done) :]:
            self._planner.step(command)
            done.append(command)
        return self._planner.replan()

    # -- internals --------------------------------------------------------------------------------
    def _observe(self, feedback: str) -> EngineState:
        self._actions = self._applicable()
        self._admissible = sorted(self._actions)
        self._won = self._goal_holds()
        return EngineState(feedback, list(self._admissible), self._won)

    def _goal_holds(self) -> bool:
        has = self.state.has
        return all(any(all(map(has, term)) for term in clause) for clause in self.game.goal)

    def _applicable(self) -> dict[str, Effect]:  # noqa: C901 (the domain's operators in one place, read against it)
        """Command -> effect for every applicable ground operator (the admissible commands)."""
        g, s, names, cls = self.game, self.state, self.game.names, CompiledEngine
        acts: dict[str, Effect] = {"look": (cls._look, ()), "inventory": (cls._inventory, ()), "help": (cls._help, ())}
        if s.loc not in self._goto:  # GotoLocation exists only for lStart != lEnd
            self._goto[s.loc] = {"go to " + names[r]: r for r in g.receptacles if g.location_of[r] != s.loc}
        for command, r in self._goto[s.loc].items():
            acts[command] = (cls._goto_location, (r,))
        held = s.holding
        for r in g.at_location.get(s.loc, ()):
            rname = names[r]
            acts["examine " + rname] = (cls._examine_receptacle, (r,))
            is_open = r not in g.openable or r in s.opened
            if r in g.openable:
                if r in s.opened:
                    acts["close " + rname] = (cls._close, (r,))
                else:
                    acts["open " + rname] = (cls._open, (r,))
            for o in s.contents.get(r, ()):
                if o in g.properties["toggleable"]:
                    acts["use " + names[o]] = (cls._toggle, (o,))
                if is_open and held is None and o in g.properties["pickupable"]:
                    acts[f"take {names[o]} from {rname}"] = (cls._pickup, (o, r))
            if held is not None:
                hname = names[held]
                if is_open and held in g.accepts[r]:
                    acts[f"move {hname} to {rname}"] = (cls._put, (held, r))
                if r in g.sinks and held in g.properties["cleanable"]:
                    acts[f"clean {hname} with {rname}"] = (cls._treat, (held, r, "isclean", "", "clean"))
                if r in g.microwaves and held in g.properties["heatable"]:
                    acts[f"heat {hname} with {rname}"] = (cls._treat, (held, r, "ishot", "iscool", "heat"))
                if r in g.fridges and held in g.properties["coolable"]:
                    acts[f"cool {hname} with {rname}"] = (cls._treat, (held, r, "iscool", "ishot", "cool"))
        if held is not None:
            acts["examine " + names[held]] = (cls._examine_object, (held,))
            if held in g.knives:
                for co in s.placed.get(s.loc, ()):
                    if co in g.properties["sliceable"]:
                        acts[f"slice {names[co]} with {names[held]}"] = (cls._slice, (co, held))
        return acts

    def _look(self) -> str:
        return text.look(self.game, self.state)

    def _inventory(self) -> str:
        return text.inventory(self.game, self.state)

    def _help(self) -> str:
        return text.HELP

    def _examine_receptacle(self, r: str) -> str:
        return text.examine_receptacle(self.game, self.state, r)

    def _examine_object(self, o: str) -> str:
        return text.examine_object(self.game, self.state, o)

    def _goto_location(self, r: str) -> str:
        self.state.loc = self.game.location_of[r]
        return f"You arrive at {self.game.names[r]}. " + text.examine_receptacle(self.game, self.state, r)

    def _open(self, r: str) -> str:
        self.state.opened.add(r)
        return f"You open the {self.game.names[r]}. " + text.examine_receptacle(self.game, self.state, r)

    def _close(self, r: str) -> str:
        self.state.opened.discard(r)
        return f"You close the {self.game.names[r]}."

    def _pickup(self, o: str, r: str) -> str:
        s = self.state
        s.contents[r].discard(o)
        s.not_in.add((o, r))
        s.placed.get(s.loc, set()).discard(o)
        s.holding = o
        return f"You pick up the {self.game.names[o]} from the {self.game.names[r]}."

    def _put(self, o: str, r: str) -> str:
        s = self.state
        s.contents.setdefault(r, set()).add(o)
        s.not_in.discard((o, r))
        s.placed.setdefault(s.loc, set()).add(o)
        s.holding = None
        return f"You move the {self.game.names[o]} to the {self.game.names[r]}."

    def _toggle(self, o: str) -> str:
        flags = self.state.flags
        flags["ison"].symmetric_difference_update((o,))
        flags["istoggled"].add(o)
        return f"You turn on the {self.game.names[o]}."  # toggleObject.feedback: toggleable & istoggled

    def _treat(self, o: str, r: str, add: str, remove: str, verb: str) -> str:
        self.state.flags[add].add(o)
        if remove:
            self.state.flags[remove].discard(o)
        return f"You {verb} the {self.game.names[o]} using the {self.game.names[r]}."

    def _slice(self, co: str, ko: str) -> str:
        self.state.flags["issliced"].add(co)
        return f"You sliced the {self.game.names[co]} with the {self.game.names[ko]}."
