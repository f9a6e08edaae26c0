"""An ALFWorld expert that sees only what the agent sees: the goal, each observation, the admissible commands.

The walkthrough expert knows where every object is (it was planned on the full game state) and has
nothing to say once the agent leaves the walkthrough. A small model cloning it learns the *marginal*
of where objects tend to be and, after a wrong guess, has never seen what to do next. This expert is
the other kind of teacher: it searches the room in a fixed order (the admissible ``go to`` commands,
as the engine lists them), opens closed receptacles, takes the goal object where it sees one,
cleans/heats/cools it at the sink basin/microwave/fridge or turns on a lamp it has seen, and puts it
in a receptacle of the goal type (twice for pick-two tasks). Every decision is a function of the
goal and the episode's observations so far, so it labels *any* state the agent reaches (DAgger-style
data for free), and an agent with enough memory of the episode could imitate it exactly.

The goal comes from the game's ``pddl_params`` (object, receptacle, lamp) and task type, which the
task sentence states in words: :meth:`SearchGoal.from_sentence` reads it from the sentence alone
(what an evaluated agent sees; ``pddl_params`` is a privileged info key). Used by :class:`~sapo_gym.alfworld.env.AlfWorldEnv` with
``expert="search"``; pure Python, no engine access.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SearchGoal", "SearchExpert"]

_APPLIANCE = {"clean": "sinkbasin", "heat": "microwave", "cool": "fridge"}
_OPS = {
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
    "look_at_obj_in_light": "look",
}
_ARRIVE = re.compile(r"^You arrive at (.+?)\.")
_PICK = re.compile(r"^You pick up the (.+?) from the ")
_MOVE = re.compile(r"^You move the (.+?) to the ")
_TREAT = re.compile(r"^You (?:clean|heat|cool) the (.+?) using the ")
_SENTENCES = (  # alfworld's goal templates (alfworld/gen/goal_library.py) of the six task types
    re.compile(r"^put (?:a|some|two) (?:(?:clean|hot|cool) )?(?P<obj>\S+) (?:in|on) (?P<recep>\S+)$"),
    re.compile(r"^(?:clean|heat|cool|find) (?:some|two) (?P<obj>\S+) and put (?:it|them) in (?P<recep>\S+)$"),
    re.compile(r"^(?:look at|examine the) (?P<obj>\S+) (?:under|with) the (?P<lamp>\S+)$"),
)


@dataclass(frozen=True)
class SearchGoal:
    """What the task asks, in the engine's lower-case words."""

    obj: str
    """Object type to find, e.g. ``"apple"``."""
    target: str
    """Receptacle type to put it in (``""`` for look tasks), e.g. ``"fridge"``."""
    op: str | None = None
    """``clean``, ``heat``, ``cool`` or ``look`` (turn on a lamp while holding the object), else None."""
    lamp: str = ""
    """Lamp type of a look task (``desklamp`` or ``floorlamp``)."""
    count: int = 1
    """Objects to place (pick-two tasks: 2)."""

    @classmethod
    def from_task(cls, alfworld_task_type: str, pddl_params: dict[str, Any]) -> SearchGoal:
        """From ALFWorld's task type (``pick_two_obj_and_place`` …) and the game's ``pddl_params``."""
        return cls(
            obj=str(pddl_params.get("object_target", "")).lower(),
            target=str(pddl_params.get("parent_target", "")).lower(),
            op=_OPS.get(alfworld_task_type),
            lamp=str(pddl_params.get("toggle_target", "")).lower(),
            count=2 if alfworld_task_type == "pick_two_obj_and_place" else 1,
        )

    @classmethod
    def from_sentence(cls, alfworld_task_type: str, sentence: str) -> SearchGoal:
        """From the task type and the task sentence (``info["task"]``, e.g. ``put a hot apple in fridge.``)."""
        text = sentence.strip().lower().rstrip(".").strip()
        for pattern in _SENTENCES:
            if m := pattern.match(text):
                found = m.groupdict()
                return cls(
                    obj=found["obj"],
                    target=found.get("recep") or "",
                    op=_OPS.get(alfworld_task_type),
                    lamp=found.get("lamp") or "",
                    count=2 if alfworld_task_type == "pick_two_obj_and_place" else 1,
                )
        raise ValueError(f"not an ALFWorld task sentence: {sentence!r}")


@dataclass
class SearchExpert:
    """The search policy's memory of one episode; :meth:`observe` each observation, ask :meth:`action`."""

    goal: SearchGoal
    location: str | None = None
    """Receptacle the agent stands at (None: the middle of the room)."""
    visited: list[str] = field(default_factory=list)
    """Receptacles reached by ``go to`` in this sweep, in order (cleared when every one has been seen)."""
    closed: set[str] = field(default_factory=set)
    """Receptacles last seen closed."""
    lamps: list[str] = field(default_factory=list)
    """Receptacles where a lamp of the goal type was seen."""
    holding: str | None = None
    treated: bool = False
    placed: list[str] = field(default_factory=list)
    """Goal objects already put in a target receptacle (not to be taken again)."""
    drop_at: str | None = None
    """The receptacle the first object went to (pick-two puts the second one there too)."""

    def observe(self, observation: str) -> None:
        """Update the memory from the observation that followed the last command."""
        text = observation.strip()
        if m := _ARRIVE.match(text):
            self.location = m.group(1)
            if self.location not in self.visited:
                self.visited.append(self.location)
        elif m := _PICK.match(text):
            self.holding, self.treated = m.group(1), False
        elif m := _MOVE.match(text):
            self.placed.append(m.group(1))
            self.drop_at = self.drop_at or self.location
            self.holding = None
        elif _TREAT.match(text):
            self.treated = True
        if self.location is not None:
            if f"The {self.location} is closed" in text:
                self.closed.add(self.location)
            elif f"The {self.location} is open" in text or f"You open the {self.location}" in text:
                self.closed.discard(self.location)
            if self.goal.lamp and f"a {self.goal.lamp} " in text and self.location not in self.lamps:
                self.lamps.append(self.location)

    def action(self, admissible: Sequence[str]) -> str | None:
        """The next command (one of ``admissible``), or None when the goal cannot be pursued from here."""
        if self.holding is not None:
            return self._with_object(admissible)
        takeable = [
            a
            for a in admissible
            if re.match(rf"take {re.escape(self.goal.obj)} \d+ from ", a)
            and a.split(" from ")[0][5:] not in self.placed
        ]
        if takeable:
            return takeable[0]
        return self._open_here(admissible) or self._explore(admissible)

    # ---------------------------------------------------------------- holding the goal object
    def _with_object(self, admissible: Sequence[str]) -> str | None:
        goal, obj = self.goal, self.holding
        if goal.op in _APPLIANCE and not self.treated:
            use = [a for a in admissible if a.startswith(f"{goal.op} {obj} with ")]
            return use[0] if use else self._go_to_type(admissible, _APPLIANCE[goal.op])
        if goal.op == "look":
            use = [a for a in admissible if a.startswith(f"use {goal.lamp} ")]
            if use:
                return use[0]
            if self.lamps and self.location != self.lamps[0]:
                return self._go(admissible, self.lamps[0])
            return self._explore(admissible)
        put = [a for a in admissible if a.startswith(f"move {obj} to {goal.target} ")]
        if self.drop_at is not None:
            put = [a for a in put if a.endswith(f" to {self.drop_at}")] or put
        if put:
            return put[0]
        if self.location is not None and self.location.startswith(f"{goal.target} "):
            opened = self._open_here(admissible)
            if opened:
                return opened
        if self.drop_at is not None and self.location != self.drop_at:
            return self._go(admissible, self.drop_at)
        return self._go_to_type(admissible, goal.target)

    # ---------------------------------------------------------------- moving around
    def _open_here(self, admissible: Sequence[str]) -> str | None:
        if self.location in self.closed and f"open {self.location}" in admissible:
            return f"open {self.location}"
        return None

    def _go(self, admissible: Sequence[str], place: str) -> str | None:
        return f"go to {place}" if f"go to {place}" in admissible else None

    def _go_to_type(self, admissible: Sequence[str], kind: str) -> str | None:
        """Go to a receptacle of type ``kind`` (the first listed), unless already at one."""
        if self.location is not None and self.location.startswith(f"{kind} "):
            return self._explore(admissible)  # at one already, and it did not work here: look elsewhere
        options = [a for a in admissible if re.match(rf"go to {re.escape(kind)} \d+$", a)]
        return options[0] if options else self._explore(admissible)

    def _explore(self, admissible: Sequence[str]) -> str | None:
        """The next receptacle of the sweep not yet visited (a new sweep once all have been)."""
        places = [a for a in admissible if a.startswith("go to ")]
        fresh = [a for a in places if a[6:] not in self.visited]
        if not fresh and places:
            self.visited = [self.location] if self.location else []
            fresh = [a for a in places if a[6:] not in self.visited]
        return fresh[0] if fresh else None
