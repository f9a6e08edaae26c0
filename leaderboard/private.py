"""Private boards: live evaluation on splits generated from the server's secret seed.

Replay proves that a bundle's episodes are real, not who or what produced them: a submitter who runs the
harness may keep the best of N runs, or look the public games up. A live run deals the tasks and seeds
and records every turn on the server; on a *private* split the tasks themselves are unseen: the server
generates them (:mod:`sapo_gym.private`: ALFWorld games, WebShop goals) from a secret 256-bit seed and
never publishes them. So a live run there is the only mark that rules out a lookup of public games.

* The seed comes from a file the admin keeps (``serve --private-seed-file PATH``; created with a fresh
  :func:`secrets.token_hex` when absent, mode 0600; refused unless it can be a secret: see :func:`read_seed_file`).
  It is never logged or served while the split is active.
* The boards publish :func:`commitment` (``sha256(DOMAIN_TAG || seed)``) and their spec hash, which covers
  the generated content. When the split is retired, ``sapo-gym leaderboard private reveal`` prints the seed;
  ``sapo-gym leaderboard private check --seed HEX --commitment HEX`` lets anyone check it against the
  commitment and regenerate the splits, printing their spec hashes to compare with the boards'.
* A private board takes live runs only (a file bundle is refused); its episodes, bundles and comparisons
  are withheld (only aggregates are shown), and replay failures are reported without the text they quote.

This process's active seed is module state (:data:`ACTIVE`): the boards' env factory
(:func:`leaderboard.boards.make_env`), the live runs and the replay verifier all build private envs
through :func:`env_kwargs`.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import secrets
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sapo_gym.private import PRIVATE_SPLIT, check_seed

__all__ = [
    "ACTIVE",
    "COUNT_ARGS",
    "DOMAIN_TAG",
    "PRIVATE_SPLIT",
    "PrivateSplits",
    "SeedFileError",
    "activate",
    "board_info",
    "commitment",
    "env_kwargs",
    "is_private",
    "read_seed_file",
    "redact",
    "withheld",
]

log = logging.getLogger(__name__)

DOMAIN_TAG = b"sapo-gym/leaderboard/private-split/v1\0"
COUNT_ARGS: dict[str, str] = {"sapo/ALFWorld-Mini-v0": "private_games", "sapo/WebShop-v0": "private_goals"}
"""Envs with a private split, and the constructor argument that sets its number of tasks."""
WITHHELD = (
    "this board's split is private: its games are never published while it is active, so its episodes, "
    "bundles and comparisons are withheld (only aggregates are shown)"
)


def commitment(seed: str) -> str:
    """The published commitment to ``seed``: sha256 of the domain tag and the seed's bytes, in hex."""
    return hashlib.sha256(DOMAIN_TAG + bytes.fromhex(check_seed(seed))).hexdigest()


SEED_FILE_BYTES = (64, 65)
"""Sizes a seed file may have: 64 hex digits (256 bits), with or without a final newline."""


class SeedFileError(ValueError):
    """The seed file cannot hold a secret (its words never repeat the file's content)."""


def _open_seed(file: Path) -> int:
    """A descriptor of ``file`` opened without following a symlink and without blocking (a FIFO, a device)."""
    try:
        return os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SeedFileError(
                f"{file} is a symbolic link: the private seed must be a regular file of its own"
            ) from None
        raise


def _check_seed_stat(file: Path, st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise SeedFileError(
            f"{file} is not a regular file (a FIFO, a device or a directory cannot hold the private seed)"
        )
    if st.st_uid != os.geteuid():
        raise SeedFileError(f"{file} is owned by uid {st.st_uid}, not by this server's uid {os.geteuid()}")
    if st.st_mode & 0o077:
        raise SeedFileError(
            f"{file} has mode {stat.S_IMODE(st.st_mode):o}: group or others may read or write it "
            "(chmod 600 it, and rotate the seed if anyone else could have read it)"
        )
    if st.st_size not in SEED_FILE_BYTES:
        raise SeedFileError(
            f"{file} holds {st.st_size} bytes; a private seed file holds 64 hex digits (256 bits) and "
            "an optional newline, as 'sapo-gym leaderboard serve --private-seed-file' writes it"
        )


def _check_seed_text(file: Path, raw: bytes) -> str:
    text = raw[:-1] if raw.endswith(b"\n") else raw
    if len(raw) not in SEED_FILE_BYTES or len(text) != 64 or not all(c in b"0123456789abcdefABCDEF" for c in text):
        raise SeedFileError(f"{file} does not hold a private seed: 64 hex digits and an optional newline")
    seed = bytes.fromhex(text.decode())
    steps = {(b - a) % 256 for a, b in zip(seed, seed[1:])}
    if len(set(seed)) < 16 or len(steps) < 16:  # 32 random bytes: ~30 distinct values and steps; a pattern: a few
        raise SeedFileError(
            f"{file} does not hold a random secret (its bytes repeat or follow a pattern): write a new "
            "one, e.g. python -c 'import secrets; print(secrets.token_hex(32))'"
        )
    return check_seed(text.decode())


def _create_seed_file(file: Path) -> None:
    fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_hex(32) + "\n")
    log.info("private split: wrote a new secret seed to %s (keep it; it is revealed when the split is retired)", file)


def read_seed_file(path: str | os.PathLike[str], create: bool = True) -> str:
    """The seed in ``path`` (hex), or a fresh 256-bit one written there (mode 0600) when it is absent.

    Refused (:class:`SeedFileError`) unless it can be a secret: a regular file (not a symlink, a FIFO or a device;
    opened with ``O_NOFOLLOW | O_NONBLOCK``, so nothing blocks), owned by this process's user, with no permission
    for group or others, of the size the server writes, holding 64 hex digits that are not a constant or a pattern."""
    file = Path(path).expanduser()
    if not os.path.lexists(file):
        if not create:
            raise FileNotFoundError(f"no private seed file {file}")
        _create_seed_file(file)
    fd = _open_seed(file)
    try:
        _check_seed_stat(file, os.fstat(fd))
        raw = os.read(fd, max(SEED_FILE_BYTES) + 1)
    finally:
        os.close(fd)
    return _check_seed_text(file, raw)


@dataclass(frozen=True)
class PrivateSplits:
    """The active secret and the private splits built from it (the seed is kept out of ``repr``)."""

    seed: str = field(repr=False)
    counts: dict[str, int | None] = field(default_factory=lambda: {env_id: None for env_id in COUNT_ARGS})
    """env id -> its number of tasks (None: the env's default)."""

    @property
    def commitment(self) -> str:
        return commitment(self.seed)

    def board_keys(self) -> list[str]:
        return [f"{env_id}:{PRIVATE_SPLIT}" for env_id in self.counts]

    def env_kwargs(self, env_id: str) -> dict[str, Any]:
        count = self.counts[env_id]
        return {"private_seed": self.seed, **({COUNT_ARGS[env_id]: count} if count is not None else {})}


ACTIVE: PrivateSplits | None = None
"""This process's private splits (set by :func:`activate`; None: no private boards)."""


def activate(seed: str, env_ids: Iterable[str] | None = None, count: int | None = None) -> PrivateSplits:
    """Make ``seed`` this process's secret, for ``env_ids`` (default: every env in :data:`COUNT_ARGS`)."""
    global ACTIVE
    ids = list(env_ids) if env_ids is not None else list(COUNT_ARGS)
    unknown = [e for e in ids if e not in COUNT_ARGS]
    if unknown:
        raise ValueError(f"no private split for {unknown}; valid choices: {list(COUNT_ARGS)}")
    ACTIVE = PrivateSplits(check_seed(seed), {e: count for e in ids})
    return ACTIVE


def is_private(split: str | None) -> bool:
    """Whether a board's or a submission's split is a private one."""
    return split == PRIVATE_SPLIT


def env_kwargs(env_id: str, split: str | None) -> dict[str, Any]:
    """The ``gym.make`` arguments that build ``env_id``'s private split ({} for a public split)."""
    if not is_private(split):
        return {}
    if ACTIVE is None or env_id not in ACTIVE.counts:
        raise RuntimeError(f"{env_id}:{PRIVATE_SPLIT} needs this server's private seed (--private-seed-file)")
    return ACTIVE.env_kwargs(env_id)


def board_info(board: Any) -> dict[str, Any] | None:
    """What a private board publishes beside its spec hash: the commitment to its seed (None for a public board)."""
    if not is_private(board.split) or ACTIVE is None:
        return None
    return {
        "commitment": ACTIVE.commitment,
        "status": "active",
        "live_only": True,
        "check": "sapo-gym leaderboard private check --seed HEX --commitment HEX (once the seed is revealed)",
    }


def withheld(split: str | None) -> str | None:
    """Why a submission's episodes are withheld, or None when they may be shown."""
    return WITHHELD if is_private(split) else None


def redact(split: str | None, message: str) -> str:
    """A verifier message fit to publish: on a private split, without the episode text a mismatch quotes; never the
    active seed (an env's error could echo its arguments)."""
    if ACTIVE is not None and ACTIVE.seed in message:
        message = message.replace(ACTIVE.seed, "<the private seed>")
    if not is_private(split):
        return message
    head = message.split(":", 1)[0] if message.startswith("episode ") else message
    return head if head == message else f"{head}: a turn differs (details withheld: the split is private)"
