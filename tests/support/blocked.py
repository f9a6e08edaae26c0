"""Run Python code in a subprocess where some installed packages look uninstalled.

Every finder on ``sys.meta_path`` is wrapped so that a blocked top-level module is not found (``import x``
raises ``ModuleNotFoundError: No module named 'x'``, ``importlib.util.find_spec("x")`` is None) and a
blocked distribution has no metadata (``importlib.metadata.version`` raises ``PackageNotFoundError``),
exactly as when they were never installed. The wrapping is the first code the interpreter runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

ALFWORLD_MODULES = ("alfworld", "textworld", "fast_downward", "tatsu", "tqdm")
ALFWORLD_DISTRIBUTIONS = ("alfworld", "textworld", "fast-downward-textworld", "tatsu", "tqdm")

_PRELUDE = """
import re, sys
_BLOCKED, _DISTS = {modules!r}, {dists!r}

class _Hide:
    def __init__(self, finder):
        self._finder = finder
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _BLOCKED:
            return None
        find = getattr(self._finder, "find_spec", None)
        return find(name, path, target) if find is not None else None
    def find_distributions(self, *args, **kwargs):
        find = getattr(self._finder, "find_distributions", None)
        for dist in (find(*args, **kwargs) if find is not None else ()):
            if re.sub(r"[-_.]+", "-", (dist.metadata["Name"] or "").lower()) not in _DISTS:
                yield dist
    def invalidate_caches(self):
        getattr(self._finder, "invalidate_caches", lambda: None)()

assert not any(m.partition(".")[0] in _BLOCKED for m in sys.modules), "already imported"
sys.meta_path[:] = [_Hide(f) for f in sys.meta_path]
"""


def prelude(modules: Iterable[str], distributions: Iterable[str] = ()) -> str:
    """Python source that hides ``modules`` (top-level import names) and ``distributions`` (project names)."""
    return _PRELUDE.format(modules=frozenset(modules), dists=frozenset(d.lower() for d in distributions))


def run_without(
    code: str, modules: Iterable[str], distributions: Iterable[str] = (), timeout: float = 600
) -> subprocess.CompletedProcess:
    """Run ``code`` with ``modules`` and ``distributions`` hidden, from the repository root."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-c", prelude(modules, distributions) + code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
