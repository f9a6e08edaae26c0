"""Bundled trainers for sapo_gym's text envs: one loop, the methods of :data:`trainers.method_registry.METHODS`.

Import submodules directly (``trainers.core_algos``, ``trainers.experience``, ...): this package
imports nothing heavy so that ``import trainers`` stays cheap.
"""
