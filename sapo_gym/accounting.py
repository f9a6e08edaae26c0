"""What an evaluation cost and how far along it is: token totals, a cost estimate, progress per turn with an ETA.

:func:`usage_totals` sums the per-turn accounting of :class:`sapo_gym.records.StepRecord` (tokens as the
server reported them, latency, ``finish_reason``) and prices it; :class:`Progress` prints turns done,
episodes done and in flight with an ETA from the turn rate (:func:`eta_seconds`), at most once per
``interval`` seconds of its injected clock.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TextIO

__all__ = ["usage_totals", "format_usage", "eta_seconds", "Progress"]


def usage_totals(
    records: Sequence[Any], price_prompt: float | None = None, price_completion: float | None = None
) -> dict[str, Any]:
    """Turns, prompt and completion tokens (and how many turns reported them), latency, finish reasons and,
    given prices in USD per million tokens, ``cost_usd`` (None without prices)."""
    turns = [t for r in records for t in r.turns]
    prompt = [t.prompt_tokens for t in turns if t.prompt_tokens is not None]
    completion = [t.completion_tokens for t in turns if t.completion_tokens is not None]
    latencies = [t.latency_s for t in turns if t.latency_s is not None]
    reasons = Counter(t.finish_reason for t in turns if t.finish_reason is not None)
    cost = None
    if price_prompt is not None or price_completion is not None:
        cost = (sum(prompt) * (price_prompt or 0.0) + sum(completion) * (price_completion or 0.0)) / 1e6
    return {
        "episodes": len(records),
        "turns": len(turns),
        "prompt_tokens": sum(prompt),
        "completion_tokens": sum(completion),
        "turns_with_usage": min(len(prompt), len(completion)),
        "latency_s_total": sum(latencies),
        "latency_s_mean": sum(latencies) / len(latencies) if latencies else None,
        "finish_reasons": dict(sorted(reasons.items())),
        "truncated_turns": reasons.get("length", 0),
        "price_prompt_per_m": price_prompt,
        "price_completion_per_m": price_completion,
        "cost_usd": cost,
    }


def format_usage(totals: dict[str, Any]) -> str:
    """One line of :func:`usage_totals` for the terminal."""
    line = (
        f"usage: {totals['turns']} turns, {totals['prompt_tokens']:,} prompt + {totals['completion_tokens']:,} completion "
        f"tokens ({totals['turns_with_usage']} turns reported usage)"
    )
    if totals["finish_reasons"]:
        line += ", finish " + ", ".join(f"{k} {v}" for k, v in totals["finish_reasons"].items())
    if totals["latency_s_mean"] is not None:
        line += f", mean latency {totals['latency_s_mean']:.2f} s"
    if totals["cost_usd"] is not None:
        line += f", estimated cost ${totals['cost_usd']:.4f}"
    return line


def eta_seconds(
    turns: int, finished: int, finished_turns: int, open_turns: int, remaining: int, elapsed: float
) -> float | None:
    """Seconds left, from this run's turn rate: ``remaining`` episodes not finished (those in flight included)
    need ``remaining · m - open_turns`` more turns, ``m`` the mean turns of the ``finished`` episodes
    (``finished_turns`` in all) and ``open_turns`` the turns already taken by the episodes in flight.
    None until a turn was taken and an episode finished (no rate, no episode length yet)."""
    if turns <= 0 or elapsed <= 0 or finished <= 0:
        return None
    mean_turns = finished_turns / finished
    left = max(0.0, remaining * mean_turns - open_turns)
    return left / (turns / elapsed)


def _clock_text(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """Turn-level progress: ``turn()`` per env step, ``episode(turns)`` per finished episode, ``in_flight`` set by
    the runner; a status line (``\\r``-rewritten on a terminal, a line per ``interval`` otherwise)."""

    def __init__(
        self,
        total: int,
        already: int = 0,
        label: str = "evaluate",
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval: float = 1.0,
    ):
        self.total, self.done, self.label = total, already, label
        self.stream = stream if stream is not None else sys.stderr
        self.clock, self.interval = clock, interval
        self.start = self.last = clock()
        self.turns = self.finished = self.finished_turns = self.in_flight = 0

    def turn(self, n: int = 1) -> None:
        self.turns += n
        self._maybe_show()

    def episode(self, turns: int) -> None:
        self.done += 1
        self.finished += 1
        self.finished_turns += turns
        self._maybe_show()

    def eta(self) -> float | None:
        open_turns = self.turns - self.finished_turns
        return eta_seconds(
            self.turns,
            self.finished,
            self.finished_turns,
            open_turns,
            self.total - self.done,
            self.clock() - self.start,
        )

    def line(self) -> str:
        elapsed = self.clock() - self.start
        rate = self.turns / elapsed * 60 if elapsed > 0 else 0.0
        return (
            f"{self.label}: {self.done}/{self.total} episodes, {self.turns} turns ({rate:.0f}/min), "
            f"{self.in_flight} in flight, ETA {_clock_text(self.eta())}"
        )

    def _maybe_show(self, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self.last < self.interval:
            return
        self.last = now
        tty = getattr(self.stream, "isatty", lambda: False)()
        self.stream.write(("\r" + self.line() + "\x1b[K") if tty else self.line() + "\n")
        self.stream.flush()

    def close(self) -> None:
        self._maybe_show(force=True)
        if getattr(self.stream, "isatty", lambda: False)():
            self.stream.write("\n")
