"""Compile one ALFWorld game (``game.tw-pddl``) into static tables for :mod:`.engine`.

Everything that cannot change during play is computed here, once per game: display names (alfworld's
demangler), where each receptacle stands, which receptacles are openable / sinks / microwaves /
fridges, which object may go into which receptacle (``objectType`` x ``receptacleType`` x
``canContain``), the initial dynamic facts and the goal, compiled to ground terms.

Only the ALFWorld domain and grammar this module was written against are accepted (see
:mod:`.signature`); anything else raises :class:`~.pddl.UnsupportedGame`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from sapo_gym.alfworld.engines.compiled.goal import Clause, compile_goal
from sapo_gym.alfworld.engines.compiled.pddl import Fact, UnsupportedGame, parse_problem
from sapo_gym.alfworld.engines.compiled.signature import check_signature
from sapo_gym.alfworld.engines.compiled.state import SUPPORTED_GOAL_PREDICATES

__all__ = ["DYNAMIC", "FLAGS", "CompiledGame", "compile_game", "demangle"]

FLAGS = ("isclean", "ishot", "iscool", "issliced", "istoggled", "ison")
"""Unary object properties the domain's operators set or clear."""
DYNAMIC = frozenset(
    ("atlocation", "objectatlocation", "opened", "inreceptacle", "checked", "holds", "holdsany", *FLAGS)
)
"""Predicates some operator of the domain changes; every other predicate is static."""
_KNIVES = ("knifetype", "butterknifetype")
_SINKS = ("sinktype", "sinkbasintype")


def demangle(ids: list[str]) -> dict[str, str]:
    """alfworld's ``Demangler(shuffle=False)``: ``apple_bar__plus_01...`` -> ``"apple 2"``.

    Ids are numbered per name in *reverse* sorted order (the first sorted id gets the highest number);
    ids without ``_bar_`` keep their text plus a trailing space, as alfworld renders them.
    """
    ids = sorted(ids)
    counts: Counter[str] = Counter()
    for id_ in ids:
        if "_bar_" in id_:
            counts[_base_name(id_)] += 1
    remaining = dict(counts)
    names: dict[str, str] = {}
    for id_ in ids:
        if "_bar_" not in id_:
            names[id_] = _unmangle(id_) + " "
            continue
        base = _base_name(id_)
        names[id_] = f"{base} {remaining[base]}"
        remaining[base] -= 1
    return names


def _base_name(id_: str) -> str:
    name = _unmangle(id_).split("|", 1)[0]
    return name + "basin" if "basin" in id_ else name


def _unmangle(id_: str) -> str:
    for old, new in (("_bar_", "|"), ("_minus_", "-"), ("_plus_", "+"), ("_dot_", "."), ("_comma_", ",")):
        id_ = id_.replace(old, new)
    return id_


@dataclass(frozen=True)
class CompiledGame:
    """Static tables of one game, plus its initial dynamic facts. Ids are lower-cased PDDL names."""

    task: str
    """The task sentence, e.g. ``"Your task is to: put a clean apple in fridge."``."""
    names: dict[str, str]
    """Entity id -> display name (``"drawer 3"``)."""
    agent: str
    """The agent's id (``agent1``)."""
    receptacles: tuple[str, ...]
    """All receptacles standing somewhere, sorted by id (the order the grammar lists them in)."""
    location_of: dict[str, str]
    """Receptacle -> its location."""
    at_location: dict[str, tuple[str, ...]]
    """Location -> receptacles standing there, sorted by id."""
    openable: frozenset[str]
    sinks: frozenset[str]
    microwaves: frozenset[str]
    fridges: frozenset[str]
    accepts: dict[str, frozenset[str]]
    """Receptacle -> objects ``PutObject`` may move into it."""
    properties: dict[str, frozenset[str]]
    """Static unary object predicate (``pickupable``, ``cleanable``, ``toggleable``, ...) -> objects."""
    knives: frozenset[str]
    """Objects of type Knife or ButterKnife (``SliceObject``'s tool)."""
    contained_objects: dict[str, tuple[str, ...]]
    """Receptacle object -> objects ``inReceptacleObject`` it (static), sorted."""
    init: tuple[Fact, ...]
    """Initial dynamic facts."""
    goal: tuple[Clause, ...]
    """The goal compiled by :func:`.goal.compile_goal`."""


def _accepts(
    location_of: dict[str, str],
    rtypes: dict[str, set[str]],
    otypes: dict[str, set[str]],
    can_contain: set[tuple[str, str]],
) -> dict[str, frozenset[str]]:
    """Receptacle -> objects with ``objectType(o, ot) & receptacleType(r, rt) & canContain(rt, ot)``."""
    return {
        r: frozenset(o for o, ots in otypes.items() if any((rt, ot) in can_contain for rt in rtypes[r] for ot in ots))
        for r in location_of
    }


def compile_game(data: dict[str, Any]) -> CompiledGame:
    """Compile a parsed ``game.tw-pddl`` object (raises :class:`UnsupportedGame` when it is unknown)."""
    task = check_signature(data["pddl_domain"], data["grammar"])
    problem = parse_problem(data["pddl_problem"])
    by_pred: dict[str, list[Fact]] = defaultdict(list)
    for fact in dict.fromkeys(problem.init):  # a fact listed twice is one fact
        by_pred[fact[0]].append(fact)
    entities = [arg for facts in by_pred.values() for fact in facts for arg in fact[1:]]
    agents = sorted({f[1] for f in by_pred["atlocation"]})
    if len(agents) != 1 or len(by_pred["atlocation"]) != 1:
        raise UnsupportedGame("expected exactly one agent at one location")
    if by_pred["holds"] or by_pred["holdsany"]:
        raise UnsupportedGame("the agent starts holding something")

    location_of: dict[str, str] = {}
    for _, r, loc in by_pred["receptacleatlocation"]:
        if location_of.setdefault(r, loc) != loc:
            raise UnsupportedGame(f"receptacle {r} stands at two locations")
    at_location: dict[str, list[str]] = defaultdict(list)
    for r in sorted(location_of):
        at_location[location_of[r]].append(r)

    rtypes: dict[str, set[str]] = defaultdict(set)
    for _, r, rt in by_pred["receptacletype"]:
        rtypes[r].add(rt)
    otypes: dict[str, set[str]] = defaultdict(set)
    for _, o, ot in by_pred["objecttype"]:
        otypes[o].add(ot)

    def of_type(wanted: tuple[str, ...]) -> frozenset[str]:
        return frozenset(r for r in location_of if rtypes[r] & set(wanted))

    contained: dict[str, list[str]] = defaultdict(list)
    for _, inner, outer in sorted(by_pred["inreceptacleobject"]):
        contained[outer].append(inner)
    goal = compile_goal(problem.goal, problem.init, problem.objects, DYNAMIC)
    unmodelled = {fact[0] for clause in goal for term in clause for fact in term} - SUPPORTED_GOAL_PREDICATES
    if unmodelled:
        raise UnsupportedGame(f"the goal reads {sorted(unmodelled)}, which the engine does not track")
    static_props = ("pickupable", "cleanable", "heatable", "coolable", "toggleable", "sliceable", "isreceptacleobject")
    return CompiledGame(
        task=task,
        names=demangle(sorted(set(entities))),
        agent=agents[0],
        receptacles=tuple(sorted(location_of)),
        location_of=location_of,
        at_location={loc: tuple(rs) for loc, rs in at_location.items()},
        openable=frozenset(f[1] for f in by_pred["openable"]),
        sinks=of_type(_SINKS),
        microwaves=of_type(("microwavetype",)),
        fridges=of_type(("fridgetype",)),
        accepts=_accepts(location_of, rtypes, otypes, {(f[1], f[2]) for f in by_pred["cancontain"]}),
        properties={p: frozenset(f[1] for f in by_pred[p]) for p in static_props},
        knives=frozenset(o for o, ots in otypes.items() if ots & set(_KNIVES)),
        contained_objects={outer: tuple(inner) for outer, inner in contained.items()},
        init=tuple(f for fs in by_pred.values() for f in fs if f[0] in DYNAMIC),
        goal=goal,
    )
