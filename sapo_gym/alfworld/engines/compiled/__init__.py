"""A compiled ALFWorld engine: each game becomes a plain Python state machine.

``CompiledEngine(game_file)`` speaks the :class:`sapo_gym.alfworld.engines.protocol.GameEngine`
protocol with output byte-identical to the reference engine (TextWorld + Fast Downward), at a small
fraction of its cost. Only the runtime lives here; the checks against the reference (golden replay,
differential fuzzing, rule coverage) are in ``benchmarks/alfworld_verification``, outside the
package. See docs/alfworld_engine.md.
"""

from sapo_gym.alfworld.engines.compiled.engine import CompiledEngine
from sapo_gym.alfworld.engines.compiled.game import CompiledGame, compile_game
from sapo_gym.alfworld.engines.compiled.pddl import UnsupportedGame

__all__ = ["CompiledEngine", "CompiledGame", "UnsupportedGame", "compile_game"]
