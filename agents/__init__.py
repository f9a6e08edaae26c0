"""Agents: anything that maps a batch of (observation, info) to raw model outputs.

Built-in agents are importable without torch; LLM agents live in their own modules.
"""

from agents.base import Agent, format_action
from agents.baselines import ExpertAgent, RandomAgent

__all__ = ["Agent", "format_action", "ExpertAgent", "RandomAgent"]
