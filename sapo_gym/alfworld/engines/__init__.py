"""Game engines behind :class:`~sapo_gym.alfworld.env.AlfWorldEnv`, and their registry.

An engine plays one ALFWorld game file (``game.tw-pddl``: a JSON object with ``pddl_domain``,
``grammar``, ``pddl_problem`` and usually ``walkthrough``). It speaks the raw engine language
(:class:`~.protocol.GameEngine`): commands in, ``(observation, admissible commands, won)`` out, with
the admissible list exactly as the engine produces it (sorted, ``help`` included). Everything above
that (parsing, rewards, dropping ``help``) belongs to the env.

* ``"reference"`` — :class:`~.reference.ReferenceEngine`: TextWorld's ``PddlEnv`` wrapped in
  alfworld's ``AlfredDemangler(shuffle=False)`` and ``AlfredInfos``, exactly as the ALFWorld
  baselines (and the golden traces in ``shared/data/alfworld/golden``) ran it.
* ``"compiled"`` — :class:`~.compiled.CompiledEngine`: each game as a plain Python state machine,
  byte-identical to the reference (docs/alfworld_engine.md).
* further engines register in :data:`ENGINES` (``name -> factory(game_file) -> GameEngine``).

textworld / alfworld are imported lazily, inside the reference engine, so importing this package
(and ``import sapo_gym``) stays light, and the compiled engine plays without them (``pip install sapo-gym``).
The checks that the engines agree are no part of the runtime: they live in ``benchmarks/alfworld_verification``
(used by the benchmarks and the tests), which depends on this package, never the other way round.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from sapo_gym.alfworld.engines.compiled import CompiledEngine
from sapo_gym.alfworld.engines.protocol import EngineState, FileVersion, GameEngine, file_version
from sapo_gym.alfworld.engines.reference import ReferenceEngine

__all__ = [
    "ENGINES",
    "REPRODUCED_VERSIONS",
    "CompiledEngine",
    "EngineFactory",
    "EngineState",
    "FileVersion",
    "GameEngine",
    "ReferenceEngine",
    "engine_versions",
    "file_version",
    "load_engine",
]

EngineFactory = Callable[[str], GameEngine]

ENGINES: dict[str, EngineFactory] = {
    "reference": ReferenceEngine,
    "compiled": CompiledEngine,
}
"""Engine name -> factory taking a game file path. Add an engine with one line here."""


def load_engine(game_file: str | os.PathLike[str], engine: str = "reference") -> GameEngine:
    """Load ``game_file`` into the engine named ``engine`` (one of :data:`ENGINES`)."""
    try:
        factory = ENGINES[engine]
    except KeyError:
        raise ValueError(f"unknown ALFWorld engine {engine!r}; valid choices: {sorted(ENGINES)}") from None
    return factory(str(Path(game_file)))


REPRODUCED_VERSIONS: dict[str, str] = {"alfworld": "0.4.2", "textworld": "1.7.0", "fast-downward-textworld": "20.6.4"}
"""The reference engine's packages whose behaviour the compiled engine reproduces byte for byte (its domain,
grammar and generator tables ship in the package, rebuilt from alfworld 0.4.2): the ``backend`` of the
spec of an env on the compiled engine, installed or not (the alfworld extra pins the same versions)."""


def engine_versions() -> dict[str, str]:
    """Versions of the packages the reference engine's behaviour depends on, as installed (no heavy imports)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str] = {}
    for pkg in ("alfworld", "textworld", "fast-downward-textworld"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out
