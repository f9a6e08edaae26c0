"""One server process's envs for live runs: a cache, never the record.

What a live run has played is in the database (``live_episodes``, ``live_turns``). An episode's env is
a function of its (task, seed) and the outputs played so far, so any process can rebuild it: reset it
with the episode's seed and replay the recorded outputs (the replay verifier relies on the same
determinism). This cache keeps the env a process last stepped for an episode, with the number of
turns it has played; a request that finds it at the episode's recorded turn count steps it directly,
one that does not (another process played the last turn, this process restarted, the env was evicted)
rebuilds it first. So a restart, a ``kill -9`` or a second process costs one replay, never a run.

Bounded: at most ``capacity`` envs in all (the least recently used one is closed past it); envs of
ended episodes go back to their board's pool for the next deal.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from leaderboard import private
from leaderboard.boards import Board

__all__ = ["EnvCache"]

Key = tuple[int, int]
"""(run id, episode index)."""


def make_env(board: Board) -> Any:
    """One env of ``board`` (a private split's env with its kwargs)."""
    import gymnasium as gym

    return gym.make(board.env_id, split=board.split, **private.env_kwargs(board.env_id, board.split))


class EnvCache:
    """The envs of the episodes this process stepped last, and idle envs per board. Thread-safe; an env taken out is
    the caller's until it gives it back (:meth:`keep`, :meth:`release`) or drops it (:meth:`discard`)."""

    def __init__(self, capacity: int, factory: Callable[[Board], Any] = make_env):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity, self.factory = capacity, factory
        self._playing: OrderedDict[Key, tuple[Any, int]] = OrderedDict()
        """Episode -> (its env, turns that env has played), least recently used first."""
        self._idle: dict[str, list[Any]] = {}
        """Board key -> envs no episode holds (reset before their next use)."""
        self._lock = threading.Lock()
        self.rebuilt = 0
        """Episodes whose env was rebuilt by a replay (a restart, another process, an eviction): for tests and logs."""

    def fresh(self, board: Board) -> Any:
        """An env of ``board`` for a new episode (an idle one, else a new one)."""
        with self._lock:
            pool = self._idle.get(board.key)
            if pool:
                return pool.pop()
        return self.factory(board)

    def take(
        self, key: Key, board: Board, task_id: str, seed: int, outputs: Callable[[], Sequence[str]], steps: int
    ) -> Any:
        """The env of episode ``key`` after its ``steps`` recorded turns: the cached one when it is there, else a
        fresh one reset to (``task_id``, ``seed``) with ``outputs()`` (the recorded outputs, in order) replayed."""
        with self._lock:
            cached = self._playing.pop(key, None)
        if cached is not None and cached[1] == steps:
            return cached[0]
        if cached is not None:  # another process played this episode on: this copy is behind
            self._close(cached[0])
        env = self.fresh(board)
        try:
            env.reset(seed=seed, options={"task_id": task_id})
            played = list(outputs())
            if len(played) != steps:
                raise RuntimeError(f"episode {key} has {len(played)} recorded turns, its row says {steps}")
            for output in played:
                env.step(output)
        except BaseException:
            self._close(env)
            raise
        self.rebuilt += 1
        return env

    def keep(self, key: Key, env: Any, steps: int) -> None:
        """Episode ``key``'s env, now at ``steps`` acknowledged turns, back in the cache."""
        with self._lock:
            self._playing[key] = (env, steps)
            self._playing.move_to_end(key)
            evicted = self._evict()
        for old in evicted:
            self._close(old)

    def release(self, board: Board, env: Any) -> None:
        """An ended episode's env: idle for the board's next deal."""
        with self._lock:
            self._idle.setdefault(board.key, []).append(env)
            evicted = self._evict()
        for old in evicted:
            self._close(old)

    def discard(self, env: Any) -> None:
        """An env whose state the database does not hold (a step that was not acknowledged): closed."""
        self._close(env)

    def drop_run(self, run_id: int) -> int:
        """Close this process's envs of a run that ended (finished or expired); how many."""
        with self._lock:
            keys = [k for k in self._playing if k[0] == run_id]
            envs = [self._playing.pop(k)[0] for k in keys]
        for env in envs:
            self._close(env)
        return len(envs)

    def close(self) -> None:
        with self._lock:
            envs = [e for e, _ in self._playing.values()] + [e for pool in self._idle.values() for e in pool]
            self._playing.clear()
            self._idle.clear()
        for env in envs:
            self._close(env)

    def _evict(self) -> list[Any]:
        """Past capacity: idle envs first, then the least recently stepped episodes' (rebuilt by replay if needed)."""
        out = []
        while len(self._playing) + sum(map(len, self._idle.values())) > self.capacity:
            pool = next((p for p in self._idle.values() if p), None)
            out.append(pool.pop() if pool is not None else self._playing.popitem(last=False)[1][0])
        return out

    @staticmethod
    def _close(env: Any) -> None:
        try:
            env.close()
        except Exception:  # a broken env is dropped either way
            pass
