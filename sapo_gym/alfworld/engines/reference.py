"""The reference ALFWorld engine: TextWorld's ``PddlEnv`` exactly as the ALFWorld baselines ran it.

textworld / alfworld are imported lazily, inside the engine, so importing this module stays light;
without them (``pip install sapo-gym``) building the engine raises an ImportError naming the ``alfworld``
extra. The compiled engine, the default, needs neither.
"""

from __future__ import annotations

import os
from typing import Any

from sapo_gym.alfworld.engines.protocol import EngineState
from sapo_gym.extras import naming_extra

__all__ = ["ReferenceEngine"]

_NEEDS_IT = 'the reference ALFWorld engine (engine="reference", expert="planner", generating games)'


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
    except ImportError as exc:
        raise naming_extra(exc, _NEEDS_IT, ("alfworld",))  # noqa: B904 (naming_extra chains exc as its cause)
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
