"""The boards a leaderboard hosts: one per (registered env id, evaluation split).

The spec hashes a server accepts are *computed* from the registered envs (``sapo_gym.ENVS``): each
board's env is built once with its split and default arguments, and its ``spec_hash()`` and task
ids are recorded. An env whose backend is not installed, or whose data is missing, is skipped with
the reason (``sapo-gym leaderboard boards`` shows it); new registered envs join automatically
with their default split, or with the splits listed in :data:`EVAL_SPLITS`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sapo_gym.registration import ENVS

__all__ = [
    "Board",
    "EVAL_SPLITS",
    "UNHOSTED",
    "BoardRegistry",
    "board_keys",
    "default_board_keys",
    "env_board_keys",
    "make_env",
]

log = logging.getLogger(__name__)

EVAL_SPLITS: dict[str, tuple[str, ...]] = {
    env_id: entry.eval_splits for env_id, entry in ENVS.items() if entry.eval_splits
}
"""Hosted splits per env id (the registry's evaluation splits); ids not listed are hosted on the split
their env makes by default."""

UNHOSTED: dict[str, str] = {
    "sapo/WebShop-Browser-v0": "not hosted: the same shop as sapo/WebShop-v0 driven through a browser; "
    "its episodes are replayed on sapo/WebShop-v0's boards",
}
"""Registered env ids that have no board of their own, with the reason a server gives when asked for one."""


@dataclass(frozen=True)
class Board:
    """One hosted (env, split) pair, pinned by its spec hash."""

    env_id: str
    split: str
    spec_hash: str
    spec_fields: dict[str, Any]
    task_ids: tuple[str, ...]
    task_types: dict[str, str] = field(default_factory=dict, compare=False)
    """task id -> its category (``info["task_type"]`` after a reset to it); admission checks episodes against it."""

    @property
    def key(self) -> str:
        return f"{self.env_id}:{self.split}"


def make_env(env_id: str, split: str | None) -> Any:
    """The env a board's results come from: registered defaults, raw observations."""
    import gymnasium as gym

    import sapo_gym  # noqa: F401  (registers the ids)
    from leaderboard.private import env_kwargs

    kwargs: dict[str, Any] = {"prompt": None, **env_kwargs(env_id, split)}  # a private split: this server's seed
    if split is not None:
        kwargs["split"] = split
    return gym.make(env_id, **kwargs)


def env_board_keys(env_id: str) -> list[str]:
    """``env_id:split`` for each board of one env: the splits in :data:`EVAL_SPLITS`, else ``env_id:`` (its default);
    none for an id in :data:`UNHOSTED`."""
    if env_id in UNHOSTED:
        return []
    splits = EVAL_SPLITS.get(env_id)
    return [f"{env_id}:"] if splits is None else [f"{env_id}:{s}" for s in splits]


def default_board_keys() -> list[str]:
    """``env_id:split`` for every registered env (``env_id:`` = its default split)."""
    import sapo_gym

    return [key for env_id in sapo_gym.ENVS for key in env_board_keys(env_id)]


def board_keys(keys: Iterable[str]) -> list[str]:
    """``keys`` as ``env_id:split``, each once, in order: a bare ``env_id`` (``--board sapo/Vault-v0``) stands for
    that env's boards (:func:`env_board_keys`), and surrounding whitespace is dropped. An id in :data:`UNHOSTED`
    (bare or with a split) is kept as given, so that the registry reports it as skipped, with the reason."""
    out: list[str] = []
    for key in (k.strip() for k in keys):
        for full in [key] if ":" in key or key in UNHOSTED else env_board_keys(key):
            if full not in out:
                out.append(full)
    return out


def _build_board(key: str) -> Board:
    env_id, _, split = key.rpartition(":")
    env = make_env(env_id, split or None)
    try:
        base = env.unwrapped
        return Board(env_id, base.split, base.spec_hash(), base.spec_fields(), tuple(base.task_ids), _task_types(env))
    finally:
        env.close()


def _task_types(env: Any) -> dict[str, str]:
    """Each task's category, read from a reset to it (milliseconds per task on the compiled and generated envs)."""
    types = {}
    for index, task_id in enumerate(env.unwrapped.task_ids):
        _, info = env.reset(seed=0, options={"task_index": index})
        types[task_id] = info["task_type"]
    return types


class BoardRegistry:
    """Boards by spec hash, built lazily on first use (building an env can take seconds)."""

    def __init__(self, keys: Iterable[str] | None = None):
        self._keys = board_keys(keys) if keys is not None else None
        self._boards: dict[str, Board] | None = None
        self._lock = threading.Lock()
        self.skipped: dict[str, str] = {}
        """``env_id:split`` -> why that board could not be built."""

    def _load(self) -> dict[str, Board]:
        with self._lock:
            return self._boards if self._boards is not None else self._build()

    def _build(self) -> dict[str, Board]:
        if self._boards is None:
            boards: dict[str, Board] = {}
            for key in self._keys if self._keys is not None else default_board_keys():
                env_id = key.rpartition(":")[0] or key
                if env_id in UNHOSTED:
                    self.skipped[key] = UNHOSTED[env_id]
                    continue
                try:
                    board = _build_board(key)
                except Exception as exc:  # a missing backend or data set only removes that board
                    self.skipped[key] = f"{type(exc).__name__}: {exc}"
                    log.warning("leaderboard: board %s unavailable (%s)", key, self.skipped[key])
                    continue
                boards[board.spec_hash] = board
            self._boards = boards
        return self._boards

    def get(self, spec_hash: str) -> Board | None:
        return self._load().get(spec_hash)

    def find(self, env_id: str, split: str) -> Board | None:
        return next((b for b in self._load().values() if b.env_id == env_id and b.split == split), None)

    def __iter__(self):
        return iter(sorted(self._load().values(), key=lambda b: (b.env_id, b.split)))

    def __len__(self) -> int:
        return len(self._load())
