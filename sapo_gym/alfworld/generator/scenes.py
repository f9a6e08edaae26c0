"""AI2-THOR floor plans as ALFWorld sees them, from alfworld's generator files shipped in the package.

``alfworld/gen/layouts/FloorPlan<N>-openable.json`` lists a scene's receptacles with the agent pose
from which each is reached (x, z, rotation, camera horizon); ``-objects.json`` lists the object
types the scene holds. ``alfworld.gen.constants`` says which receptacle may hold which object
and which objects are cleanable, heatable, coolable, toggleable or sliceable. Both ship in
``from_alfworld/`` (``layouts.json.gz``, ``constants.json``; rebuilt from the wheel by :mod:`.wheel`),
so rendering a generated game needs no alfworld install.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from sapo_gym.alfworld.generator.logic import shipped_text

__all__ = ["Location", "Props", "Receptacle", "Scene", "load_scene", "mangle", "props"]

Location = tuple[int, int, int, int]
"""(x, z, rotation, horizon) on ALFRED's 0.25 m grid, as in ``loc|x|z|rot|horizon``."""

_RECEPTACLE_ALIASES = {"Sink": "SinkBasin", "Bathtub": "BathtubBasin"}
"""The layouts name the sink and bathtub; ALFWorld's receptacles are their basins."""

LAMP_HOLDERS = frozenset({"Desk", "SideTable", "Dresser", "Shelf", "CoffeeTable", "TVStand", "DiningTable"})
"""Non-openable receptacles a desk lamp stands on in generated ``look`` games."""


def mangle(name: str) -> str:
    """ALFWorld's PDDL spelling of an AI2-THOR id: ``Apple|+01.00|-02.50`` -> ``Apple_bar__plus_01_dot_00_bar_...``."""
    for a, b in (("|", "_bar_"), ("-", "_minus_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        name = name.replace(a, b)
    return name


@dataclass(frozen=True)
class Receptacle:
    id: str
    """AI2-THOR id, e.g. ``Cabinet|+00.68|+00.50|-02.20`` or ``Sink|+00.02|+00.77|-01.71|SinkBasin``."""
    type: str
    location: Location


@dataclass(frozen=True)
class Scene:
    number: int
    room: str
    """Kitchen, LivingRoom, Bedroom or Bathroom."""
    receptacles: tuple[Receptacle, ...]
    object_types: tuple[str, ...]
    """Portable object types of the scene (and DeskLamp where present), sorted."""

    def receptacle_types(self) -> set[str]:
        return {r.type for r in self.receptacles}


@dataclass(frozen=True)
class Props:
    """Type-level facts from ``alfworld.gen.constants``."""

    header_objects: tuple[str, ...]
    static_receptacles: tuple[str, ...]
    can_contain: dict[str, frozenset[str]]
    cleanable: frozenset[str]
    heatable: frozenset[str]
    coolable: frozenset[str]
    toggleable: frozenset[str]
    sliceable: frozenset[str]
    receptacle_objects: frozenset[str]
    openable: frozenset[str]
    scene_types: dict[str, range]
    train_scenes: tuple[int, ...]
    test_scenes: tuple[int, ...]

    @property
    def portable(self) -> frozenset[str]:
        return frozenset(t for held in self.can_contain.values() for t in held if "Sliced" not in t)


@lru_cache(maxsize=1)
def props() -> Props:
    c = json.loads(shipped_text("constants.json"))
    static = sorted(set(c["RECEPTACLES"]) - set(c["MOVABLE_RECEPTACLES"]))
    actions = c["VAL_ACTION_OBJECTS"]
    return Props(
        header_objects=tuple(o for o in c["OBJECTS"] if o not in static),
        static_receptacles=tuple(static),
        can_contain={r: frozenset(o) for r, o in c["VAL_RECEPTACLE_OBJECTS"].items()},
        cleanable=frozenset(actions["Cleanable"]),
        heatable=frozenset(actions["Heatable"]),
        coolable=frozenset(actions["Coolable"]),
        toggleable=frozenset(actions["Toggleable"]),
        sliceable=frozenset(actions["Sliceable"]),
        receptacle_objects=frozenset(c["MOVABLE_RECEPTACLES"]),
        openable=frozenset(c["OPENABLE_CLASS_LIST"]),
        scene_types={room: range(*bounds) for room, bounds in c["SCENE_TYPE"].items()},
        train_scenes=tuple(c["TRAIN_SCENE_NUMBERS"]),
        test_scenes=tuple(c["TEST_SCENE_NUMBERS"]),
    )


@lru_cache(maxsize=1)
def _layouts() -> dict[str, Any]:
    """``FloorPlan<N>-openable.json`` / ``-objects.json`` (file name -> parsed content) of every floor plan."""
    return json.loads(shipped_text("layouts.json.gz"))


@cache
def load_scene(number: int) -> Scene:
    """Scene ``FloorPlan<number>`` with its receptacles (basins for sink/bathtub) and portable objects."""
    p = props()
    layouts = _layouts()
    poses = layouts[f"FloorPlan{number}-openable.json"]
    receptacles = []
    for thor_id, (x, z, rotation, horizon) in sorted(poses.items()):
        kind = thor_id.split("|", 1)[0]
        kind = _RECEPTACLE_ALIASES.get(kind, kind)
        if kind in p.static_receptacles:
            location = (round(x / 0.25), round(z / 0.25), int(rotation) // 90 % 4, int(horizon))
            receptacles.append(Receptacle(thor_id, kind, location))
    listed = set(layouts[f"FloorPlan{number}-objects.json"])
    portable = (listed & p.portable) | (listed & {"DeskLamp"})
    room = next(name for name, numbers in p.scene_types.items() if number in numbers)
    return Scene(number, room, tuple(receptacles), tuple(sorted(portable)))
