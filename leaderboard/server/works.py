"""What identifies a submission's work: its episodes' tasks and the agent's outputs, canonicalized.

Ownership (:mod:`leaderboard.server.provenance`) compares works, never what replay recomputes. An
episode's *work* is its task id and, turn by turn, what the env received from the agent, in a
canonical form:

* an output that is **valid** under the board's protocol counts as its parsed pair (think, action):
  the action exactly as the env gets it (the parser already lower-cases and strips it), the think
  canonicalized by :func:`canonical_text`. Text the parser ignores (before ``<think>``, after
  ``</action>``, between the tags) and the spelling of a tool call's JSON do not enter it;
* an **invalid** output counts as its whole text, canonicalized.

:func:`canonical_text` is Unicode NFKC, case-folded, with every run of white space one space and
none at the ends: two outputs that differ only in normal form, case or spacing of their free text are
the same work. Seeds do not enter a work (a deterministic env replays the same episode on a seed
relabelled or copied), nor does anything replay recomputes (observations, rewards, scores, validity,
counts, aggregates) or the bundle's metadata.

Each distinct work is hashed (:func:`episode_works`) with the board's spec hash, so the same outputs on
another board are other work.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from sapo_gym.parsing import PROTOCOLS

__all__ = ["WORKS_VERSION", "canonical_text", "canonical_output", "episode_work", "episode_works", "works_digest"]

WORKS_VERSION = "episode-works-v3"
"""Names this definition of a work; a database keyed by an older one is re-keyed once (``provenance.migrate``)."""


def canonical_text(text: str) -> str:
    """``text`` in NFKC, case-folded, white space collapsed to single spaces and stripped."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def canonical_output(output: str, protocol: str) -> list[Any]:
    """One turn's work: ``["v", think, action]`` for an output valid under ``protocol``, else ``["i", text]``.

    An unknown protocol (admission refuses those before ownership is asked) compares the whole text."""
    parser = PROTOCOLS.get(protocol)
    if parser is not None:
        parsed = parser.parse(output, fallback_chars=0)
        if parsed.valid:
            return ["v", canonical_text(parsed.think or ""), parsed.action]
    return ["i", canonical_text(output)]


def episode_work(spec_hash: str, protocol: str, episode: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of one episode's work on the board ``spec_hash``: its task id and canonical outputs."""
    turns = [canonical_output(str(turn["output"]), protocol) for turn in episode["turns"]]
    text = json.dumps([str(spec_hash), str(episode["task_id"]), turns], ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(f"{WORKS_VERSION}\n{text}".encode()).hexdigest()


def episode_works(bundle: Mapping[str, Any]) -> list[str]:
    """The distinct works of a bundle's episodes, sorted (episode order, seeds and copies do not matter)."""
    env = bundle["env"]
    protocol = str(env.get("protocol", ""))
    return sorted({episode_work(env["spec_hash"], protocol, ep) for ep in bundle["episodes"]})


def works_digest(works: Sequence[str]) -> str:
    """SHA-256 of a sorted set of works: one string that names a submission's whole work."""
    h = hashlib.sha256(WORKS_VERSION.encode())
    for work in works:
        h.update(b"\n" + work.encode())
    return h.hexdigest()
