"""ALFWorld for sapo_gym: official games through TextWorld, or the embedded generated set.

Importing this package is light (no textworld / alfworld import): engines load lazily.
``gym.make("sapo/ALFWorld-v0")`` builds :class:`sapo_gym.alfworld.env.AlfWorldEnv`.
"""

from __future__ import annotations

CATEGORIES = ("pick", "look", "clean", "heat", "cool", "pick2")
"""The six task categories, named as the paper reports them."""

TASK_TYPES = {
    "pick_and_place_simple": "pick",
    "look_at_obj_in_light": "look",
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
    "pick_two_obj_and_place": "pick2",
}
"""ALFRED task type (folder-name prefix / ``traj_data["task_type"]``) -> category."""

__all__ = ["CATEGORIES", "TASK_TYPES"]
