"""The episodes log: an append-only JSONL file that makes an evaluation crash-safe and resumable.

Line 1, the header, records everything that identifies the run (:func:`header`): the format, the time the
run first started (``created``, kept by every resume and written into the bundle) and ``run``, the env id,
spec hash, split, mode, seeds, task ids, agent spec and every setting that can change the outputs. Each
later line is one episode as it ended (:meth:`EpisodeLog.episode`): its ``seed``, ``slot`` (its index among
the episodes of that seed: the task's index under ``every-task``), ``task_id``, ``status`` ``done`` with the
``record`` (:meth:`sapo_gym.evaluation.EpisodeRecord.to_dict`), or ``error`` with the ``error`` message.
Every line is written whole with one ``write`` and ``fsync``'d before the run goes on.

Resuming (:meth:`EpisodeLog.open` with ``resume=True``) reads the log back: a header that differs from this
run's is refused, naming the differences; a torn last line (the process was killed mid-write) is ignored
and truncated away; a damaged line elsewhere is refused. Episodes ``done`` are kept and not played again;
``error`` ones are played again.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sapo_gym.evaluation import EpisodeRecord

__all__ = ["LOG_FORMAT", "LOG_VERSION", "EpisodeLog", "LogMismatch", "header", "parse_log", "header_differences",
           "default_log_path", "run_created"]

LOG_FORMAT = "sapo-gym-episodes"
LOG_VERSION = 1

Key = tuple[int, int]
"""(seed, slot): one episode of the plan."""


class LogMismatch(ValueError):
    """The log belongs to another run (or is damaged): resuming it would mix results."""


def run_created(environ: dict[str, str] | None = None) -> str:
    """Now, in UTC, to the second, or the time ``SOURCE_DATE_EPOCH`` names (reproducible outputs)."""
    epoch = (os.environ if environ is None else environ).get("SOURCE_DATE_EPOCH")
    when = dt.datetime.fromtimestamp(int(epoch), dt.timezone.utc) if epoch else dt.datetime.now(dt.timezone.utc)
    return when.isoformat(timespec="seconds")


def header(run: dict[str, Any], created: str | None = None) -> dict[str, Any]:
    """The header line: ``run`` is what identifies the run (JSON values only)."""
    return {"format": LOG_FORMAT, "version": LOG_VERSION, "created": created or run_created(), "run": run}


def default_log_path(bundle_out: str | None, json_out: str | None) -> str | None:
    """``<--out>.episodes.jsonl``, else ``<--json>.episodes.jsonl``, else no log."""
    base = bundle_out or json_out
    return f"{base}.episodes.jsonl" if base else None


def header_differences(logged: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """``key: log X, this run Y`` for each key of the two ``run`` records that differs."""
    out = []
    for key in sorted(set(logged) | set(current)):
        if logged.get(key, ...) != current.get(key, ...):
            show = lambda v: "(absent)" if v is ... else json.dumps(v)[:200]  # noqa: E731
            out.append(f"{key}: log {show(logged.get(key, ...))}, this run {show(current.get(key, ...))}")
    return out


def parse_log(data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """(header, episode lines, length of the intact prefix): a torn last line (no newline, or not JSON) is left
    out of the lines and of the length; a bad line before it raises :class:`LogMismatch`."""
    lines, offset, good = [], 0, 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        if end < 0:  # the last line lacks its newline: torn
            break
        try:
            lines.append(json.loads(data[offset:end]))
        except ValueError:
            if data[end + 1:].strip():
                raise LogMismatch(f"line {len(lines) + 1} of the log is damaged (not JSON) and is not the last one") from None
            break
        offset = good = end + 1
    if not lines:
        raise LogMismatch("the log has no header line")
    head = lines[0]
    if not isinstance(head, dict) or head.get("format") != LOG_FORMAT or head.get("version") != LOG_VERSION:
        raise LogMismatch(f"not a {LOG_FORMAT} v{LOG_VERSION} log (header {str(head)[:200]})")
    return head, lines[1:], good


@dataclass
class EpisodeLog:
    """An open episodes log (see the module docstring); ``done`` holds the episodes already played."""

    path: Path
    created: str
    done: dict[Key, EpisodeRecord] = field(default_factory=dict)
    errors: dict[Key, str] = field(default_factory=dict)
    """The last error of each episode that failed and is not done (it is played again)."""
    _fd: int = -1

    @classmethod
    def open(cls, path: str | os.PathLike, run: dict[str, Any], resume: bool) -> "EpisodeLog":
        """Start a log or resume one (``resume``; a missing log starts afresh). Without ``resume`` an existing
        log is kept as ``<path>.prev`` (one earlier run; the one before it is dropped) and a fresh one started."""
        path = Path(path)
        if path.exists() and not resume:
            previous = path.with_name(path.name + ".prev")
            os.replace(path, previous)
            sys.stderr.write(f"note: started a new episodes log {path}; the earlier one is now {previous} (--resume continues a log)\n")
        if not path.exists() or path.stat().st_size == 0:
            log = cls(path, run_created())
            log._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            log._append(header(run, log.created))
            return log
        head, entries, good = parse_log(path.read_bytes())
        diff = header_differences(head.get("run") or {}, run)
        if diff:
            raise LogMismatch(f"{path} is the log of another run; --resume needs the same settings. Differences:\n  "
                              + "\n  ".join(diff))
        log = cls(path, str(head.get("created") or run_created()))
        for entry in entries:
            key = (int(entry["seed"]), int(entry["slot"]))
            if entry.get("status") == "done":
                log.done[key] = EpisodeRecord.from_dict(entry["record"])
                log.errors.pop(key, None)
            elif key not in log.done:
                log.errors[key] = str(entry.get("error"))
        if good < path.stat().st_size:  # a torn last line: cut it off before appending
            os.truncate(path, good)
        log._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        return log

    def _append(self, obj: dict[str, Any]) -> None:
        line = (json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n").encode()
        view = memoryview(line)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)

    def episode(self, seed: int, slot: int, task_id: str, record: EpisodeRecord) -> None:
        """Append a finished episode (durable when this returns)."""
        self._append({"seed": int(seed), "slot": int(slot), "task_id": task_id, "status": "done", "record": record.to_dict()})
        self.done[(int(seed), int(slot))] = record

    def error(self, seed: int, slot: int, task_id: str, message: str) -> None:
        """Append an episode that failed (it is played again on resume)."""
        self._append({"seed": int(seed), "slot": int(slot), "task_id": task_id, "status": "error", "error": message[:4000]})
        self.errors[(int(seed), int(slot))] = message

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
