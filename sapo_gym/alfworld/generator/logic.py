"""ALFWorld's PDDL domain and text grammar, in the exact form the official ``json_2.1.1`` games use.

The alfworld wheel ships ``alfred.pddl`` and ``alfred.twl2``; the official game files embed a
slightly different revision of both (SinkType also counts as a sink for ``clean``; the ``help``
feedback is a literal string instead of a grammar rule; one blank line less at the end). We
rebuild that revision from the wheel with three exact edits and check the result against the
SHA-256 of the official files, so generated games run under the very logic the official games do
(and an engine keyed on that logic, like the compiled one, recognizes them).
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

__all__ = [
    "DOMAIN_SHA256",
    "GRAMMAR_SHA256",
    "TASK_PLACEHOLDER",
    "grammar_for_task",
    "official_domain",
    "official_grammar",
]

TASK_PLACEHOLDER = "UNKNOWN GOAL"
DOMAIN_SHA256 = "0af55e7f92d12b09d28515aa730e4d03fddd17228ef1fd7b18a3ee8ba49b27b9"
"""SHA-256 of the domain embedded in every official json_2.1.1 game."""
GRAMMAR_SHA256 = "cce0702cd250cc6af6c3ea047a21f6c4c1c8d29a1739efefb5221ef4c3dcac57"
"""SHA-256 of the official grammar with the task sentence replaced by ``UNKNOWN GOAL``."""


def _wheel_file(name: str) -> str:
    spec = find_spec("alfworld")
    if spec is None or spec.origin is None:
        raise ImportError("the alfworld package is required for ALFWorld games: pip install 'sapo-gym[alfworld]'")
    return (Path(spec.origin).parent / "data" / name).read_text()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _checked(text: str, expected: str, name: str) -> str:
    if _sha(text) != expected:
        raise RuntimeError(
            f"the alfworld wheel's {name} differs from the one generated games were built for (alfworld 0.4.2)"
        )
    return text


@lru_cache(maxsize=1)
def official_domain() -> str:
    """The PDDL domain of the official games (from the wheel's ``alfred.pddl``)."""
    text = _wheel_file("alfred.pddl")
    text = text.replace(";(receptacleType ?r SinkType)", "(receptacleType ?r SinkType)", 1)
    text = text.rstrip("\n")
    assert text.endswith(")\n\n)")
    return _checked(text[: -len(")\n\n)")] + ")\n)\n", DOMAIN_SHA256, "alfred.pddl")


@lru_cache(maxsize=1)
def official_grammar() -> str:
    """The grammar of the official games, with ``UNKNOWN GOAL`` where the task sentence goes."""
    text = _wheel_file("alfred.twl2")
    rule = re.search(
        r'feedback :: "#help\.feedback#";\s*grammar :: """.*?"rhs": (".*?")\s*}\s*]\s*}\s*""";', text, re.DOTALL
    )
    if rule is None:
        raise RuntimeError("unexpected alfred.twl2: the help rule is not where alfworld 0.4.2 has it")
    literal = json.loads(rule.group(1))
    return _checked(
        text[: rule.start()] + f'feedback :: "{literal}";' + text[rule.end() :], GRAMMAR_SHA256, "alfred.twl2"
    )


def grammar_for_task(sentence: str) -> str:
    """The official grammar with the task sentence (without the final period) filled in."""
    return official_grammar().replace(TASK_PLACEHOLDER, sentence, 1)
