"""Precomputed views of a submission, so a page view never parses a whole bundle.

* the *summary*: the bundle without turns and observations (agent, env, evaluation, aggregates,
  and per episode its task, type, seed, success, score, steps, invalid actions and return); the
  submission page paginates its episode list (:data:`PAGE` a page) and ``/compare`` pairs them;
* *chunks* of :data:`CHUNK` full episodes: the trajectory viewer loads the one it shows, and the
  replay verifier reads them one after the other (never the whole bundle at once).

Both are written right after admission (from the bundle already in memory) or, for rows stored
another way (seeding, an older database), on first use. Comparisons are cached (they depend only
on the two immutable bundles) in a small LRU, once per unordered pair (``?a=Y&b=X`` is derived from
``?a=X&b=Y``, not computed again), and the permutation test's memory is bounded
(:func:`leaderboard.paired_tests.paired_permutation`).
"""

from __future__ import annotations

import gzip
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from leaderboard.paired_comparison import Comparison, compare_bundles
from leaderboard.paired_tests import PairedTest
from leaderboard.server.db import EpisodeChunk, Submission, SubmissionSummary

__all__ = ["PAGE", "CHUNK", "ensure", "summary", "chunk", "episode", "comparison"]

PAGE = 100
"""Episodes listed per submission page."""
CHUNK = 50
"""Episodes per stored chunk."""
_EPISODE_KEYS = ("task_id", "task_type", "seed", "success", "score", "steps", "invalid_actions", "return")


def _gz(obj: Any) -> bytes:
    return gzip.compress(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode(), compresslevel=6, mtime=0)


def _ungz(blob: bytes) -> Any:
    return json.loads(gzip.decompress(blob))


def _summary_of(bundle: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in bundle.items() if k != "episodes"}
    out["episodes"] = [{k: ep[k] for k in _EPISODE_KEYS} for ep in bundle["episodes"]]
    return out


def ensure(store: Any, sid: int, bundle: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write the summary and chunks of submission ``sid`` unless they exist; its summary."""
    with store.session() as s:
        blob = s.scalar(select(SubmissionSummary.summary_gz).where(SubmissionSummary.submission_id == sid))
    if blob is not None:
        return _ungz(blob)
    if bundle is None:
        row = store.get(sid)
        bundle = store.bundle_of(row)
    summary_ = _summary_of(bundle)
    episodes = bundle["episodes"]
    try:
        with store.session.begin() as s:
            for start in range(0, len(episodes), CHUNK):
                s.add(
                    EpisodeChunk(
                        submission_id=sid, chunk=start // CHUNK, episodes_gz=_gz(episodes[start : start + CHUNK])
                    )
                )
            s.add(SubmissionSummary(submission_id=sid, summary_gz=_gz(summary_)))
    except IntegrityError:  # written by another request at the same moment
        pass
    return summary_


def summary(store: Any, row: Submission) -> dict[str, Any]:
    return ensure(store, row.id)


def chunk(store: Any, sid: int, number: int) -> list[dict[str, Any]]:
    """Full episodes ``number * CHUNK`` .. of submission ``sid`` (turns included); [] past the last."""
    ensure(store, sid)
    with store.session() as s:
        blob = s.scalar(
            select(EpisodeChunk.episodes_gz).where(EpisodeChunk.submission_id == sid, EpisodeChunk.chunk == number)
        )
    return _ungz(blob) if blob is not None else []


def episode(store: Any, row: Submission, index: int) -> dict[str, Any] | None:
    """The full episode ``index`` of a submission (turns included), or None past its last one."""
    if not 0 <= index < row.episodes:
        return None
    episodes = chunk(store, row.id, index // CHUNK)
    return episodes[index % CHUNK] if index % CHUNK < len(episodes) else None


_CACHE: OrderedDict[tuple[str, str], Comparison] = OrderedDict()
_CACHE_SIZE = 32
_LOCK = threading.Lock()


def _swapped(result: Comparison) -> Comparison:
    """The comparison of B with A from that of A with B: every pair, count and mean trades sides; the
    p-values stay (McNemar is symmetric, and the permutation test's sign flips draw the same signs for
    the negated differences)."""

    def test(t: PairedTest) -> PairedTest:
        return replace(
            t,
            success_a=t.success_b,
            success_b=t.success_a,
            only_a=t.only_b,
            only_b=t.only_a,
            score_a=t.score_b,
            score_b=t.score_a,
        )

    rows = [
        replace(r, success_a=r.success_b, success_b=r.success_a, score_a=r.score_b, score_b=r.score_a)
        for r in result.rows
    ]
    return Comparison(rows, test(result.test), {k: test(v) for k, v in result.categories.items()}, result.only_in_one)


def comparison(store: Any, a: Submission, b: Submission) -> Comparison:
    """The paired comparison of two submissions from their summaries, cached (raises ``BundleError``).

    Cached once per unordered pair: B against A is derived from A against B, never computed again."""
    swap = b.digest < a.digest
    key = (
        (b.digest, a.digest) if swap else (a.digest, b.digest)
    )  # content digests: a result holds wherever they are stored
    with _LOCK:
        result = _CACHE.get(key)
        if result is not None:
            _CACHE.move_to_end(key)
    if result is None:
        first, second = (b, a) if swap else (a, b)
        result = compare_bundles(summary(store, first), summary(store, second))
        with _LOCK:
            _CACHE[key] = result
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    return _swapped(result) if swap else result
