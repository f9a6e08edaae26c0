"""The replay verifier: a background thread (or ``sapo-gym leaderboard verify``) draining the queue."""

from __future__ import annotations

import logging
import threading

from leaderboard.replay import replay_bundle
from leaderboard.server.store import Store

__all__ = ["Verifier"]

log = logging.getLogger(__name__)


class Verifier:
    """Replays pending submissions one at a time and records verified/failed with the reason."""

    def __init__(self, store: Store, poll_seconds: float = 1.0):
        self.store = store
        self.poll_seconds = poll_seconds
        self.wake = threading.Event()
        """Set by the API after a submission, so the worker does not wait a full poll interval."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> int | None:
        """Verify the oldest pending submission; its id, or None when the queue is empty."""
        sid = self.store.claim_pending()
        if sid is None:
            return None
        row = self.store.get(sid)
        assert row is not None
        try:
            result = replay_bundle(self.store.bundle_of(row))
            verified, message = result.verified, result.message
        except Exception as exc:  # a crash in an env is a failed verification, never a dead worker
            log.exception("replay of submission %s crashed", sid)
            verified, message = False, f"replay crashed: {type(exc).__name__}: {exc}"
        self.store.finish(sid, verified, message)
        log.info("submission %s: %s (%s)", sid, "verified" if verified else "failed", message)
        return sid

    def drain(self) -> int:
        """Verify until the queue is empty; how many were processed."""
        done = 0
        while self.run_once() is not None:
            done += 1
        return done

    def _loop(self) -> None:
        self.store.requeue_stale()
        while not self._stop.is_set():
            try:
                if self.run_once() is not None:
                    continue
            except Exception:  # e.g. the database is briefly unavailable
                log.exception("verifier: queue error")
            self.wake.wait(self.poll_seconds)
            self.wake.clear()

    def start(self) -> "Verifier":
        self._thread = threading.Thread(target=self._loop, name="sapo-gym-verifier", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self.wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
