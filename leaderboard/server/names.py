"""Display names belong to the first token that used them: another token cannot take a name, nor its twin.

Two agent names are the same name when their :func:`leaderboard.server.display.name_key` is (NFKC, case-folded,
white space collapsed, invisible format characters dropped). The first token to store a submission under a name
owns it (table ``display_names``); another token's submission or live run under it is refused (:class:`NameTaken`,
a 409), so a name on the board always stands for one submitter. The board also shows each row's submitter. The
seeded baselines' names are reserved apart (``provenance.reserved_name``). A database from before the table gets
its names once, each owned by the token of its earliest submission (:func:`migrate`).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from leaderboard.server.db import DisplayName, Migration, Submission, Token
from leaderboard.server.display import name_key
from sapo_gym.bundle import BundleError

__all__ = ["NameTaken", "check", "claim", "migrate"]

MIGRATION = "display-names-v1"


class NameTaken(BundleError):
    """Another token owns this display name (or its twin): a 409 (a live run that ends under it is rejected)."""

    def __init__(self, name: str, owner: str):
        super().__init__(
            f"the agent name {name!r} is already used on this server by another submitter ({owner!r}); names "
            "are compared ignoring case, spacing and Unicode forms: pick another name",
            status=409,
        )


def check(s: Session, name: str, token_id: int | None) -> None:
    """Raise :class:`NameTaken` when another token owns ``name``'s key (the baselines, ``token_id`` None, are not checked)."""
    if token_id is None:
        return
    row = s.get(DisplayName, name_key(name)[:200])
    if row is not None and row.token_id != token_id:
        owner = s.scalar(select(Token.name).where(Token.id == row.token_id)) or "?"
        raise NameTaken(name, owner)


def claim(s: Session, name: str, token_id: int | None) -> None:
    """Own ``name`` for ``token_id`` unless it is owned (a savepoint: a race lost is then checked like any owner)."""
    if token_id is None:
        return
    key = name_key(name)[:200]
    if s.get(DisplayName, key) is not None:
        check(s, name, token_id)
        return
    try:
        with s.begin_nested():
            s.add(DisplayName(key=key, token_id=token_id))
    except IntegrityError:
        check(s, name, token_id)


def migrate(session: sessionmaker) -> bool:
    """Give the names of a database from before ``display_names`` to their first token, once (False: done already)."""
    with session() as s:
        if s.get(Migration, MIGRATION) is not None:
            return False
    try:
        with session.begin() as s:
            s.add(Migration(name=MIGRATION))
            s.flush()
            owned = {row.key for row in s.scalars(select(DisplayName))}
            rows = s.execute(
                select(Submission.agent_name, Submission.token_id)
                .where(Submission.token_id.is_not(None))
                .order_by(Submission.id)
            ).all()
            for name, token_id in rows:
                key = name_key(name)[:200]
                if key not in owned:
                    owned.add(key)
                    s.add(DisplayName(key=key, token_id=token_id))
    except IntegrityError:  # another process migrated it meanwhile
        return False
    return True
