"""A minimal PDDL problem reader: objects with types, the initial facts, the goal formula.

Names are lower-cased, as Fast Downward's parser (and therefore the reference engine) does. Only what
ALFWorld problems use is accepted; anything else raises :class:`UnsupportedGame`, and the engine falls
back to the reference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["UnsupportedGame", "SExpr", "Problem", "parse_sexpr", "parse_problem"]

SExpr = str | list["SExpr"]
Fact = tuple[str, ...]
"""A ground atom: ``(predicate, arg, ...)``, all lower-case."""

_TOKEN = re.compile(r"[()]|[^\s()]+")


class UnsupportedGame(ValueError):
    """The game uses something this engine was not compiled for (the reference engine takes over)."""


def parse_sexpr(text: str) -> SExpr:
    """Parse one s-expression (``;`` comments dropped, lower-cased)."""
    text = re.sub(r";[^\n]*", "", text).lower()
    stack: list[list[SExpr]] = [[]]
    for token in _TOKEN.findall(text):
        if token == "(":
            stack.append([])
        elif token == ")":
            if len(stack) == 1:
                raise UnsupportedGame("unbalanced ')' in PDDL")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(token)
    if len(stack) != 1 or len(stack[0]) != 1:
        raise UnsupportedGame("PDDL text is not one balanced s-expression")
    return stack[0][0]


def typed_list(items: list[SExpr]) -> list[tuple[str, str]]:
    """``a b - t c - u`` -> ``[(a, t), (b, t), (c, u)]`` (untyped names get ``object``)."""
    out: list[tuple[str, str]] = []
    pending: list[str] = []
    it = iter(items)
    for item in it:
        if not isinstance(item, str):
            raise UnsupportedGame(f"unexpected list in typed list: {item!r}")
        if item == "-":
            type_ = next(it, None)
            if not isinstance(type_, str):
                raise UnsupportedGame("unsupported type expression (either?)")
            out.extend((name, type_) for name in pending)
            pending = []
        else:
            pending.append(item)
    out.extend((name, "object") for name in pending)
    return out


@dataclass(frozen=True)
class Problem:
    """The parts of a PDDL problem the engine compiles."""

    objects: dict[str, str]
    """Object name -> declared type (insertion order = declaration order)."""
    init: list[Fact]
    """Initial atoms in file order (numeric fluents such as ``total-cost`` dropped)."""
    goal: SExpr
    """The goal formula, as an s-expression."""


def parse_problem(text: str) -> Problem:
    """Read a ``(define (problem ...) ...)`` form."""
    tree = parse_sexpr(text)
    if not isinstance(tree, list) or not tree or tree[0] != "define":
        raise UnsupportedGame("not a PDDL define form")
    sections = {item[0]: item[1:] for item in tree[1:] if isinstance(item, list) and item}
    if ":objects" not in sections or ":init" not in sections or ":goal" not in sections:
        raise UnsupportedGame("problem lacks :objects, :init or :goal")
    objects = dict(typed_list(sections[":objects"]))
    init: list[Fact] = []
    for atom in sections[":init"]:
        if isinstance(atom, list) and atom and atom[0] == "=":
            continue  # numeric fluent initialisation, e.g. (= (total-cost) 0)
        if not isinstance(atom, list) or not atom or not all(isinstance(a, str) for a in atom):
            raise UnsupportedGame(f"unsupported init element: {atom!r}")
        if any(arg not in objects for arg in atom[1:]):
            raise UnsupportedGame(f"init atom mentions an undeclared object: {atom!r}")
        init.append(tuple(atom))  # type: ignore[arg-type]
    (goal,) = sections[":goal"]
    return Problem(objects=objects, init=init, goal=goal)
