"""The import direction between the project's packages, read from the source with ``ast``.

The floors, bottom to top: ``sapo_gym`` (the envs) imports nothing of the project; ``agents``
imports ``sapo_gym``; ``trainers`` imports ``agents`` and ``sapo_gym`` (the result-bundle writer,
``sapo_gym.bundle``, included); ``leaderboard`` imports ``sapo_gym`` and ``agents``; the command line
(``sapo_cli``) is the roof and imports everything. Every import counts: at module level and inside
functions (a lazy import is still an arrow), ``import x`` and ``from x import y``, relative imports
resolved, and ``importlib.import_module`` / ``__import__`` of a literal name.

Tests follow the same rule for themselves: shared helpers live in the ``tests.support`` package, and no
file under ``tests/`` imports a test module or a helper found only through pytest's ``sys.path``.

Within a floor, no two files import each other, however far round (:func:`test_no_import_circle_between_files`,
over the packages, ``tests/``, ``benchmarks/`` and ``scripts/``; the graph's rules are stated above
:func:`import_graph`): a shared piece moves below both files instead.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ALLOWED: dict[str, tuple[str, ...]] = {
    "sapo_gym": (),
    "agents": ("sapo_gym",),
    "trainers": ("agents", "sapo_gym"),
    "leaderboard": ("sapo_gym", "agents"),
    "sapo_cli": ("sapo_gym", "agents", "trainers", "leaderboard"),
}
"""Per package, the modules (and everything under them) it may import besides itself."""

PROJECT = (*ALLOWED, "tests", "benchmarks", "scripts")
"""Top-level names of the project: an import of any other top-level name (torch, flask, ...) is not an arrow."""


def module_name(path: Path, root: Path = ROOT) -> str:
    """``sapo_gym/alfworld/env.py`` -> ``sapo_gym.alfworld.env``; a package's ``__init__.py`` -> the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(
    source: str, module: str, is_package: bool = False, filename: str = "<source>"
) -> Iterator[tuple[int, str, str | None]]:
    """Every import in ``source`` (the text of ``module``): ``(line, module imported, name imported from it)``.

    ``import a.b`` -> ``(line, "a.b", None)``; ``from a import b`` -> ``(line, "a", "b")`` (``b`` may be a name
    in ``a`` or its submodule ``a.b``); relative imports come back resolved; a literal
    ``importlib.import_module("a")`` or ``__import__("a")`` -> ``(line, "a", None)``.
    """
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                if node.level > len(parts):
                    raise ValueError(f"{filename}:{node.lineno}: relative import beyond the top-level package")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            for alias in node.names:
                yield node.lineno, base, None if alias.name == "*" else alias.name
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("import_module", "__import__"):
                yield node.lineno, node.args[0].value, None


def _within(target: str, prefix: str) -> bool:
    return target == prefix or target.startswith(prefix + ".")


def upward_arrows(source: str, module: str, is_package: bool = False, filename: str = "<source>") -> list[str]:
    """``file:line: package -> imported module`` for each import ``module`` may not make."""
    own = module.split(".")[0]
    out: dict[str, list[str]] = {}
    for line, imported, name in imports(source, module, is_package, filename):
        top = imported.split(".")[0]
        if top == own or top not in PROJECT:
            continue
        if any(_within(imported, ok) for ok in ALLOWED.get(own, ())):
            continue
        out.setdefault(f"{filename}:{line}: {own} -> {imported}", []).extend([name] if name else [])
    return [arrow + (f" (import {', '.join(names)})" if names else "") for arrow, names in out.items()]


def _sources(*packages: str) -> Iterator[Path]:
    for package in packages:
        yield from sorted(p for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts)


def test_every_import_points_down_the_floors():
    arrows = []
    for path in _sources(*ALLOWED):
        arrows += upward_arrows(
            path.read_text(), module_name(path), path.name == "__init__.py", str(path.relative_to(ROOT))
        )
    assert not arrows, (
        "imports against the floors (sapo_gym < agents < trainers, leaderboard < sapo_cli):\n" + "\n".join(arrows)
    )


def test_the_checker_flags_upward_imports_lazy_relative_and_dynamic():
    source = (
        "import torch\n"  # not the project's: ignored
        "from sapo_gym.core import Env\n"  # sideways
        "from . import spaces\n"  # sapo_gym.spaces: sideways
        "def f():\n"
        "    from trainers.core_algos import turn_gae, masked_mean\n"  # lazy, still an arrow
        "    import agents.policy\n"
        "    import importlib\n"
        "    return importlib.import_module('leaderboard.server')\n"
    )
    arrows = upward_arrows(source, "sapo_gym.wrappers", filename="sapo_gym/wrappers.py")
    assert arrows == [
        "sapo_gym/wrappers.py:5: sapo_gym -> trainers.core_algos (import turn_gae, masked_mean)",
        "sapo_gym/wrappers.py:6: sapo_gym -> agents.policy",
        "sapo_gym/wrappers.py:8: sapo_gym -> leaderboard.server",
    ]
    # trainers take the bundle writer from the envs' floor, and nothing of the leaderboard, however written
    trainer = (
        "from sapo_gym.bundle import build_bundle\nfrom leaderboard import replay\nfrom leaderboard.server import app\n"
    )
    assert upward_arrows(trainer, "trainers.compare.runner") == [
        "<source>:2: trainers -> leaderboard (import replay)",
        "<source>:3: trainers -> leaderboard.server (import app)",
    ]
    # relative imports resolve against the importing module's package (an __init__.py is its own package)
    assert list(imports("from ..logits import mask_value_tokens\n", "agents.generation.hf")) == [
        (1, "agents.logits", "mask_value_tokens")
    ]
    assert list(imports("from .base import Method\nfrom . import sapo\n", "trainers.methods", is_package=True)) == [
        (1, "trainers.methods.base", "Method"),
        (2, "trainers.methods", "sapo"),
    ]
    assert upward_arrows("from ..trainers import loop\n", "agents.generation.hf") == []  # agents.trainers: sideways
    # the roof imports everything; the ground imports nothing; agents never reach up to trainers
    assert upward_arrows("import trainers.loop\nimport leaderboard.server.app\n", "sapo_cli.train") == []
    assert upward_arrows("from sapo_cli import main\n", "agents.llm") == [
        "<source>:1: agents -> sapo_cli (import main)"
    ]
    assert upward_arrows("from trainers.core_algos import token_log_probs\n", "agents.logits") != []


def test_tests_import_no_test_module_nor_a_helper_found_through_sys_path():
    """Shared test helpers live in the ``tests.support`` package (``pythonpath = ["."]``); a test file never
    imports another test file, and never a bare sibling module (``from lb_support import ...``: found only
    because pytest puts the test's folder on ``sys.path``)."""
    tests = ROOT / "tests"
    bare = {p.stem for p in tests.rglob("*.py") if not (p.parent / "__init__.py").exists()}
    bad = []
    for path in sorted(p for p in tests.rglob("*.py") if "__pycache__" not in p.parts):
        rel = str(path.relative_to(ROOT))
        for line, imported, name in imports(path.read_text(), module_name(path), path.name == "__init__.py", rel):
            parts = imported.split(".") + ([name] if name else [])
            if any(p.startswith("test_") or p == "conftest" for p in parts) or parts[0] in bare:
                bad.append(f"{rel}:{line}: {imported}")
    bad = list(dict.fromkeys(bad))
    assert not bad, "tests importing a test module or a sys.path helper (use tests.support):\n" + "\n".join(bad)


# --- no import circle between files ----------------------------------------------------------------
#
# The graph: one node per file (a package's ``__init__.py`` is the node of the package's name), one edge per
# import, lazy ones and those under ``if TYPE_CHECKING:`` included, to the file the import reads:
#   * ``import a.b`` and ``from a.b import x`` -> ``a.b`` (``a.b/__init__.py`` when a package); the parent
#     ``a/__init__.py`` that Python runs on the way is no edge (the importer does not read it);
#   * ``from a import b`` where ``a.b`` is a module -> ``a.b``;
#   * ``from a import x`` where ``a/__init__.py`` only re-exports ``x`` (binds it by ``from .y import x`` at
#     module level) -> the file that defines ``x`` (``a.y``, followed through further re-exports). A package's
#     ``__init__`` importing its submodules, which import their siblings' names through the package, is
#     then no circle: the edge goes to the sibling file, as the name does. A name the ``__init__`` defines
#     itself keeps the edge on the ``__init__``.
# A circle is a strongly connected component of more than one file.


def _module_files(root: Path = ROOT, packages: tuple[str, ...] = PROJECT) -> dict[str, Path]:
    files = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                files[module_name(path, root)] = path
    return files


def _reexports(files: dict[str, Path]) -> dict[str, dict[str, str]]:
    """Per package ``__init__``: each name it binds at module level by ``from <module> import name``."""
    out: dict[str, dict[str, str]] = {}
    for module, path in files.items():
        if path.name != "__init__.py":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        top = ast.Module(body=[n for n in tree.body if isinstance(n, ast.ImportFrom)], type_ignores=[])
        for _, imported, name in imports(ast.unparse(top), module, is_package=True):
            if name and f"{imported}.{name}" not in files:
                out.setdefault(module, {})[name] = imported
    return out


def _target(imported: str, name: str | None, files: dict, reexports: dict) -> str | None:
    """The file an import reads (see the rule above), or None when it is not one of the project's files."""
    if name and f"{imported}.{name}" in files:
        return f"{imported}.{name}"
    seen = set()
    while name and imported in reexports and name in reexports[imported] and imported not in seen:
        seen.add(imported)
        imported = reexports[imported][name]
        if f"{imported}.{name}" in files:
            return f"{imported}.{name}"
    while imported and imported not in files:  # ``import a.b.c`` of a name inside a.b: the file a.b
        imported = imported.rpartition(".")[0]
    return imported or None


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PROJECT) -> dict[str, dict[str, str]]:
    """``{module: {imported module: "file:line" of the first such import}}`` over the project's files."""
    files = _module_files(root, packages)
    reexports = _reexports(files)
    graph: dict[str, dict[str, str]] = {module: {} for module in files}
    for module, path in files.items():
        rel = str(path.relative_to(root))
        for line, imported, name in imports(path.read_text(), module, path.name == "__init__.py", rel):
            target = _target(imported, name, files, reexports)
            if target and target != module:
                graph[module].setdefault(target, f"{rel}:{line}")
    return graph


def circles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, {}))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def cycle_path(graph: dict[str, dict[str, str]], component: list[str]) -> list[str]:
    """One circle through the component's first module, as ``file:line: a -> b`` steps (shortest first)."""
    start, members = component[0], set(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier and start not in previous:
        following = []
        for node in frontier:
            for nxt in graph[node]:
                if nxt in members and nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    path, node = [], start
    while True:
        path.append(f"{graph[previous[node]][node]}: {previous[node]} -> {node}")
        node = previous[node]
        if node == start:
            return path[::-1]


def test_no_import_circle_between_files():
    graph = import_graph()
    found = circles(graph)
    report = "\n\n".join("circle of " + ", ".join(c) + ":\n  " + "\n  ".join(cycle_path(graph, c)) for c in found)
    assert not found, "import circles between files (cut each: move the shared piece below both):\n" + report


def test_the_circle_checker_follows_files_reexports_and_lazy_imports(tmp_path):
    def write(rel: str, text: str = "") -> None:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)

    # a package __init__ re-exporting a submodule whose sibling takes the name through the package: no circle
    write("pkg/__init__.py", "from pkg.low import helper\nfrom pkg import high\n")
    write("pkg/low.py", "def helper(): pass\n")
    write("pkg/high.py", "from pkg import helper\nfrom . import low\n")
    # a real circle, one side lazy, through `from package import submodule`
    write("pkg/a.py", "def f():\n    from pkg import b\n")
    write("pkg/b.py", "from pkg.a import f\n")
    # a name the __init__ defines itself: the edge stays on the __init__ (a circle with it)
    write("pkg/own.py", "from pkg import CONSTANT\n")
    write("pkg/__init__.py", "from pkg.low import helper\nfrom pkg import high, own\nCONSTANT = 1\n")
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.high"] == {"pkg.low": "pkg/high.py:1"}
    assert graph["pkg.a"] == {"pkg.b": "pkg/a.py:2"} and graph["pkg.own"] == {"pkg": "pkg/own.py:1"}
    assert circles(graph) == [["pkg", "pkg.own"], ["pkg.a", "pkg.b"]]
    assert cycle_path(graph, ["pkg.a", "pkg.b"]) == ["pkg/a.py:2: pkg.a -> pkg.b", "pkg/b.py:1: pkg.b -> pkg.a"]
