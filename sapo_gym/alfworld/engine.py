"""Game engines behind :class:`~sapo_gym.alfworld.env.AlfWorldEnv`.

An engine plays one ALFWorld game file (``game.tw-pddl``: a JSON object with ``pddl_domain``,
``grammar``, ``pddl_problem`` and usually ``walkthrough``). It speaks the raw engine language:
commands in, ``(observation, admissible commands, won)`` out, with the admissible list exactly as
the engine produces it (sorted, ``help`` included). Everything above that (parsing, rewards,
dropping ``help``) belongs to the env.

* ``"reference"`` — :class:`ReferenceEngine`: TextWorld's ``PddlEnv`` wrapped in alfworld's
  ``AlfredDemangler(shuffle=False)`` and ``AlfredInfos``, exactly as the ALFWorld baselines (and
  the golden traces in ``shared/data/alfworld/golden``) ran it.
* further engines register in :data:`ENGINES` (``name -> factory(game_file) -> GameEngine``).

textworld / alfworld are imported lazily, inside the engine, so ``import sapo_gym`` stays light.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["ENGINES", "EngineState", "GameEngine", "ReferenceEngine", "engine_versions", "load_engine"]


@dataclass(frozen=True)
class EngineState:
    """What an engine reports after a reset or a step (raw engine output, nothing converted)."""

    obs: str
    """The engine's feedback text (the intro after a reset)."""
    admissible: list[str]
    """The engine's own admissible-command list: sorted, ``help`` included."""
    won: bool
    """Whether the goal holds in the current state (stays True if play continues after a win)."""


@runtime_checkable
class GameEngine(Protocol):
    """One loaded game. Not thread-safe; one engine per env, one env per process."""

    def reset(self) -> EngineState:
        """Restart the game from its initial state and return the intro."""
        ...

    def step(self, command: str) -> EngineState:
        """Execute ``command`` (an unknown one answers "Nothing happens." and changes nothing)."""
        ...


def _import_textworld() -> tuple[Any, Any, Any]:
    """Import textworld's PddlEnv and alfworld's wrappers, undoing alfworld's import side effect.

    ``import alfworld`` sets ``os.environ["ALFWORLD_DATA"]`` to its default cache when unset, which
    would make that cache look like a user's choice to our data lookup; we restore the variable.
    """
    before = os.environ.get("ALFWORLD_DATA")
    try:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
        from textworld.envs import PddlEnv
    finally:
        if before is None:
            os.environ.pop("ALFWORLD_DATA", None)
        else:
            os.environ["ALFWORLD_DATA"] = before
    return textworld, PddlEnv, (AlfredDemangler, AlfredInfos)


class ReferenceEngine:
    """TextWorld ``PddlEnv`` + alfworld's ``AlfredDemangler(shuffle=False)`` + ``AlfredInfos``.

    Loading parses the game's domain and grammar and translates the problem with Fast Downward
    (~1 s); TextWorld's ``reset`` rebuilds (re-translates) the state, a step derives the text of
    every applicable action (~60 ms). See ``benchmarks/alfworld_reference.py``.

    One output-preserving shortcut: the first ``reset`` after loading reuses the initial state the
    load just built instead of translating the same problem again (the golden-trace test covers
    both that first reset and an ordinary second one).
    """

    name = "reference"

    def __init__(self, game_file: str | os.PathLike[str]):
        textworld, pddl_env, (demangler, alfred_infos) = _import_textworld()
        self.game_file = str(game_file)
        infos = textworld.EnvInfos(won=True, admissible_commands=True, score=True, extras=["gamefile"])
        self._env = alfred_infos(demangler(pddl_env(infos), shuffle=False))
        self._env.load(self.game_file)
        self._pristine = True  # loaded, not yet reset or stepped

    def _pddl_env(self) -> Any:
        env = self._env
        while hasattr(env, "_wrapped_env"):
            env = env._wrapped_env
        return env

    def _state(self, game_state: Any) -> EngineState:
        return EngineState(
            obs=game_state["feedback"],
            admissible=list(game_state["admissible_commands"]),
            won=bool(game_state["won"]),
        )

    def reset(self) -> EngineState:
        if not self._pristine:
            return self._state(self._env.reset())
        self._pristine = False
        from textworld.envs.pddl import pddl as tw_pddl

        loaded, factory = self._pddl_env()._pddl_state, tw_pddl.pddl_logic.PddlState
        tw_pddl.pddl_logic.PddlState = lambda *args, **kwargs: loaded
        try:
            return self._state(self._env.reset())
        finally:
            tw_pddl.pddl_logic.PddlState = factory

    def step(self, command: str) -> EngineState:
        self._pristine = False
        game_state, _score, _done = self._env.step(command)
        return self._state(game_state)

    def replan(self) -> list[str] | None:
        """Fast Downward's plan from the current state (alfworld's "planner" expert), or None."""
        pddl_env = self._pddl_env()
        try:
            return list(pddl_env._pddl_state.replan(pddl_env._entity_infos))
        except Exception:  # noqa: BLE001 - textworld raises assorted types when no plan exists
            return None


EngineFactory = Callable[[str], GameEngine]

ENGINES: dict[str, EngineFactory] = {
    "reference": ReferenceEngine,
    "compiled": lambda game_file: __import__("sapo_gym.alfworld.compiled", fromlist=["CompiledEngine"]).CompiledEngine(game_file),  # lazy: avoids an import cycle
}
"""Engine name -> factory taking a game file path. Add an engine with one line here."""


def load_engine(game_file: str | os.PathLike[str], engine: str = "reference") -> GameEngine:
    """Load ``game_file`` into the engine named ``engine`` (one of :data:`ENGINES`)."""
    try:
        factory = ENGINES[engine]
    except KeyError:
        raise ValueError(f"unknown ALFWorld engine {engine!r}; valid choices: {sorted(ENGINES)}") from None
    return factory(str(Path(game_file)))


def engine_versions() -> dict[str, str]:
    """Versions of the packages the reference engine's behaviour depends on (no heavy imports)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str] = {}
    for pkg in ("alfworld", "textworld", "fast-downward-textworld"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out
