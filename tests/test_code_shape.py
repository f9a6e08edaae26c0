"""The house rules a newcomer can rely on: no function over 60 lines, none over ruff's complexity limit, and the
whole repository clean under ``ruff check`` and formatted as ``ruff format`` writes it (the rules and their reasons
are in pyproject.toml's ``[tool.ruff]``).

A file's length is not a rule: where code is cut follows what it does. ``python tests/test_code_shape.py`` lists
the package files over :data:`LONG_FILE_LINES` lines, as a signal for review.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sapo_gym", "agents", "trainers", "leaderboard", "sapo_cli")
MAX_FUNCTION_LINES = 60
LONG_FILE_LINES = 400
"""A review signal, not a limit: files over this many lines are listed by running this file."""


def long_functions(source: str, name: str) -> list[str]:
    """``name:LINE f(): N lines`` for each function over :data:`MAX_FUNCTION_LINES`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{name}:{node.lineno} {node.name}(): {length} lines")
    return found


def package_files() -> list[Path]:
    return [path for pkg in PACKAGES for path in sorted((ROOT / pkg).rglob("*.py"))]


def ruff(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """``ruff ARGS`` in the repository root, under pyproject.toml's configuration."""
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=300
    )


needs_ruff = pytest.mark.skipif(
    importlib.util.find_spec("ruff") is None, reason="ruff is not installed (the dev extra pins it)"
)


def test_the_checker_flags_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def f():\n{body}\n", "m.py") == [f"m.py:1 f(): {MAX_FUNCTION_LINES + 1} lines"]
    assert long_functions("def f():\n    return 1\n", "m.py") == []


def test_no_function_over_60_lines():
    found = [hit for path in package_files() for hit in long_functions(path.read_text(), str(path.relative_to(ROOT)))]
    assert not found, "\n".join(found)


@needs_ruff
def test_ruff_flags_a_function_over_the_complexity_limit():
    """The configuration holds C901: 13 branches (complexity 14) is over the limit, 11 (12) is not."""

    def source(branches: int) -> str:
        return (
            "def f(x):\n"
            + "".join(f"    if x == {i}:\n        return {i}\n" for i in range(branches))
            + "    return -1\n"
        )

    over = ruff("check", "--select", "C901", "--stdin-filename", "m.py", "-", stdin=source(13))
    assert over.returncode == 1 and "C901" in over.stdout, over.stdout + over.stderr
    within = ruff("check", "--select", "C901", "--stdin-filename", "m.py", "-", stdin=source(11))
    assert within.returncode == 0, within.stdout + within.stderr


@needs_ruff
def test_ruff_check_passes():
    result = ruff("check", "--output-format", "concise", ".")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_ruff
def test_ruff_format_check_flags_an_unformatted_file():
    """The configuration's format check answers 1 on code the formatter would change, 0 on code it would keep."""
    unformatted = ruff("format", "--check", "--stdin-filename", "m.py", "-", stdin="x = {'a':1}\n")
    assert unformatted.returncode == 1, unformatted.stdout + unformatted.stderr
    formatted = ruff("format", "--check", "--stdin-filename", "m.py", "-", stdin='x = {"a": 1}\n')
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr


@needs_ruff
def test_ruff_format_check_passes():
    """Every file as ``ruff format .`` writes it; the failure lists the files to run it on."""
    result = ruff("format", "--check", "--output-format", "concise", ".")
    assert result.returncode == 0, "run `ruff format .`:\n" + result.stdout + result.stderr


if __name__ == "__main__":
    for path in package_files():
        lines = path.read_text().count("\n")
        if lines > LONG_FILE_LINES:
            print(f"{path.relative_to(ROOT)}: {lines} lines")
