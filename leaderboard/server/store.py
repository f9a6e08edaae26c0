"""All database access of the leaderboard, one short transaction per method."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import defer, sessionmaker

from leaderboard.boards import Board
from leaderboard.private import is_private
from leaderboard.server import live_exposure, names, provenance, queue
from leaderboard.server.db import DEFAULT_POOL, Submission, Token, make_engine

__all__ = ["Store", "SORT_KEYS", "canonical_json"]

TOKEN_PREFIX = "sgl_"
SORT_KEYS = ("success", "score", "agent", "episodes", "created", "status")
"""Columns a board can be sorted by."""


def canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def _hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Added:
    id: int
    created: bool
    """False when the identical bundle was already stored (then ``id`` is the stored one)."""
    status: str
    """Its verification status."""


def _pending_row(
    bundle: Mapping[str, Any], blob: bytes, digest: str, board: Board, submitter: str, token_id: int | None
) -> Submission:
    """The submission row of ``bundle`` (``blob``, its canonical JSON, stored gzipped; ``digest``, that JSON's
    SHA-256), waiting for its replay."""
    agg = bundle["aggregates"]
    return Submission(
        digest=digest,
        token_id=token_id,
        submitter=submitter,
        env_id=board.env_id,
        split=board.split,
        spec_hash=board.spec_hash,
        agent_name=bundle["agent"]["name"],
        agent_json=json.dumps(bundle["agent"]),
        episodes=int(agg["all"]["episodes"]),
        success=float(agg["all"]["success"]),
        score=float(agg["all"]["score"]),
        aggregates_json=json.dumps(agg),
        status="pending",
        status_message="waiting for replay",
        bundle_gz=gzip.compress(blob, compresslevel=6, mtime=0),
    )


class Store:
    """Tokens and submissions over SQLAlchemy (see :mod:`leaderboard.server.db`)."""

    def __init__(self, url: str, pool: int = DEFAULT_POOL):
        self.url = url
        self.engine = make_engine(url, pool)
        self.session = sessionmaker(self.engine, expire_on_commit=False)
        provenance.migrate(self.session)  # owners keyed by an older digest: re-keyed once
        names.migrate(self.session)  # display names used before they were owned: to their first token

    # ------------------------------------------------------------------ tokens
    def create_token(self, name: str) -> tuple[int, str]:
        """A new token for ``name``; the plain token is returned once and only its hash is kept."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self.session.begin() as s:
            row = Token(name=name, token_hash=_hash_token(token))
            s.add(row)
            s.flush()
            return row.id, token

    def authenticate(self, token: str) -> Token | None:
        with self.session() as s:
            row = s.scalar(select(Token).where(Token.token_hash == _hash_token(token)))
            return row if row is not None and not row.revoked else None

    def tokens(self) -> list[Token]:
        with self.session() as s:
            return list(s.scalars(select(Token).order_by(Token.id)))

    def revoke_token(self, token_id: int) -> bool:
        with self.session.begin() as s:
            return s.execute(update(Token).where(Token.id == token_id).values(revoked=True)).rowcount > 0

    # ------------------------------------------------------------------ submissions
    def add(
        self,
        bundle: Mapping[str, Any],
        board: Board,
        submitter: str,
        token_id: int | None,
        live_run_id: int | None = None,
    ) -> Added:
        """Store an admitted bundle once (by content digest), status ``pending``; raises
        :class:`~leaderboard.server.provenance.EpisodesClaimed` when other tokens own half its episodes' work or more
        (also when another token stored this very bundle first, at any moment), :class:`~leaderboard.server.names.NameTaken`
        when another token owns its agent's display name."""
        works = provenance.works_of(bundle)
        blob = canonical_json(bundle)
        digest = hashlib.sha256(blob).hexdigest()
        row = _pending_row(bundle, blob, digest, board, submitter, token_id)
        try:
            with self.session.begin() as s:
                provenance.check_owner(s, works, token_id)
                names.check(s, row.agent_name, token_id)
                s.add(row)
                s.flush()
                provenance.record(s, row.id, bundle, works, token_id, live_run_id)
                names.claim(s, row.agent_name, token_id)
                return Added(row.id, True, row.status)
        except names.NameTaken:  # the name's owner committed after this request's ownership check: answer as in
            with self.session() as s:  # sequence, where a claimed work outranks a taken name
                provenance.check_owner(s, works, token_id)
            raise
        except IntegrityError:  # another transaction stored this bundle, or claimed its works, at the same moment
            with self.session() as s:
                existing = s.execute(
                    select(
                        Submission.id,
                        Submission.status,
                        Submission.token_id,
                        Submission.agent_name,
                        Submission.submitter,
                    ).where(Submission.digest == digest)
                ).first()
                # the answer a request sent after the winner's commit gets: the winner's works are visible now
                provenance.check_owner(s, works, token_id)
            if existing is None:
                raise
            if existing.token_id != token_id and token_id is not None:  # never another token's id as a "duplicate"
                raise provenance.EpisodesClaimed(
                    existing.id, existing.agent_name, existing.submitter, len(works), len(works)
                ) from None
            return Added(existing.id, False, existing.status)

    def get(self, submission_id: int) -> Submission | None:
        if not 0 <= submission_id < 2**63:  # ids are SQL BIGINTs: a larger one names nothing (and overflows the driver)
            return None
        with self.session() as s:
            return s.get(Submission, submission_id)

    @staticmethod
    def bundle_of(row: Submission) -> dict[str, Any]:
        return json.loads(gzip.decompress(row.bundle_gz))

    def submissions(
        self,
        spec_hash: str | None = None,
        sort: str = "success",
        descending: bool = True,
        limit: int = 500,
        statuses: Sequence[str] | None = None,
        verified_first: bool = False,
        offset: int = 0,
    ) -> list[Submission]:
        """Submissions (without their bundles loaded into memory twice), best first by default; only
        ``statuses`` when given; ``verified_first``: verified, then pending/verifying, then failed."""
        column = {
            "success": Submission.success,
            "score": Submission.score,
            "agent": func.lower(Submission.agent_name),
            "episodes": Submission.episodes,
            "created": Submission.created_at,
            "status": Submission.status,
        }[sort]
        order = [column.desc() if descending else column.asc(), Submission.score.desc(), Submission.id]
        if verified_first:
            order.insert(0, case((Submission.status == "verified", 0), (Submission.status == "failed", 2), else_=1))
        query = select(Submission).options(defer(Submission.bundle_gz)).order_by(*order).limit(limit).offset(offset)
        if spec_hash is not None:
            query = query.where(Submission.spec_hash == spec_hash)
        if statuses is not None:
            query = query.where(Submission.status.in_(list(statuses)))
        with self.session() as s:
            return list(s.scalars(query))

    def count(self, spec_hash: str | None = None, statuses: Sequence[str] | None = None) -> int:
        """How many rows :meth:`submissions` lists with these filters and no limit (for paging)."""
        query = select(func.count(Submission.id))
        if spec_hash is not None:
            query = query.where(Submission.spec_hash == spec_hash)
        if statuses is not None:
            query = query.where(Submission.status.in_(list(statuses)))
        with self.session() as s:
            return s.scalar(query) or 0

    def marks(self, rows: Any) -> dict[int, dict[str, bool]]:
        """``baseline`` / ``privileged`` / ``live`` per submission (see :mod:`leaderboard.server.provenance`),
        ``private: True`` on a private split (:mod:`leaderboard.private`), and for a live run there ``private_unseen``
        (shown as *live · private* only when true) and ``private_exposure`` (:mod:`leaderboard.server.live_exposure`)."""
        rows = list(rows)
        with self.session() as s:
            out = provenance.marks(s, rows)
            seen = live_exposure.exposures(s, [r.id for r in rows if is_private(r.split) and out[r.id]["live"]])
        for r in rows:
            if is_private(r.split):
                out[r.id]["private"] = True
            if r.id in seen:  # the full live·private claim holds only if no other run had dealt its tasks before
                out[r.id]["private_unseen"] = seen[r.id]["unseen"]
                out[r.id]["private_exposure"] = seen[r.id]
        return out

    def live_board(self, spec_hash: str, listed: int = live_exposure.RUN_LIST) -> dict[str, Any]:
        """Every token's live runs on a board: counts by status, tokens, episodes dealt, and the newest ``listed`` runs."""
        with self.session() as s:
            return {**live_exposure.board_runs(s, spec_hash), "listed": live_exposure.run_list(s, spec_hash, listed)}

    def counts(self) -> dict[str, int]:
        with self.session() as s:
            return {
                "submissions": s.scalar(select(func.count(Submission.id))) or 0,
                "tokens": s.scalar(select(func.count(Token.id))) or 0,
            }

    # ------------------------------------------------------------------ verification queue
    # (leases and fair turns: leaderboard.server.queue)
    def finish(self, submission_id: int, verified: bool, message: str, owner: str | None = None) -> bool:
        """Record a verdict; with ``owner``, only while that worker still holds the lease (else False, nothing written)."""
        return queue.finish(self, submission_id, owner, verified, message)

    def requeue_stale(self, now: dt.datetime | None = None) -> int:
        """Put submissions whose worker's lease expired back in the queue (a live worker's claim is left alone), and
        those an earlier verifier failed only because it could not build their env (:func:`queue.reopen_setup_failures`)."""
        return queue.expire(self, now) + queue.reopen_setup_failures(self)
