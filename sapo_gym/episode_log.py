"""The episodes log: an append-only JSONL file that makes an evaluation crash-safe and resumable.

Line 1, the header, records everything that identifies the run (:func:`header`): the format, the time the
run first started (``created``, kept by every resume and written into the bundle), a random ``run_id`` and
``run``, the env id, spec hash, split, mode, seeds, task ids, agent spec and every setting that can change the
outputs. Each later line is one episode as it ended (:meth:`EpisodeLog.episode`): the ``run_id``, its
``seed``, ``slot`` (its index among the episodes of that seed: the task's index under ``every-task``),
``task_id``, ``status`` ``done`` with the ``record`` (:meth:`sapo_gym.records.EpisodeRecord.to_dict`), or
``error`` with the ``error`` message. Every line is written whole with one ``write`` and ``fsync``'d before
the run goes on; a write that fails (a full disk) is cut back off and raises :class:`LogWriteError`.

The log is held under an exclusive lock (``flock``, not waited for) while it is open: a second evaluation of
the same log is refused with :class:`LogLocked`. A symbolic link is never followed.

Resuming (:meth:`EpisodeLog.open` with ``resume=True``) reads the log back: a header that differs from this
run's is refused, naming the differences; a torn last line (the process was killed mid-write) is ignored
and truncated away; a damaged line elsewhere is refused; every line is checked against the run
(:mod:`sapo_gym.log_check`). Episodes ``done`` are kept and not played again; ``error`` ones are played again.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sapo_gym.files import refuse_symlink
from sapo_gym.log_check import LOG_FORMAT, LOG_VERSION, LogMismatch, check_entry, check_header
from sapo_gym.records import EpisodeRecord

__all__ = [
    "LOG_FORMAT",
    "LOG_VERSION",
    "EpisodeLog",
    "LogMismatch",
    "LogLocked",
    "LogWriteError",
    "header",
    "parse_log",
    "header_differences",
    "default_log_path",
    "run_created",
]

Key = tuple[int, int]
"""(seed, slot): one episode of the plan."""
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class LogLocked(LogMismatch):
    """Another process holds the log (an evaluation of the same log is running)."""


class LogWriteError(RuntimeError):
    """A line could not be written (a full disk, an I/O error); the log holds every line before it, intact."""


def run_created(environ: dict[str, str] | None = None) -> str:
    """Now, in UTC, to the second, or the time ``SOURCE_DATE_EPOCH`` names (reproducible outputs)."""
    epoch = (os.environ if environ is None else environ).get("SOURCE_DATE_EPOCH")
    when = dt.datetime.fromtimestamp(int(epoch), dt.timezone.utc) if epoch else dt.datetime.now(dt.timezone.utc)
    return when.isoformat(timespec="seconds")


def header(run: dict[str, Any], created: str | None = None, run_id: str | None = None) -> dict[str, Any]:
    """The header line: ``run`` is what identifies the run (JSON values only); ``run_id`` tags its episode lines."""
    return {
        "format": LOG_FORMAT,
        "version": LOG_VERSION,
        "created": created or run_created(),
        "run_id": run_id or secrets.token_hex(8),
        "run": run,
    }


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


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_log(data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """(header, episode lines, length of the intact prefix): a torn last line (no newline, or not JSON) is left
    out of the lines and of the length; a bad line before it raises :class:`LogMismatch`."""
    lines, offset, good = [], 0, 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        if end < 0:  # the last line lacks its newline: torn
            break
        try:
            lines.append(json.loads(data[offset:end].decode("utf-8"), parse_constant=_no_constant))
        except (ValueError, RecursionError):
            if data[end + 1 :].strip():
                raise LogMismatch(
                    f"line {len(lines) + 1} of the log is damaged (not JSON) and is not the last one"
                ) from None
            break
        offset = good = end + 1
    if not lines:
        raise LogMismatch("the log has no header line")
    check_header(lines[0])
    return lines[0], lines[1:], good


def _read_all(fd: int) -> bytes:
    chunks, offset = [], 0
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def _lock(fd: int, path: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogLocked(
            f"the episodes log {path} is in use by another sapo-gym evaluate (it holds the log's lock); "
            "wait for it to end, or give this run another --episodes-log"
        ) from None


def _open_locked(path: Path, flags: int) -> int:
    """``path`` opened (never through a link) and locked; FileNotFoundError when it is missing, LogLocked when held."""
    fd = os.open(path, flags | _NOFOLLOW, 0o644)
    _lock(fd, path)
    try:
        same = os.path.samestat(os.stat(path, follow_symlinks=False), os.fstat(fd))
    except FileNotFoundError:
        same = False
    if not same:  # moved aside by another run between the open and the lock
        os.close(fd)
        raise LogLocked(f"the episodes log {path} was replaced while this run opened it (another sapo-gym evaluate?)")
    return fd


@dataclass
class EpisodeLog:
    """An open episodes log (see the module docstring); ``done`` holds the episodes already played."""

    path: Path
    created: str
    done: dict[Key, EpisodeRecord] = field(default_factory=dict)
    errors: dict[Key, str] = field(default_factory=dict)
    """The last error of each episode that failed and is not done (it is played again)."""
    run_id: str | None = None
    lines: dict[Key, int] = field(default_factory=dict)
    """The line of the log each ``done`` episode was read from (for messages about it)."""
    _fd: int = -1
    _good: int = 0

    @classmethod
    def open(
        cls, path: str | os.PathLike, run: dict[str, Any], resume: bool, plan: Mapping[Key, str] | None = None
    ) -> EpisodeLog:
        """Start a log or resume one (``resume``; a missing log starts afresh), locked until :meth:`close`. Without
        ``resume`` an existing log is kept as ``<path>.prev`` (one earlier run; the one before it is dropped) and a
        fresh one started. ``plan``: this run's ``(seed, slot) -> task_id``; every line of a resumed log must match it.
        OSErrors come back as :class:`LogMismatch` naming the file."""
        path = refuse_symlink(path, "episodes log")
        try:
            if resume:
                try:
                    fd = _open_locked(path, os.O_RDWR | os.O_APPEND)
                except FileNotFoundError:
                    return cls._start(path, run)
                return cls._resume(path, fd, run, plan)
            return cls._start(path, run)
        except OSError as exc:
            raise LogMismatch(f"cannot open the episodes log {path}: {exc.strerror or exc}") from None
        except LogLocked:
            raise
        except LogMismatch as exc:
            raise LogMismatch(
                f"{exc} (this log cannot be resumed; without --resume a new run starts and keeps it as "
                f"{path.name}.prev)"
            ) from None

    @classmethod
    def _start(cls, path: Path, run: dict[str, Any]) -> EpisodeLog:
        old = None
        try:
            old = _open_locked(path, os.O_RDONLY)
        except FileNotFoundError:
            pass
        try:
            if old is not None:
                previous = path.with_name(path.name + ".prev")
                os.replace(path, previous)
                sys.stderr.write(
                    f"note: started a new episodes log {path}; the earlier one is now {previous} (--resume continues a log)\n"
                )
            try:
                fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)
            except FileExistsError:
                raise LogLocked(f"the episodes log {path} was created by another sapo-gym evaluate meanwhile") from None
            _lock(fd, path)
        finally:
            if old is not None:
                os.close(old)
        head = header(run)
        log = cls(path, head["created"], run_id=head["run_id"], _fd=fd)
        log._append(head)
        return log

    @classmethod
    def _resume(cls, path: Path, fd: int, run: dict[str, Any], plan: Mapping[Key, str] | None) -> EpisodeLog:
        try:
            data = _read_all(fd)
            if not data:  # created but never written: start it here
                head = header(run)
                log = cls(path, head["created"], run_id=head["run_id"], _fd=fd)
                log._append(head)
                return log
            log = cls._read(path, data, run, plan)
            if len(data) > log._good:  # a torn last line: cut it off before appending
                os.ftruncate(fd, log._good)
                sys.stderr.write(
                    f"note: the last line of {path} was torn (a run killed while writing it): {len(data) - log._good} "
                    "bytes cut off; its episode is played again\n"
                )
        except BaseException:
            os.close(fd)
            raise
        log._fd = fd
        return log

    @classmethod
    def _read(cls, path: Path, data: bytes, run: dict[str, Any], plan: Mapping[Key, str] | None) -> EpisodeLog:
        try:
            head, entries, good = parse_log(data)
        except LogMismatch as exc:
            raise LogMismatch(f"the episodes log {path} cannot be resumed: {exc}") from None
        diff = header_differences(head["run"], run)
        if diff:
            raise LogMismatch(
                f"{path} is the log of another run; --resume needs the same settings. Differences:\n  "
                + "\n  ".join(diff)
            )
        log = cls(path, head["created"], run_id=head.get("run_id"))
        log._good = good
        for number, entry in enumerate(entries, start=2):
            log._take(entry, f"{path} line {number}", number, plan)
        return log

    def _take(self, entry: Any, where: str, number: int, plan: Mapping[Key, str] | None) -> None:
        key, status, payload = check_entry(entry, where, self.run_id, plan)
        if key in self.done:
            raise LogMismatch(f"{where}: seed {key[0]} slot {key[1]} is already done at line {self.lines[key]}")
        if status == "done":
            self.done[key], self.lines[key] = payload, number
            self.errors.pop(key, None)
        else:
            self.errors[key] = payload

    def _append(self, obj: dict[str, Any]) -> None:
        try:
            line = (json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n").encode()
        except (ValueError, TypeError) as exc:  # UnicodeEncodeError included
            raise LogWriteError(
                f"cannot write to the episodes log {self.path}: a line cannot be encoded: {exc}"
            ) from None
        size = -1
        try:
            size = os.fstat(self._fd).st_size
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)
        except OSError as exc:
            if size >= 0:
                try:  # no torn line is left behind
                    os.ftruncate(self._fd, size)
                except OSError:
                    pass
            raise LogWriteError(f"cannot write to the episodes log {self.path}: {exc.strerror or exc}") from None

    def _tagged(self, line: dict[str, Any]) -> dict[str, Any]:
        return {"run_id": self.run_id, **line} if self.run_id is not None else line

    def episode(self, seed: int, slot: int, task_id: str, record: EpisodeRecord) -> None:
        """Append a finished episode (durable when this returns)."""
        self._append(
            self._tagged(
                {"seed": int(seed), "slot": int(slot), "task_id": task_id, "status": "done", "record": record.to_dict()}
            )
        )
        self.done[(int(seed), int(slot))] = record

    def error(self, seed: int, slot: int, task_id: str, message: str) -> None:
        """Append an episode that failed (it is played again on resume)."""
        text = message[:4000].encode("utf-8", "backslashreplace").decode("utf-8")
        self._append(
            self._tagged({"seed": int(seed), "slot": int(slot), "task_id": task_id, "status": "error", "error": text})
        )
        self.errors[(int(seed), int(slot))] = message

    def close(self) -> None:
        """Close the log (its lock goes with it); idempotent."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __enter__(self) -> EpisodeLog:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # a log dropped without close() releases its lock
        self.close()
