"""Sampling generated ALFWorld games: a task of one of the six types in one floor plan.

Deterministic: everything comes from the ``random.Random`` passed in. Follows ALFRED's rules: a
task type only in the rooms ALFRED uses for it (``constants.GOALS_VALID``), the goal false at the
start (no target object already in a target receptacle), every object in a receptacle that may
hold it, openable receptacles closed, the agent away from every receptacle.

``max_receptacles=K`` (ALFWorld-Mini) keeps at most K of the floor plan's receptacles: always the
ones the task needs (the goal's receptacle, a holder of the goal object other than it, the sink
basin / microwave / fridge of clean / heat / cool tasks, a lamp holder for look tasks), then others
drawn from the same RNG; objects go only into kept receptacles. ``max_distractors=D`` places only D
object types besides the goal's (and the lamp), drawn from the same RNG. ``None`` (both) draws
nothing more, so the default games are exactly those of ``generated-v1``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from sapo_gym.alfworld.generator.logic import goal_library
from sapo_gym.alfworld.generator.problem import GeneratedGame
from sapo_gym.alfworld.generator.scenes import LAMP_HOLDERS, Receptacle, Scene, props

__all__ = ["MIN_RECEPTACLES", "ROOMS", "keep_receptacles", "sample_game", "templates"]

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


MIN_RECEPTACLES = 3
"""The smallest ``max_receptacles``: a clean/heat/cool task needs its goal receptacle, a holder of the
object and the tool."""


def templates(task_type: str) -> list[str]:
    """Task-sentence templates of alfworld's goal library for ``task_type``."""
    return list(goal_library()[task_type]["templates"])


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


def _place(
    rng: random.Random, scene: Scene, task_type: str, obj: str, recep: str, max_distractors: int | None = None
) -> tuple[tuple[str, str], ...]:
    """Every object of the scene in a receptacle that may hold it (targets never in the goal's receptacle);
    with ``max_distractors``, only that many object types besides the goal's (drawn from ``rng``)."""
    taken: set[str] = set()
    placed: list[tuple[str, str]] = []
    kinds = scene.object_types
    if max_distractors is not None:
        others = [k for k in kinds if k not in (obj, "DeskLamp") and _holders(scene, k)]
        chosen = set(rng.sample(others, min(max_distractors, len(others)))) | {obj, "DeskLamp"}
        kinds = tuple(k for k in kinds if k in chosen)
    for kind in kinds:
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


def keep_receptacles(rng: random.Random, scene: Scene, task_type: str, obj: str, recep: str, k: int) -> Scene | None:
    """``scene`` with at most ``k`` receptacles, the task's needed ones always kept (None if they cannot be).

    Needed: a receptacle of the goal type (look: a lamp holder), a holder of ``obj`` of another type
    (the object must not start in the goal), and the tool of clean/heat/cool. The rest are drawn
    uniformly from the other receptacles; the kept ones stay in the floor plan's order."""
    if k < MIN_RECEPTACLES:
        raise ValueError(f"max_receptacles must be at least {MIN_RECEPTACLES}, got {k}")
    look = task_type == "look_at_obj_in_light"
    tool = _TOOL.get(task_type, (None, None))[0]
    needed: list[Receptacle] = []

    def need(choices: list[Receptacle]) -> bool:
        if any(r in needed for r in choices):
            return True  # already kept (e.g. the lamp holder also holds the object)
        if not choices:
            return False
        needed.append(rng.choice(choices))
        return True

    if look:
        ok = need([r for r in scene.receptacles if r.type in LAMP_HOLDERS]) and need(_holders(scene, obj))
    else:
        ok = need([r for r in scene.receptacles if r.type == recep])
        ok = ok and (tool is None or need([r for r in scene.receptacles if r.type == tool]))
        ok = ok and need([r for r in _holders(scene, obj) if r.type != recep])
    if not ok or len(needed) > k:
        return None
    others = [r for r in scene.receptacles if r not in needed]
    kept = set(needed) | set(rng.sample(others, min(k - len(needed), len(others))))
    return replace(scene, receptacles=tuple(r for r in scene.receptacles if r in kept))


def _agent_start(rng: random.Random, scene: Scene) -> tuple[int, int, int, int]:
    xs = [r.location[0] for r in scene.receptacles]
    zs = [r.location[1] for r in scene.receptacles]
    occupied = {r.location for r in scene.receptacles}
    while True:
        loc = (rng.randint(min(xs), max(xs)), rng.randint(min(zs), max(zs)), rng.randrange(4), 30)
        if loc not in occupied:
            return loc


def sample_game(
    rng: random.Random,
    task_type: str,
    scenes: Sequence[Scene],
    split: str,
    index: int,
    max_receptacles: int | None = None,
    max_distractors: int | None = None,
) -> GeneratedGame | None:
    """A game of ``task_type`` in one of ``scenes`` (the caller retries on None); at most
    ``max_receptacles`` receptacles in the room and ``max_distractors`` object types besides the goal's
    when given."""
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
    kept: tuple[str, ...] = ()
    if max_receptacles is not None:
        small = keep_receptacles(rng, scene, task_type, obj, recep, max_receptacles)
        if small is None:
            return None
        scene, kept = small, tuple(r.id for r in small.receptacles)
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
        objects=_place(rng, scene, task_type, obj, recep, max_distractors),
        receptacles=kept,
    )
