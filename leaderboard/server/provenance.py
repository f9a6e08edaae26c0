"""Who produced a submission's episodes: first-submitter ownership, oracle and live marks, reserved names.

* **Ownership**: a submission's *episodes digest* is the SHA-256 of the board's spec hash and the
  set of its episodes' work: each episode's task id and the agent's raw outputs, turn by turn,
  exactly as sent (replay steps these strings; no Unicode normalization: another form of a text
  parses to another think and action). Nothing replay recomputes or ignores enters it (rewards,
  returns, scores, success, observations, parsed actions, thoughts, validity, steps, counts,
  aggregates, agent metadata, dates, commands), nor how the JSON spells it (key order, ``0`` /
  ``0.0`` / ``-0.0`` / ``0e0``), nor the episodes' order, nor their seeds (relabelled or copied to
  more seeds: the same digest). The first token to submit a digest owns it; the same work from
  another token is refused (409, naming the existing submission). Databases whose digests an older
  definition computed are re-keyed once at start-up (:func:`migrate`).
* **Marks** shown on the board: ``baseline`` (seeded by the server, no token), ``privileged`` (the
  bundle says the agent saw the privileged info keys), ``live`` (the server played the episodes), and
  the harness's ``agent_process`` claim (``isolated``: ``sapo-gym evaluate`` ran the agent in a process of
  its own that got only public info; ``in-process``), for bundles that record it.
* **Reserved names**: the seeded baselines' display names, refused for user tokens.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from typing import Any, Iterable, Mapping

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from leaderboard.server.db import EpisodeOwner, HarnessClaim, Migration, Provenance, Submission

__all__ = ["EpisodesClaimed", "episodes_digest", "migrate", "check_owner", "record", "marks", "reserved_name"]

DIGEST_VERSION = "episodes-digest-v2"
"""The :class:`Migration` that re-keyed a database's owners with today's :func:`episodes_digest`."""


class EpisodesClaimed(Exception):
    """These episodes were submitted first by another token."""

    def __init__(self, submission_id: int, agent_name: str, submitter: str):
        super().__init__(f"identical episodes were already submitted by {submitter!r} as submission {submission_id} "
                         f"({agent_name!r}); a set of episodes belongs to the token that submitted it first")
        self.submission_id = submission_id


def episodes_digest(bundle: Mapping[str, Any]) -> str:
    """SHA-256 of the board's spec hash and the sorted, de-duplicated (task id, raw outputs) of the episodes."""
    works = {json.dumps([ep["task_id"], [turn["output"] for turn in ep["turns"]]], ensure_ascii=True, separators=(",", ":"))
             for ep in bundle["episodes"]}  # ASCII JSON: one spelling per string (the newline below separates them)
    h = hashlib.sha256(b"sapo-gym episodes v2\n" + str(bundle["env"]["spec_hash"]).encode())
    for text in sorted(works):
        h.update(b"\n" + text.encode())
    return h.hexdigest()


def migrate(session: sessionmaker) -> bool:
    """Re-key ownership with today's :func:`episodes_digest`, once per database (False: already done).

    Every submission with provenance gets its digest recomputed from its stored bundle; each digest is
    owned by the earliest such submission (the first submitter), so copies that older digests told
    apart (a reward respelled) keep their rows and numbers but own nothing. One transaction: a
    concurrent start-up waits for it, then finds it done."""
    with session() as s:
        if s.get(Migration, DIGEST_VERSION) is not None:
            return False
    try:
        with session.begin() as s:
            s.add(Migration(name=DIGEST_VERSION))
            s.flush()  # the claim: another process's migration holds this row until it commits
            s.execute(delete(EpisodeOwner))
            owners: set[str] = set()
            rows = s.execute(select(Provenance.submission_id, Submission.token_id).join(
                Submission, Submission.id == Provenance.submission_id).order_by(Provenance.submission_id)).all()
            for sid, token_id in rows:  # one bundle in memory at a time
                blob = s.scalar(select(Submission.bundle_gz).where(Submission.id == sid))
                digest = episodes_digest(json.loads(gzip.decompress(blob)))
                s.execute(update(Provenance).where(Provenance.submission_id == sid).values(episodes_digest=digest))
                if digest not in owners:
                    owners.add(digest)
                    s.add(EpisodeOwner(digest=digest, token_id=token_id, submission_id=sid))
    except IntegrityError:  # another process migrated it meanwhile
        return False
    return True


def check_owner(s: Session, digest: str, token_id: int | None) -> None:
    """Raise :class:`EpisodesClaimed` when another token (or the baselines) owns ``digest``."""
    owner = s.get(EpisodeOwner, digest)
    if owner is None or owner.token_id == token_id:
        return
    row = s.execute(select(Submission.id, Submission.agent_name, Submission.submitter)
                    .where(Submission.id == owner.submission_id)).first()
    raise EpisodesClaimed(owner.submission_id, row.agent_name if row else "?", row.submitter if row else "?")


def record(s: Session, submission_id: int, bundle: Mapping[str, Any], digest: str, token_id: int | None,
           live_run_id: int | None = None) -> None:
    """Store the provenance of a new submission and, when nobody owns its digest yet, claim it."""
    harness = bundle.get("evaluation", {}).get("harness") or {}
    s.add(Provenance(submission_id=submission_id, episodes_digest=digest, privileged=bool(harness.get("privileged_agent")),
                     live_run_id=live_run_id))
    if harness.get("agent_process") in ("isolated", "in-process"):  # the schema's values; older bundles lack it
        s.add(HarnessClaim(submission_id=submission_id, agent_process=harness["agent_process"]))
    s.flush()
    if s.get(EpisodeOwner, digest) is None:
        try:
            with s.begin_nested():  # a savepoint: losing the race for the owner row keeps the submission's transaction
                s.add(EpisodeOwner(digest=digest, token_id=token_id, submission_id=submission_id))
        except IntegrityError:  # another transaction claimed these episodes first (PostgreSQL; SQLite serializes writers)
            check_owner(s, digest, token_id)


def marks(s: Session, rows: Iterable[Submission]) -> dict[int, dict[str, Any]]:
    """Per submission id: ``baseline``, ``privileged``, ``live`` (submissions older than this table: only baseline),
    and ``agent_process`` (``isolated`` / ``in-process``) only where the bundle's harness recorded it."""
    rows = list(rows)
    ids = [r.id for r in rows]
    found = {p.submission_id: p for p in s.scalars(select(Provenance).where(Provenance.submission_id.in_(ids)))} if ids else {}
    claims = dict(s.execute(select(HarnessClaim.submission_id, HarnessClaim.agent_process)
                            .where(HarnessClaim.submission_id.in_(ids))).all()) if ids else {}
    out: dict[int, dict[str, Any]] = {}
    for r in rows:
        p = found.get(r.id)
        out[r.id] = {"baseline": r.token_id is None, "privileged": bool(p and p.privileged), "live": bool(p and p.live_run_id)}
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
