"""Sampling generated ALFWorld games: a task of one of the six types in one floor plan.

Deterministic: everything comes from the ``random.Random`` passed in. Follows ALFRED's rules: a
task type only in the rooms ALFRED uses for it (``constants.GOALS_VALID``), the goal false at the
start (no target object already in a target receptacle), every object in a receptacle that may
hold it, openable receptacles closed, the agent away from every receptacle.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from sapo_gym.alfworld.generator.problem import GeneratedGame
from sapo_gym.alfworld.generator.scenes import LAMP_HOLDERS, Receptacle, Scene, props

__all__ = ["ROOMS", "sample_game", "templates"]

ROOMS = {
    "pick_and_place_simple": ("Kitchen", "LivingRoom", "Bathroom", "Bedroom"),
    "look_at_obj_in_light": ("LivingRoom", "Bedroom"),
    "pick_clean_then_place_in_recep": ("Kitchen", "Bathroom"),
    "pick_heat_then_place_in_recep": ("Kitchen",),
    "pick_cool_then_place_in_recep": ("Kitchen",),
    "pick_two_obj_and_place": ("Kitchen", "LivingRoom", "Bathroom", "Bedroom"),
}
"""Rooms per task type (ALFRED's ``constants.GOALS_VALID``)."""

_TOOL = {
    "pick_clean_then_place_in_recep": ("SinkBasin", "cleanable"),
    "pick_heat_then_place_in_recep": ("Microwave", "heatable"),
    "pick_cool_then_place_in_recep": ("Fridge", "coolable"),
}


def templates(task_type: str) -> list[str]:
    """Task-sentence templates of alfworld's goal library for ``task_type``."""
    from alfworld.gen import goal_library

    return list(goal_library.gdict[task_type]["templates"])


def _holders(scene: Scene, obj: str) -> list[Receptacle]:
    can = props().can_contain
    return [r for r in scene.receptacles if obj in can.get(r.type, ())]


def _target(rng: random.Random, task_type: str, scene: Scene) -> tuple[str, str] | None:
    """(object type, receptacle type or lamp) for ``task_type`` in ``scene``, or None."""
    p, types = props(), scene.receptacle_types()
    portable = [t for t in scene.object_types if t not in p.toggleable]
    if task_type == "look_at_obj_in_light":
        if "DeskLamp" not in scene.object_types or not any(r.type in LAMP_HOLDERS for r in scene.receptacles):
            return None
        objs = [t for t in portable if _holders(scene, t)]
        return (rng.choice(objs), "DeskLamp") if objs else None
    tool, kind = _TOOL.get(task_type, (None, None))
    if tool is not None and tool not in types:
        return None
    pairs = [
        (o, r)
        for o in portable
        if kind is None or o in getattr(p, kind)
        for r in sorted(types)
        if r != tool and o in p.can_contain.get(r, ()) and any(h.type != r for h in _holders(scene, o))
    ]
    return rng.choice(pairs) if pairs else None


def _thor_id(rng: random.Random, kind: str, near: Receptacle, taken: set[str]) -> str:
    x, y, z = near.id.split("|")[1:4]
    while True:
        coords = [float(v) + rng.uniform(-0.3, 0.3) for v in (x, y, z)]
        thor_id = kind + "".join(f"|{c:+06.2f}" for c in coords)
        if thor_id not in taken:
            taken.add(thor_id)
            return thor_id


def _place(rng: random.Random, scene: Scene, task_type: str, obj: str, recep: str) -> tuple[tuple[str, str], ...]:
    """Every object of the scene in a receptacle that may hold it (targets never in the goal's receptacle)."""
    taken: set[str] = set()
    placed: list[tuple[str, str]] = []
    for kind in scene.object_types:
        if kind == "DeskLamp":
            if task_type == "look_at_obj_in_light":
                holder = rng.choice([r for r in scene.receptacles if r.type in LAMP_HOLDERS])
                placed.append((_thor_id(rng, kind, holder, taken), holder.id))
            continue
        holders = [r for r in _holders(scene, kind) if not (kind == obj and r.type == recep)]
        if not holders:
            continue
        low = 2 if (kind == obj and task_type == "pick_two_obj_and_place") else 1
        for _ in range(rng.randint(low, 3 if kind == obj else 2)):
            holder = rng.choice(holders)
            placed.append((_thor_id(rng, kind, holder, taken), holder.id))
    return tuple(placed)


def _agent_start(rng: random.Random, scene: Scene) -> tuple[int, int, int, int]:
    xs = [r.location[0] for r in scene.receptacles]
    zs = [r.location[1] for r in scene.receptacles]
    occupied = {r.location for r in scene.receptacles}
    while True:
        loc = (rng.randint(min(xs), max(xs)), rng.randint(min(zs), max(zs)), rng.randrange(4), 30)
        if loc not in occupied:
            return loc


def sample_game(
    rng: random.Random, task_type: str, scenes: Sequence[Scene], split: str, index: int
) -> GeneratedGame | None:
    """A game of ``task_type`` in one of ``scenes`` (the caller retries on None)."""
    candidates = [s for s in scenes if s.room in ROOMS[task_type] and len(s.receptacles) >= 4]
    if not candidates:
        return None
    scene = rng.choice(candidates)
    target = _target(rng, task_type, scene)
    if target is None:
        return None
    obj, recep = target
    look = task_type == "look_at_obj_in_light"
    sentence = rng.choice(templates(task_type)).format(
        obj=obj.lower(), recep=recep.lower(), toggle=recep.lower(), mrecep=""
    )
    return GeneratedGame(
        split=split,
        index=index,
        task_type=task_type,
        scene=scene.number,
        object_target=obj,
        parent_target="" if look else recep,
        toggle_target=recep if look else "",
        sentence=sentence,
        agent=_agent_start(rng, scene),
        objects=_place(rng, scene, task_type, obj, recep),
    )
