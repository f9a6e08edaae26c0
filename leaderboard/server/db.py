"""Tables and engine: SQLite by default (WAL, synchronous=FULL, BEGIN IMMEDIATE), PostgreSQL by URL."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Engine,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    create_engine,
    event,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "Base",
    "Token",
    "Submission",
    "Provenance",
    "HarnessClaim",
    "EpisodeOwner",
    "DisplayName",
    "LiveRun",
    "LivePlan",
    "LiveEpisode",
    "LiveTurn",
    "LiveWaiting",
    "RateBucket",
    "driver_url",
    "make_engine",
    "utcnow",
]


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class Token(Base):
    """A submitter's API token; only its SHA-256 is stored."""

    __tablename__ = "tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(80))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)


class Submission(Base):
    """One accepted bundle: the ranking columns, the aggregates, the verification status and the bundle itself."""

    __tablename__ = "submissions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    """SHA-256 of the canonical bundle JSON: the same bundle is stored once, however often it is sent."""
    token_id: Mapped[int | None] = mapped_column(ForeignKey("tokens.id"), nullable=True)
    submitter: Mapped[str] = mapped_column(String(80))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    env_id: Mapped[str] = mapped_column(String(200))
    split: Mapped[str] = mapped_column(String(64))
    spec_hash: Mapped[str] = mapped_column(String(16))
    agent_name: Mapped[str] = mapped_column(String(80))
    agent_json: Mapped[str] = mapped_column(Text)
    episodes: Mapped[int] = mapped_column(Integer)
    success: Mapped[float] = mapped_column(Float)
    score: Mapped[float] = mapped_column(Float)
    aggregates_json: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    """pending -> verifying -> verified | failed."""
    status_message: Mapped[str] = mapped_column(Text, default="")
    verified_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    bundle_gz: Mapped[bytes] = mapped_column(LargeBinary)
    """The bundle as submitted (canonical JSON, gzip)."""

    __table_args__ = (Index("ix_submissions_board", "spec_hash", "status"),)


class Provenance(Base):
    """Where a submission's episodes come from (a table of its own: databases made before it still open)."""

    __tablename__ = "provenance"
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), primary_key=True)
    episodes_digest: Mapped[str] = mapped_column(String(64), index=True)
    """SHA-256 of the set of the episodes' task ids and raw outputs (see leaderboard.server.provenance)."""
    privileged: Mapped[bool] = mapped_column(Boolean, default=False)
    """The bundle says the agent saw the privileged info keys (an oracle)."""
    live_run_id: Mapped[int | None] = mapped_column(ForeignKey("live_runs.id"), nullable=True)
    """Set when the server itself played the episodes (a finished live run)."""


class HarnessClaim(Base):
    """How a bundle's harness says it ran the agent (``evaluation.harness.agent_process``: ``isolated`` or
    ``in-process``); a row only for bundles that record it. A table of its own: databases made before it still open."""

    __tablename__ = "harness_claims"
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), primary_key=True)
    agent_process: Mapped[str] = mapped_column(String(16))


class EpisodeOwner(Base):
    """The first token that submitted a set of episodes (their tasks and outputs): the same work from another token is refused."""

    __tablename__ = "episode_owners"
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_id: Mapped[int | None] = mapped_column(ForeignKey("tokens.id"), nullable=True)
    """None: the seeded baselines."""
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"))


class DisplayName(Base):
    """An agent's display name, by its key (``leaderboard.server.display.name_key``: NFKC, case-folded, spacing
    collapsed): the first token that used it owns it, another token's submission under it is refused."""

    __tablename__ = "display_names"
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    token_id: Mapped[int] = mapped_column(ForeignKey("tokens.id"))


class Migration(Base):
    """A data migration done on this database, by name (see ``provenance.migrate``): each runs once."""

    __tablename__ = "migrations"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    done_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class LiveRun(Base):
    """A live evaluation: the server draws the (task, seed) schedule, steps the env and records every turn."""

    __tablename__ = "live_runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_id: Mapped[int] = mapped_column(ForeignKey("tokens.id"), index=True)
    spec_hash: Mapped[str] = mapped_column(String(16))
    agent_json: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default="open")
    """open -> finished (a submission) | expired (idle or over time: abandoned) | rejected."""
    status_message: Mapped[str] = mapped_column(Text, default="")
    episodes_total: Mapped[int] = mapped_column(Integer)
    episodes_done: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    ended_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    submission_id: Mapped[int | None] = mapped_column(ForeignKey("submissions.id"), nullable=True)


class LivePlan(Base):
    """A live run's plan and progress, shared by every server process (a table of its own: databases made before it
    still open). Its row is the run's lock: a request that changes the run locks it first (see leaderboard.server.live)."""

    __tablename__ = "live_plans"
    run_id: Mapped[int] = mapped_column(ForeignKey("live_runs.id"), primary_key=True)
    env_id: Mapped[str] = mapped_column(String(200))
    split: Mapped[str] = mapped_column(String(64))
    submitter: Mapped[str] = mapped_column(String(80))
    seeds_json: Mapped[str] = mapped_column(Text)
    """The drawn seeds, sorted (the bundle's ``evaluation.seeds``)."""
    schedule_json: Mapped[str] = mapped_column(Text)
    """Every (task, seed) pair in the order the server deals them."""
    parallel: Mapped[int] = mapped_column(Integer)
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The start request that opened it (the client's idempotency key): a retried start gets this run back."""
    played: Mapped[int] = mapped_column(Integer, default=0)
    """Episodes dealt so far (those in progress included)."""
    output_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    started_at: Mapped[float] = mapped_column(Float)
    touched_at: Mapped[float] = mapped_column(Float)
    """Wall-clock seconds (epoch) of the start and of the last progress (a deal or a played turn): every process
    reads the same clock, where a monotonic one would be each process's own."""


class LiveEpisode(Base):
    """An episode a live run dealt: its reset's answer, its record so far (turns apart) and whether it ended."""

    __tablename__ = "live_episodes"
    run_id: Mapped[int] = mapped_column(ForeignKey("live_runs.id"), primary_key=True)
    episode: Mapped[int] = mapped_column(Integer, primary_key=True)
    """Its index: the order it was dealt in."""
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The reset request that dealt it (the client's idempotency key)."""
    dealt_json: Mapped[str] = mapped_column(Text)
    """The reset's answer, given again to a retried reset."""
    record_json: Mapped[str] = mapped_column(Text)
    """The ``EpisodeRecord`` without its turns (those are ``live_turns``), as of its last turn."""
    steps: Mapped[int] = mapped_column(Integer, default=0)
    ended: Mapped[bool] = mapped_column(Boolean, default=False)


class LiveTurn(Base):
    """One acknowledged turn of a live episode: the step's record and the answer the client got."""

    __tablename__ = "live_turns"
    run_id: Mapped[int] = mapped_column(ForeignKey("live_runs.id"), primary_key=True)
    episode: Mapped[int] = mapped_column(Integer, primary_key=True)
    turn: Mapped[int] = mapped_column(Integer, primary_key=True)
    step_json: Mapped[str] = mapped_column(Text)
    """The ``StepRecord`` (the agent's raw output first: a replay of the outputs rebuilds the env)."""
    answer_json: Mapped[str] = mapped_column(Text)


class LiveWaiting(Base):
    """A token refused a live run while every slot was taken: the line for the next freed slot (leaderboard.server.live_waitlist)."""

    __tablename__ = "live_waitlist"
    token_id: Mapped[int] = mapped_column(ForeignKey("tokens.id"), primary_key=True)
    first_refused: Mapped[float] = mapped_column(Float)
    """Its place in line (wall-clock seconds of its first refusal; ties by token id)."""
    last_seen: Mapped[float] = mapped_column(Float)
    """When it last asked: it keeps its place while it asks again within ``hold_seconds``."""


class VerifyJob(Base):
    """A submission's place in the replay queue and its lease (see :mod:`leaderboard.server.queue`)."""

    __tablename__ = "verify_jobs"
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), primary_key=True)
    submitter: Mapped[str] = mapped_column(String(100), index=True)
    """Fair-share key: the token id (the submitter's name for rows without a token)."""
    queued_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    """Its turn: set at admission, moved to the back of the line after each slice of replay."""
    episodes: Mapped[int] = mapped_column(Integer)
    replayed: Mapped[int] = mapped_column(Integer, default=0)
    """Episodes already replayed and reproduced (the next slice starts there)."""
    lease_owner: Mapped[str | None] = mapped_column(String(100), nullable=True)
    lease_expires: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    """A claim is a lease: its worker renews it while it replays; once expired, any worker may take the job."""


class SubmissionSummary(Base):
    """A submission's bundle without the turns (metadata, aggregates, one line per episode), for its pages."""

    __tablename__ = "submission_summaries"
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), primary_key=True)
    summary_gz: Mapped[bytes] = mapped_column(LargeBinary)


class EpisodeChunk(Base):
    """Consecutive full episodes of a submission (turns included), so the viewer loads one chunk, not the bundle."""

    __tablename__ = "episode_chunks"
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), primary_key=True)
    chunk: Mapped[int] = mapped_column(Integer, primary_key=True)
    episodes_gz: Mapped[bytes] = mapped_column(LargeBinary)


def _sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (below)
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:  # type: ignore[no-untyped-def]
        # Take the write lock up front: a deferred transaction that reads, then writes, can fail
        # with "database is locked" under concurrent writers instead of waiting its turn.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def shown_url(url: str) -> str:
    """``url`` as it may be printed or logged: the password masked (``postgresql://user:***@host/db``).

    A URL SQLAlchemy cannot parse is not echoed at all, since its password could sit anywhere in it."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return "<a database URL that does not parse>"


DEFAULT_POOL = 30
"""PostgreSQL connections one process may hold at once (:func:`make_engine`): 10 kept open, 20 more when busy."""


def driver_url(url: str) -> str:
    """``url`` with a driver SQLAlchemy can load: a bare ``postgresql://`` or ``postgres://`` (what the docs and most
    hosts give) names the PostgreSQL driver installed here, psycopg2 (else psycopg 3); other URLs are kept as they are."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("postgresql", "postgres"):
        return url
    import importlib.util

    driver = (
        "psycopg2" if importlib.util.find_spec("psycopg2") or not importlib.util.find_spec("psycopg") else "psycopg"
    )
    return f"postgresql+{driver}://{rest}"


def make_engine(url: str, pool: int = DEFAULT_POOL) -> Engine:
    """An engine for ``url`` (``sqlite:///path.db`` or ``postgresql://...``) with the tables created.

    ``pool`` bounds the PostgreSQL connections this process opens (up to 10 kept, the rest opened when busy and
    closed after); a request that finds them all taken waits up to 30 s for one. N server processes open at most
    N·pool, which the database's ``max_connections`` must hold."""
    if pool < 1:
        raise ValueError(f"pool must be >= 1, got {pool}")
    url = driver_url(url)
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        _sqlite_pragmas(engine)
    else:
        # a statement (or a wait for a lock) that runs past 30 s is cancelled: no request holds a connection forever
        kept = min(10, pool)
        engine = create_engine(
            url,
            pool_pre_ping=True,
            pool_size=kept,
            max_overflow=pool - kept,
            pool_timeout=30,
            connect_args={"options": "-c statement_timeout=30000 -c lock_timeout=30000"},
        )
    Base.metadata.create_all(engine)
    return engine


class RateBucket(Base):
    """A token's rate-limit bucket (:class:`leaderboard.server.limits.RateLimiter`), in the database so that every
    server process charges the same bucket."""

    __tablename__ = "rate_buckets"
    key: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    """The token's id."""
    level: Mapped[float] = mapped_column(Float)
    """Units left at ``stamp``."""
    stamp: Mapped[float] = mapped_column(Float)
    """Wall-clock epoch seconds of the last charge: monotonic clocks are not shared between processes."""
