"""The replay queue: leases that live workers renew, and fair turns across submitters.

Every pending submission has a job (table ``verify_jobs``, created lazily, so databases made
before it keep working). A worker *claims* a job with a lease (``lease_owner``, ``lease_expires``)
and renews it while it replays; a job whose lease expired (its worker died) can be claimed by any
worker, and the episodes already replayed are not replayed again. A worker that lost its lease
can no longer record progress or a verdict: a second ``leaderboard verify`` never takes over a
live worker's claim, and a bundle is never replayed twice at once.

Turns: a job is replayed in slices (a few seconds each); after a slice it goes to the back of the
line. The next job is the one whose submitter's turn comes first: jobs are ranked within their
submitter by age, and the first jobs of all submitters by their place in the line. So a small
submission waits for at most one slice of a 10k-episode bundle, and a submitter with many
bundles in the queue does not hold up the others.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import delete, exists, func, or_, select, update
from sqlalchemy.exc import IntegrityError

from leaderboard.server.db import Submission, VerifyJob, utcnow

__all__ = ["Claim", "claim", "renew", "release", "defer", "finish", "expire", "reopen_setup_failures", "NOT_VERIFIABLE"]

_OPEN = ("pending", "verifying")


@dataclass(frozen=True)
class Claim:
    submission_id: int
    start: int
    """First episode to replay (the ones before it were reproduced in earlier slices)."""
    episodes: int


def _fair_key(token_id: int | None, submitter: str) -> str:
    return f"token:{token_id}" if token_id is not None else f"name:{submitter}"[:100]


def _add_missing_jobs(s) -> None:  # type: ignore[no-untyped-def]
    """Jobs for open submissions that have none (just admitted, or from a database made before the queue table)."""
    missing = (
        select(Submission.id, Submission.token_id, Submission.submitter, Submission.episodes, Submission.created_at)
        .where(Submission.status.in_(_OPEN), ~exists().where(VerifyJob.submission_id == Submission.id))
        .order_by(Submission.id)
        .limit(1000)
    )
    for row in s.execute(missing).all():
        try:
            with s.begin_nested():  # another worker may add the same job at the same moment (PostgreSQL)
                s.add(
                    VerifyJob(
                        submission_id=row.id,
                        submitter=_fair_key(row.token_id, row.submitter),
                        queued_at=row.created_at,
                        episodes=row.episodes,
                        replayed=0,
                    )
                )
        except IntegrityError:
            pass


def _free(now: dt.datetime):  # type: ignore[no-untyped-def]
    return or_(VerifyJob.lease_owner.is_(None), VerifyJob.lease_expires < now)


def claim(
    store: object, owner: str, lease_seconds: float, now: dt.datetime | None = None, skip: Sequence[str] = ()
) -> Claim | None:
    """Lease the job whose turn it is to ``owner``; None when every open job is leased or none is left. Jobs of the
    boards in ``skip`` (spec hashes whose env the worker cannot build) are left to other workers."""
    now = now or utcnow()
    with store.session.begin() as s:  # type: ignore[attr-defined]
        _add_missing_jobs(s)
        turn = func.row_number().over(
            partition_by=VerifyJob.submitter, order_by=(VerifyJob.queued_at, VerifyJob.submission_id)
        )
        free = (
            select(VerifyJob.submission_id, VerifyJob.queued_at, turn.label("turn"))
            .join(Submission, Submission.id == VerifyJob.submission_id)
            .where(_free(now), Submission.status.in_(_OPEN), Submission.spec_hash.notin_(list(skip)))
            .subquery()
        )
        order = select(free.c.submission_id).order_by(free.c.turn, free.c.queued_at, free.c.submission_id).limit(8)
        for sid in s.scalars(order).all():
            taken = s.execute(
                update(VerifyJob)
                .where(VerifyJob.submission_id == sid, _free(now))
                .values(lease_owner=owner, lease_expires=now + dt.timedelta(seconds=lease_seconds))
            )
            if taken.rowcount:
                job = s.get(VerifyJob, sid)
                s.execute(
                    update(Submission)
                    .where(Submission.id == sid)
                    .values(
                        status="verifying",
                        status_message=f"replaying from episode {job.replayed + 1} of {job.episodes}",
                    )
                )
                return Claim(sid, job.replayed, job.episodes)
    return None


def _mine(sid: int, owner: str):  # type: ignore[no-untyped-def]
    return (VerifyJob.submission_id == sid) & (VerifyJob.lease_owner == owner)


def renew(store: object, sid: int, owner: str, lease_seconds: float, now: dt.datetime | None = None) -> bool:
    """Extend ``owner``'s lease; False when it is no longer theirs."""
    now = now or utcnow()
    with store.session.begin() as s:  # type: ignore[attr-defined]
        return (
            s.execute(
                update(VerifyJob)
                .where(_mine(sid, owner))
                .values(lease_expires=now + dt.timedelta(seconds=lease_seconds))
            ).rowcount
            > 0
        )


def _served(s, submitter: str, now: dt.datetime) -> None:  # type: ignore[no-untyped-def]
    """A submitter was just served: their waiting jobs go behind everyone who waits already."""
    s.execute(
        update(VerifyJob).where(VerifyJob.submitter == submitter, VerifyJob.queued_at < now).values(queued_at=now)
    )


def release(store: object, sid: int, owner: str, replayed: int, now: dt.datetime | None = None) -> bool:
    """After a slice: record the progress, give the lease back and go to the back of the line."""
    now = now or utcnow()
    with store.session.begin() as s:  # type: ignore[attr-defined]
        done = s.execute(
            update(VerifyJob)
            .where(_mine(sid, owner))
            .values(replayed=replayed, lease_owner=None, lease_expires=None, queued_at=now)
        ).rowcount
        if done:
            job = s.get(VerifyJob, sid)
            _served(s, job.submitter, now)
            s.execute(
                update(Submission)
                .where(Submission.id == sid)
                .values(
                    status="pending",
                    status_message=f"replayed {replayed} of {job.episodes} episodes; waiting for its next turn",
                )
            )
        return done > 0


NOT_VERIFIABLE = "not verifiable here"
"""How a pending submission's status message starts when a verifier could not build its board's env (no verdict)."""


def defer(store: object, sid: int, owner: str, why: str, now: dt.datetime | None = None) -> bool:
    """Give the lease back without a verdict or progress: this worker cannot reproduce the board's env (``why``). The
    submission stays pending, for a worker that can; False when the lease was no longer ``owner``'s."""
    now = now or utcnow()
    with store.session.begin() as s:  # type: ignore[attr-defined]
        done = s.execute(
            update(VerifyJob).where(_mine(sid, owner)).values(lease_owner=None, lease_expires=None)
        ).rowcount
        if done:
            s.execute(
                update(Submission)
                .where(Submission.id == sid)
                .values(
                    status="pending",
                    status_message=f"{NOT_VERIFIABLE}: {why}"[:2000] + "; it waits for a verifier that "
                    "builds the board's env (no verdict was recorded)",
                )
            )
        return done > 0


_SETUP_FAILURES = (
    "replay crashed: RuntimeError: % needs this server's private seed%",
    "the replay env's spec hash % differs from the bundle's",
)
"""Verdicts of older verifiers that were their set-up's, not the submission's (reopened by :func:`reopen_setup_failures`)."""


def reopen_setup_failures(store: object) -> int:
    """Put back in the queue the submissions failed by a verifier that could not build their env; how many."""
    with store.session.begin() as s:  # type: ignore[attr-defined]
        return s.execute(
            update(Submission)
            .where(Submission.status == "failed", or_(*[Submission.status_message.like(p) for p in _SETUP_FAILURES]))
            .values(
                status="pending",
                status_message="waiting for replay (an earlier verifier could not build its env)",
                verified_at=None,
            )
        ).rowcount


def finish(store: object, sid: int, owner: str | None, verified: bool, message: str) -> bool:
    """Record the verdict and drop the job; only the lease's owner may (``owner=None``: an administrator)."""
    with store.session.begin() as s:  # type: ignore[attr-defined]
        mine = VerifyJob.submission_id == sid if owner is None else _mine(sid, owner)
        submitter = s.scalar(select(VerifyJob.submitter).where(mine))
        if owner is not None and submitter is None:
            return False
        s.execute(delete(VerifyJob).where(mine))
        if submitter is not None:
            _served(s, submitter, utcnow())
        s.execute(
            update(Submission)
            .where(Submission.id == sid)
            .values(status="verified" if verified else "failed", status_message=message[:2000], verified_at=utcnow())
        )
        return True


def expire(store: object, now: dt.datetime | None = None) -> int:
    """Release the expired leases (their workers stopped) so their jobs show as pending again; how many."""
    now = now or utcnow()
    with store.session.begin() as s:  # type: ignore[attr-defined]
        stale = list(s.scalars(select(VerifyJob.submission_id).where(VerifyJob.lease_expires < now)))
        if not stale:
            return 0
        s.execute(
            update(VerifyJob)
            .where(VerifyJob.submission_id.in_(stale), VerifyJob.lease_expires < now)
            .values(lease_owner=None, lease_expires=None)
        )
        s.execute(
            update(Submission)
            .where(Submission.id.in_(stale), Submission.status == "verifying")
            .values(status="pending", status_message="waiting for replay (its worker stopped)")
        )
        return len(stale)
