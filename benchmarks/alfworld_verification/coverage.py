"""Which branches of the ALFWorld grammar a fuzzing run exercised, and which cannot fire.

The universe is every ``(rule, branch index)`` of the reference engine's parsed grammar; hits come
from :func:`.refcache.instrumented_reference` (the reference's own derivations). Branches that no
game state can reach are listed in :data:`UNREACHABLE` with the reason; a branch that is neither hit
nor explained shows up as *not covered* in the report.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

__all__ = ["UNREACHABLE", "Branch", "grammar_branches", "coverage_table"]

_COMMENTED_OUT = "its action is commented out in the domain (no operator ever produces it)"
UNREACHABLE: dict[tuple[str, int], str] = {
    ("notImplemented", 0): "referenced by no rule or action",
    ("overview(o, r)", 0): "referenced by no rule or action",
    ("overview_with_state(r)", 0): "referenced by no rule or action",
    ("overview_state(r)", 0): "only used by overview_with_state(r), which nothing references",
    ("overview_state(r)", 1): "only used by overview_with_state(r), which nothing references",
    ("overview_state(r)", 2): "only used by overview_with_state(r), which nothing references",
    ("PickupObjectFromReceptacleObject.feedback", 0): _COMMENTED_OUT,
    ("PickupEmptyReceptacleObject.feedback", 0): _COMMENTED_OUT,
    ("PickupFullReceptacleObject.feedback", 0): _COMMENTED_OUT,
    ("PutObjectInReceptacleObject.feedback", 0): _COMMENTED_OUT,
    ("PutEmptyReceptacleObjectinReceptacle.feedback", 0): _COMMENTED_OUT,
    ("PutFullReceptacleObjectInReceptacle.feedback", 0): _COMMENTED_OUT,
    ("examineObject.feedback", 11): (
        "needs a held toggled object, but examine needs the object held and no game has an object "
        "both toggleable and pickupable"
    ),
    ("examineObject.feedback", 12): "not_istoggled is never a fact: isToggled is never deleted",
    ("toggleObject.feedback", 1): "use X always sets isToggled before the feedback is derived",
    ("toggleObject.feedback", 2): "use X needs toggleable(X), so branch 0 always holds",
}
"""``(rule, branch) -> why no reachable state derives it`` (the last two grammar quirks are by design)."""


@dataclass(frozen=True)
class Branch:
    rule: str
    index: int
    condition: str
    hits: int
    unreachable: str | None


def grammar_branches(reference_engine: Any) -> list[tuple[str, int, str]]:
    """``(rule, branch index, condition)`` for every branch of the reference engine's grammar."""
    env = reference_engine._env
    while hasattr(env, "_wrapped_env"):
        env = env._wrapped_env
    rules = env._logic.grammar._rules
    return [(name, i, rule.condition or "") for name in sorted(rules) for i, rule in enumerate(rules[name])]


def coverage_table(branches: list[tuple[str, int, str]], hits: Counter) -> list[Branch]:
    """Join the branch universe with the hit counts and the known-unreachable reasons."""
    return [Branch(name, i, cond, hits.get((name, i), 0), UNREACHABLE.get((name, i))) for name, i, cond in branches]
