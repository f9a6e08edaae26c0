"""Bundled trainers (SAPO, PPO, GRPO) for sapo_gym's text envs.

Import submodules directly (``trainers.core_algos``, ``trainers.experience``, ...): this package
imports nothing heavy so that ``import trainers`` stays cheap.
"""
