"""When to retry a failed HTTP request, and how long to wait first (pure logic; the clock and sleep are injected).

A retryable failure (429, 408/409, 5xx, a connection error or timeout) waits:

* the server's ``Retry-After`` when it sends one (delta-seconds or an HTTP-date, RFC 9110 §10.2.3), exactly,
  but never less than the backoff's floor ``h/2`` (below): ``Retry-After: 0`` or a date in the past does not
  make a client hammer the server;
* otherwise an exponential backoff with jitter: attempt ``k`` (0-based) waits uniformly in
  ``[h/2, h]`` with ``h = min(cap, base * 2**k)`` ("equal jitter": the waits grow, clients spread out).

The request is given up when the next wait would take the time spent on it (the waits, or the time since its
first attempt when more: slow attempts count too) past ``total`` seconds (default 600: a server restart or a
rate-limit window is outlived, a dead server is not waited on for hours), or after ``max_attempts`` attempts
(default :data:`DEFAULT_MAX_ATTEMPTS`): retries are bounded both by count and by time.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "parse_retry_after",
    "backoff_delay",
    "backoff_floor",
    "RetryBudget",
    "DEFAULT_RETRY_TOTAL",
    "DEFAULT_MAX_ATTEMPTS",
]

DEFAULT_RETRY_TOTAL = 600.0
"""Seconds spent on one request (its attempts and the waits between them) before it is given up."""
DEFAULT_MAX_ATTEMPTS = 32
"""Attempts of one request before it is given up (the default backoff spends the 600 s in about 25)."""


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header at wall-clock time ``now`` (epoch seconds); None when
    absent or unreadable; a date in the past is 0."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        return max(0.0, when.timestamp() - now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


def backoff_delay(attempt: int, rng: random.Random, base: float = 0.5, cap: float = 30.0) -> float:
    """The wait before retry number ``attempt + 1`` without a ``Retry-After``: uniform in ``[h/2, h]``, ``h = min(cap, base·2^attempt)``."""
    high = min(cap, base * 2.0 ** min(attempt, 60))
    return high / 2 + rng.uniform(0.0, high / 2)


def backoff_floor(attempt: int, base: float = 0.5, cap: float = 30.0) -> float:
    """The least wait before retry number ``attempt + 1``, whatever ``Retry-After`` says: ``h/2`` of :func:`backoff_delay`."""
    return min(cap, base * 2.0 ** min(attempt, 60)) / 2


@dataclass
class RetryBudget:
    """The waits of one request: :meth:`next_wait` says how long to sleep before the next attempt, or None to give up."""

    total: float = DEFAULT_RETRY_TOTAL
    max_attempts: int | None = DEFAULT_MAX_ATTEMPTS
    rng: random.Random = field(default_factory=random.Random)
    wall_clock: Callable[[], float] = time.time
    waited: float = 0.0
    attempts: int = 0
    clock: Callable[[], float] = time.monotonic
    """A monotonic clock: the time since the budget was made counts against ``total`` (slow attempts included)."""
    started: float | None = None

    def __post_init__(self) -> None:
        if self.started is None:
            self.started = self.clock()

    def spent(self) -> float:
        """Seconds spent on the request: the waits, or the time since its first attempt when that is more."""
        assert self.started is not None
        return max(self.waited, self.clock() - self.started)

    def next_wait(self, retry_after: str | None) -> float | None:
        """Count the failed attempt; the seconds to wait before the next one, or None when the budget is spent."""
        self.attempts += 1
        if self.max_attempts is not None and self.attempts >= self.max_attempts:
            return None
        told = parse_retry_after(retry_after, self.wall_clock())
        floor = backoff_floor(self.attempts - 1)
        delay = max(told, floor) if told is not None else backoff_delay(self.attempts - 1, self.rng)
        if self.spent() + delay > self.total:
            return None
        self.waited += delay
        return delay
