"""ALFWorld's PDDL domain and text grammar, in the exact form the official ``json_2.1.1`` games use.

The alfworld wheel ships ``alfred.pddl`` and ``alfred.twl2``; the official game files embed a
slightly different revision of both (SinkType also counts as a sink for ``clean``; the ``help``
feedback is a literal string instead of a grammar rule; one blank line less at the end). That
revision, rebuilt from the wheel with three exact edits (:mod:`.wheel`), ships in ``from_alfworld/``
with the parts of alfworld's generator tables that rendering and sampling read, so no alfworld install
is needed to play; each read is checked against the SHA-256 of the official files, so generated games
run under the very logic the official games do (and an engine keyed on that logic, like the compiled
one, recognizes them).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = [
    "DOMAIN_SHA256",
    "GRAMMAR_SHA256",
    "SHIPPED",
    "TASK_PLACEHOLDER",
    "goal_library",
    "grammar_for_task",
    "official_domain",
    "official_grammar",
    "shipped_text",
]

TASK_PLACEHOLDER = "UNKNOWN GOAL"
DOMAIN_SHA256 = "0af55e7f92d12b09d28515aa730e4d03fddd17228ef1fd7b18a3ee8ba49b27b9"
"""SHA-256 of the domain embedded in every official json_2.1.1 game."""
GRAMMAR_SHA256 = "cce0702cd250cc6af6c3ea047a21f6c4c1c8d29a1739efefb5221ef4c3dcac57"
"""SHA-256 of the official grammar with the task sentence replaced by ``UNKNOWN GOAL``."""


SHIPPED = Path(__file__).resolve().parent / "from_alfworld"
"""The files rebuilt from the alfworld 0.4.2 wheel (MIT; see ``CREDITS.txt`` there and :mod:`.wheel`)."""


def shipped_text(name: str) -> str:
    """The text of a shipped file, byte for byte (no newline translation; ``.gz`` files decompressed)."""
    data = (SHIPPED / name).read_bytes()
    return (gzip.decompress(data) if name.endswith(".gz") else data).decode("utf-8")


def _checked(name: str, expected: str) -> str:
    text = shipped_text(name)
    if hashlib.sha256(text.encode()).hexdigest() != expected:
        raise RuntimeError(
            f"the shipped {SHIPPED / name} differs from the official games' (alfworld 0.4.2): reinstall sapo-gym"
        )
    return text


@lru_cache(maxsize=1)
def official_domain() -> str:
    """The PDDL domain of the official games (the wheel's ``alfred.pddl`` with SinkType as a sink)."""
    return _checked("alfred.pddl", DOMAIN_SHA256)


@lru_cache(maxsize=1)
def official_grammar() -> str:
    """The grammar of the official games, with ``UNKNOWN GOAL`` where the task sentence goes."""
    return _checked("alfred.twl2", GRAMMAR_SHA256)


@lru_cache(maxsize=1)
def goal_library() -> dict[str, dict[str, Any]]:
    """alfworld's goal library for the six task types: ``{task_type: {"pddl": ..., "templates": [...]}}``."""
    return json.loads(shipped_text("goal_library.json"))


def grammar_for_task(sentence: str) -> str:
    """The official grammar with the task sentence (without the final period) filled in."""
    return official_grammar().replace(TASK_PLACEHOLDER, sentence, 1)
