"""Who produced a submission's episodes: first-submitter ownership, oracle and live marks, reserved names.

* **Ownership** is per episode: an episode's *work* is its task id and the agent's outputs turn by
  turn, canonicalized (:mod:`leaderboard.server.works`: a valid output as its parsed think and action,
  free text in NFKC, case-folded, spacing collapsed). Nothing replay recomputes or ignores enters it
  (rewards, returns, scores, success, observations, validity, counts, aggregates, agent metadata, dates,
  commands), nor how the JSON spells it, nor the episodes' order, nor their seeds. The first token to
  submit a work owns it; a submission at least half of whose distinct works other tokens own is refused
  (409, naming the submission holding most of them): a copy, a subset of another's seeds, a mix of
  several victims' episodes, or a copy with a few episodes replayed. The owner may resubmit its own
  work. Databases keyed by an older definition are re-keyed once at start-up (:func:`migrate`).
* **Marks** shown on the board: ``baseline`` (seeded by the server, no token), ``privileged`` (the
  bundle says the agent saw the privileged info keys), ``live`` (the server played the episodes), and
  the harness's ``agent_process`` claim (``isolated``: ``sapo-gym evaluate`` ran the agent in a process of
  its own that got only public info; ``in-process``), for bundles that record it.
* **Reserved names**: the seeded baselines' display names, refused for user tokens.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from leaderboard.server.db import EpisodeOwner, HarnessClaim, Migration, Provenance, Submission
from leaderboard.server.works import WORKS_VERSION, episode_works, works_digest

__all__ = ["EpisodesClaimed", "works_of", "migrate", "check_owner", "record", "marks", "reserved_name"]

DIGEST_VERSION = WORKS_VERSION
"""The :class:`Migration` that re-keyed a database's owners with today's works (:mod:`leaderboard.server.works`)."""
_CHUNK = 500
"""Works looked up per query (a bundle may hold 40,000 episodes; SQL ``IN`` lists stay short)."""


class EpisodesClaimed(Exception):
    """At least half of these episodes' work was submitted first by another token."""

    def __init__(self, submission_id: int, agent_name: str, submitter: str, claimed: int = 1, total: int = 1):
        super().__init__(
            f"{claimed} of the {total} distinct episodes (task and outputs) were already submitted by "
            f"{submitter!r} as submission {submission_id} ({agent_name!r}) or by other tokens; an episode's "
            "work belongs to the token that submitted it first, and a submission at least half of whose "
            "episodes are others' work is refused"
        )
        self.submission_id = submission_id


def works_of(bundle: Mapping[str, Any]) -> list[str]:
    """The bundle's distinct episode works (:func:`leaderboard.server.works.episode_works`)."""
    return episode_works(bundle)


def _owners(s: Session, works: Sequence[str]) -> dict[str, EpisodeOwner]:
    found: dict[str, EpisodeOwner] = {}
    for i in range(0, len(works), _CHUNK):
        found.update(
            (o.digest, o) for o in s.scalars(select(EpisodeOwner).where(EpisodeOwner.digest.in_(works[i : i + _CHUNK])))
        )
    return found


def migrate(session: sessionmaker) -> bool:
    """Re-key ownership with today's works, once per database (False: already done).

    Every submission with provenance gets its works recomputed from its stored bundle, in submission
    order; each work is owned by the earliest submission that has it (the first submitter), so copies
    that an older definition told apart (a reward respelled, a think re-cased) keep their rows and
    numbers but own nothing. One transaction: a concurrent start-up waits for it, then finds it done."""
    with session() as s:
        if s.get(Migration, DIGEST_VERSION) is not None:
            return False
    try:
        with session.begin() as s:
            s.add(Migration(name=DIGEST_VERSION))
            s.flush()  # the claim: another process's migration holds this row until it commits
            s.execute(delete(EpisodeOwner))
            owned: set[str] = set()
            rows = s.execute(
                select(Provenance.submission_id, Submission.token_id)
                .join(Submission, Submission.id == Provenance.submission_id)
                .order_by(Provenance.submission_id)
            ).all()
            for sid, token_id in rows:  # one bundle in memory at a time
                blob = s.scalar(select(Submission.bundle_gz).where(Submission.id == sid))
                works = episode_works(json.loads(gzip.decompress(blob)))
                s.execute(
                    update(Provenance)
                    .where(Provenance.submission_id == sid)
                    .values(episodes_digest=works_digest(works))
                )
                s.add_all(EpisodeOwner(digest=w, token_id=token_id, submission_id=sid) for w in works if w not in owned)
                owned.update(works)
                s.flush()
    except IntegrityError:  # another process migrated it meanwhile
        return False
    return True


def check_owner(s: Session, works: Sequence[str], token_id: int | None) -> None:
    """Raise :class:`EpisodesClaimed` when other tokens (or the baselines) own at least half of ``works``.

    The seeded baselines (``token_id`` None: the server's own reference entries, never a user's claim) are
    not refused: a user who submitted a built-in baseline's episodes first does not keep the board from
    seeding it (the baseline then owns only the works nobody had)."""
    if token_id is None:
        return
    others = [o for o in _owners(s, works).values() if o.token_id != token_id]
    if not others or 2 * len(others) < len(works):
        return
    counts: dict[int, int] = {}
    for o in others:
        counts[o.submission_id] = counts.get(o.submission_id, 0) + 1
    first = max(sorted(counts), key=lambda sid: counts[sid])  # the submission holding most of them (lowest id on ties)
    row = s.execute(
        select(Submission.id, Submission.agent_name, Submission.submitter).where(Submission.id == first)
    ).first()
    raise EpisodesClaimed(first, row.agent_name if row else "?", row.submitter if row else "?", len(others), len(works))


def _claim(s: Session, submission_id: int, works: Sequence[str], token_id: int | None) -> None:
    """Own the works nobody owns yet (a savepoint: losing a race keeps the submission's transaction)."""
    owned = _owners(s, works)  # once: not one lookup of every work per work
    free = [w for w in works if w not in owned]
    with s.begin_nested():
        s.add_all(EpisodeOwner(digest=w, token_id=token_id, submission_id=submission_id) for w in free)


def record(
    s: Session,
    submission_id: int,
    bundle: Mapping[str, Any],
    works: Sequence[str],
    token_id: int | None,
    live_run_id: int | None = None,
) -> None:
    """Store the provenance of a new submission and claim the works nobody owns yet."""
    harness = bundle.get("evaluation", {}).get("harness") or {}
    s.add(
        Provenance(
            submission_id=submission_id,
            episodes_digest=works_digest(works),
            privileged=bool(harness.get("privileged_agent")),
            live_run_id=live_run_id,
        )
    )
    if harness.get("agent_process") in ("isolated", "in-process"):  # the schema's values; older bundles lack it
        s.add(HarnessClaim(submission_id=submission_id, agent_process=harness["agent_process"]))
    s.flush()
    try:
        _claim(s, submission_id, works, token_id)
    except IntegrityError:  # another transaction claimed some of them first (PostgreSQL; SQLite serializes writers)
        check_owner(s, works, token_id)
        _claim(s, submission_id, works, token_id)


def marks(s: Session, rows: Iterable[Submission]) -> dict[int, dict[str, Any]]:
    """Per submission id: ``baseline``, ``privileged``, ``live`` (submissions older than this table: only baseline),
    and ``agent_process`` (``isolated`` / ``in-process``) only where the bundle's harness recorded it."""
    rows = list(rows)
    ids = [r.id for r in rows]
    found = (
        {p.submission_id: p for p in s.scalars(select(Provenance).where(Provenance.submission_id.in_(ids)))}
        if ids
        else {}
    )
    claims = (
        dict(
            s.execute(
                select(HarnessClaim.submission_id, HarnessClaim.agent_process).where(
                    HarnessClaim.submission_id.in_(ids)
                )
            ).all()
        )
        if ids
        else {}
    )
    out: dict[int, dict[str, Any]] = {}
    for r in rows:
        p = found.get(r.id)
        out[r.id] = {
            "baseline": r.token_id is None,
            "privileged": bool(p and p.privileged),
            "live": bool(p and p.live_run_id),
        }
        if r.id in claims:
            out[r.id]["agent_process"] = claims[r.id]
    return out


def _normal(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "", name.casefold())


def reserved_name(name: str) -> str | None:
    """The baseline whose display name ``name`` takes (case, spaces and punctuation ignored), else None."""
    from leaderboard.seed import BASELINES

    wanted = _normal(name)
    return next((info.name for info in BASELINES.values() if _normal(info.name) == wanted), None)
