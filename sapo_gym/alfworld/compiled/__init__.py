"""A compiled ALFWorld engine: each game becomes a plain Python state machine.

``CompiledEngine(game_file)`` speaks the :class:`sapo_gym.alfworld.engine.GameEngine` protocol with
output byte-identical to the reference engine (TextWorld + Fast Downward), at a small fraction of its
cost. See docs/alfworld_engine.md.
"""

from sapo_gym.alfworld.compiled.engine import CompiledEngine
from sapo_gym.alfworld.compiled.game import CompiledGame, compile_game
from sapo_gym.alfworld.compiled.pddl import UnsupportedGame

__all__ = ["CompiledEngine", "CompiledGame", "UnsupportedGame", "compile_game"]
