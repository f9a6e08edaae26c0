"""Goal compilation: a PDDL goal becomes clauses of ground terms over the dynamic facts.

``won`` is ``all(any(all(fact holds for fact in term) for term in clause) for clause in clauses)``.
Static atoms (predicates no operator changes) are evaluated once, at compile time, by a join over
the initial facts; what is left of each existential is a short disjunction of dynamic conjunctions
(for the six ALFWorld goal shapes: 1 to ~100 terms of 1 to 3 facts).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator

from sapo_gym.alfworld.engines.compiled.pddl import Fact, SExpr, UnsupportedGame, typed_list

__all__ = ["Clause", "compile_goal"]

Clause = tuple[tuple[Fact, ...], ...]
"""A disjunction of conjunctions of dynamic ground facts."""


def _flatten(body: SExpr, variables: dict[str, str], atoms: list[list[str]], distinct: list[tuple[str, str]]) -> None:
    """Collect the atoms, ``(not (= x y))`` constraints and nested variables of an existential body."""
    if not isinstance(body, list) or not body:
        raise UnsupportedGame(f"unsupported goal element {body!r}")
    head = body[0]
    if head == "and":
        for part in body[1:]:
            _flatten(part, variables, atoms, distinct)
    elif head == "exists":
        for name, type_ in typed_list(body[1]):  # type: ignore[arg-type]
            if name in variables:
                raise UnsupportedGame(f"goal variable {name} is bound twice")
            variables[name] = type_
        for part in body[2:]:
            _flatten(part, variables, atoms, distinct)
    elif head == "not" and isinstance(body[1], list) and body[1][0] == "=" and len(body[1]) == 3:
        distinct.append((str(body[1][1]), str(body[1][2])))
    elif all(isinstance(x, str) for x in body) and head not in ("or", "not", "forall", "imply", "when", "="):
        atoms.append([str(x) for x in body])
    else:
        raise UnsupportedGame(f"unsupported goal element {body!r}")


def _ground(  # noqa: C901 (a backtracking search: its two inner generators count here)
    atoms: list[list[str]],
    variables: dict[str, str],
    distinct: list[tuple[str, str]],
    static_index: dict[str, list[Fact]],
    objects: dict[str, str],
    dynamic: frozenset[str],
) -> Iterator[tuple[Fact, ...]]:
    """Enumerate the dynamic terms of one existential whose static atoms hold initially."""
    static = [a for a in atoms if a[0] not in dynamic]
    dyn = [a for a in atoms if a[0] in dynamic]

    def solve(i: int, binding: dict[str, str]) -> Iterator[dict[str, str]]:
        if i == len(static):
            yield from _enumerate_rest(binding)
            return
        pred, *args = static[i]
        for fact in static_index.get(pred, ()):
            if len(fact) != len(args) + 1:
                continue
            new = dict(binding)
            for arg, value in zip(args, fact[1:]):
                if arg.startswith("?"):
                    if new.setdefault(arg, value) != value or not _is_a(value, variables[arg], objects):
                        break
                elif arg != value:
                    break
            else:
                yield from solve(i + 1, new)

    def _enumerate_rest(binding: dict[str, str]) -> Iterator[dict[str, str]]:
        free = [v for v in variables if v not in binding]
        if not free:
            yield binding
            return
        var = free[0]
        if variables[var] == "object":  # Fast Downward's root type: every object; refuse to enumerate it.
            raise UnsupportedGame(f"goal variable {var} is constrained by no static fact")
        for name, type_ in objects.items():
            if type_ == variables[var]:
                yield from _enumerate_rest({**binding, var: name})

    seen: set[tuple[Fact, ...]] = set()
    for binding in solve(0, {}):
        if any(binding[a] == binding[b] for a, b in distinct):
            continue
        term = tuple(tuple(binding.get(x, x) for x in atom) for atom in dyn)
        if term not in seen:
            seen.add(term)
            yield term


def _is_a(name: str, type_: str, objects: dict[str, str]) -> bool:
    return type_ == "object" or objects.get(name) == type_


def compile_goal(
    goal: SExpr, init: Iterable[Fact], objects: dict[str, str], dynamic: frozenset[str]
) -> tuple[Clause, ...]:
    """Compile ``(and part ...)`` where each part is an existential or a ground atom."""
    static_index: dict[str, list[Fact]] = defaultdict(list)
    for fact in init:
        if fact[0] not in dynamic:
            static_index[fact[0]].append(fact)
    parts = goal[1:] if isinstance(goal, list) and goal and goal[0] == "and" else [goal]
    clauses: list[Clause] = []
    for part in parts:
        variables: dict[str, str] = {}
        atoms: list[list[str]] = []
        distinct: list[tuple[str, str]] = []
        _flatten(part, variables, atoms, distinct)
        clauses.append(tuple(_ground(atoms, variables, distinct, static_index, objects, dynamic)))
    return tuple(clauses)
