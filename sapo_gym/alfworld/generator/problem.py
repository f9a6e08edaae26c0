"""A generated ALFWorld game, stored compactly and rendered to a ``game.tw-pddl`` on demand.

Only what varies is stored (scene, goal, agent start, where each object lies, the walkthrough);
the PDDL problem is rendered in the shape of the official json_2.1.1 problems and the domain and
grammar come from :mod:`~sapo_gym.alfworld.generator.logic` (files shipped in the package: no alfworld
install is needed to render or play a generated game).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sapo_gym.alfworld.generator.logic import goal_library, grammar_for_task, official_domain
from sapo_gym.alfworld.generator.scenes import Location, Receptacle, load_scene, mangle, props

__all__ = ["GeneratedGame", "goal_pddl"]


@dataclass(frozen=True)
class GeneratedGame:
    """One generated game: everything its PDDL problem and text are rendered from."""

    split: str
    index: int
    task_type: str
    """ALFRED task type, e.g. ``pick_heat_then_place_in_recep``."""
    scene: int
    object_target: str
    parent_target: str
    """Receptacle type of the goal ("" for look tasks)."""
    toggle_target: str
    """Lamp type of look tasks ("" otherwise)."""
    sentence: str
    """The task sentence without its final period, e.g. ``put a hot apple in diningtable``."""
    agent: Location
    objects: tuple[tuple[str, str], ...]
    """(AI2-THOR object id, AI2-THOR receptacle id) for every object in the scene."""
    walkthrough: tuple[str, ...] = ()
    receptacles: tuple[str, ...] = ()
    """AI2-THOR ids of the receptacles the room keeps (ALFWorld-Mini); empty: every receptacle of the
    floor plan (``generated-v1``)."""

    def scene_receptacles(self) -> tuple[Receptacle, ...]:
        """The receptacles of this game's room: the kept ones, or all of the floor plan's."""
        every = load_scene(self.scene).receptacles
        if not self.receptacles:
            return every
        kept = set(self.receptacles)
        return tuple(r for r in every if r.id in kept)

    @property
    def folder(self) -> str:
        """A task folder name in ALFWorld's own convention, under the split."""
        recep = self.toggle_target or self.parent_target
        return f"{self.task_type}-{self.object_target}-None-{recep}-{self.scene}/gen_{self.split}_{self.index:05d}"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if not self.receptacles:
            del d["receptacles"]  # generated-v1 records stay as they were
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> GeneratedGame:
        return cls(
            **{
                **d,
                "agent": tuple(d["agent"]),
                "objects": tuple(map(tuple, d["objects"])),
                "walkthrough": tuple(d["walkthrough"]),
                "receptacles": tuple(d.get("receptacles", ())),
            }
        )

    def game_data(self) -> dict[str, Any]:
        """The ``game.tw-pddl`` JSON object (domain, grammar with the task, problem, walkthrough)."""
        return {
            "pddl_domain": official_domain(),
            "grammar": grammar_for_task(self.sentence),
            "pddl_problem": self.pddl_problem(),
            "solvable": bool(self.walkthrough),
            "walkthrough": list(self.walkthrough),
        }

    def pddl_problem(self) -> str:
        p, receptacles = props(), self.scene_receptacles()
        where = {r.id: r for r in receptacles}
        obj_types = {o: o.split("|", 1)[0] for o, _ in self.objects}
        locations = sorted({_loc(r.location) for r in receptacles} | {_loc(self.agent)})
        facts: list[str] = [f"(receptacleType {mangle(r.id)} {r.type}Type)" for r in receptacles]
        facts += [f"(objectType {mangle(o)} {t}Type)" for o, t in obj_types.items()]
        present = sorted(set(obj_types.values()))
        for rtype in sorted({r.type for r in receptacles}):
            facts += [f"(canContain {rtype}Type {t}Type)" for t in present if t in p.can_contain.get(rtype, ())]
        facts += [f"(pickupable {mangle(o)})" for o, t in obj_types.items() if t not in p.toggleable]
        facts += [f"(isReceptacleObject {mangle(o)})" for o, t in obj_types.items() if t in p.receptacle_objects]
        facts += [f"(openable {mangle(r.id)})" for r in receptacles if r.type in p.openable]
        facts.append(f"(atLocation agent1 {_loc(self.agent)})")
        for pred, kinds in (
            ("cleanable", p.cleanable),
            ("heatable", p.heatable),
            ("coolable", p.coolable),
            ("toggleable", p.toggleable),
            ("sliceable", p.sliceable),
        ):
            facts += [f"({pred} {mangle(o)})" for o, t in obj_types.items() if t in kinds]
        facts += [f"(inReceptacle {mangle(o)} {mangle(r)})" for o, r in self.objects]
        facts += [f"(receptacleAtLocation {mangle(r.id)} {_loc(r.location)})" for r in receptacles]
        facts += [f"(objectAtLocation {mangle(o)} {_loc(where[r].location)})" for o, r in self.objects]
        declared = (
            ["agent1 - agent"]
            + [f"{o} - object" for o in p.header_objects]
            + [f"{o}Type - otype" for o in p.header_objects]
            + [f"{r}Type - rtype" for r in p.static_receptacles]
            + [f"{mangle(o)} - object" for o in sorted(obj_types)]
            + [f"{mangle(r.id)} - receptacle" for r in receptacles]
            + [f"{loc} - location" for loc in locations]
        )
        lines = [f"\n(define (problem plan_gen_{self.split}_{self.index:05d})", "(:domain alfred)", "(:objects"]
        lines += ["        " + d for d in declared] + ["        )", "", "(:init"]
        lines += ["        " + f for f in facts] + ["        )", "", goal_pddl(self)]
        return "\n".join(lines)


def _loc(location: tuple[int, ...]) -> str:
    return mangle("loc|" + "|".join(map(str, location)))


def goal_pddl(game: GeneratedGame) -> str:
    """The goal of ``game``, from alfworld's goal library (the definition's closing paren included)."""
    template = goal_library()[game.task_type]["pddl"]
    return template.format(
        obj=game.object_target, recep=game.parent_target, toggle=game.toggle_target, mrecep=""
    ).replace("#", "-")
