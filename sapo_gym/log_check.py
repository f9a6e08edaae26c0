"""Checking an episodes log before a resume trusts it: every line, every field, against the run it resumes.

:func:`check_header` reads the header (format, version, ``created`` a UTC timestamp to the second and not in
the future, ``run_id``, the ``run`` object); :func:`check_entry` one episode line: exactly the keys the log
writes, the header's ``run_id``, a ``(seed, slot)`` of this run's plan with that slot's task, and a record whose
every field has its type and range (:func:`record_from_dict`: steps, invalid actions and return agree with
the turns; an output within the action bound). Accounting fields (tokens, latency, finish reason: never in a
bundle) out of their bounds are recorded as unknown with a warning (:mod:`sapo_gym.bounds`); anything else
wrong raises :class:`LogMismatch` naming the line.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import os
from collections.abc import Mapping
from typing import Any

from sapo_gym.bounds import clean_usage
from sapo_gym.core import ACTION_MAX_LENGTH
from sapo_gym.records import EpisodeRecord, StepRecord

__all__ = [
    "LogMismatch",
    "LOG_FORMAT",
    "LOG_VERSION",
    "READABLE_VERSIONS",
    "check_header",
    "check_entry",
    "record_from_dict",
    "check_created",
]

LOG_FORMAT = "sapo-gym-episodes"
LOG_VERSION = 2
"""2: the header carries a ``run_id`` and every episode line repeats it. 1 (no ``run_id``) is still read."""
READABLE_VERSIONS = (1, 2)
FUTURE_SLACK_S = 86400
"""How far in the future a log's ``created`` may be (clock differences between machines)."""

Key = tuple[int, int]
_RECORD_KEYS = frozenset(f.name for f in dataclasses.fields(EpisodeRecord))
_TURN_KEYS = frozenset(f.name for f in dataclasses.fields(StepRecord))
_ACCOUNTING = ("prompt_tokens", "completion_tokens", "latency_s", "finish_reason")


class LogMismatch(ValueError):
    """The log belongs to another run or is damaged: resuming it would mix results."""


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _float(value: Any) -> bool:
    return isinstance(value, float) and math.isfinite(value)


def _text(value: Any, limit: int | None = None) -> bool:
    if not isinstance(value, str) or (limit is not None and len(value) > limit):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_created(created: Any, environ: Mapping[str, str] | None = None, now: dt.datetime | None = None) -> str:
    """``created`` as :func:`sapo_gym.episode_log.run_created` writes it (UTC, to the second, not in the future); else
    :class:`LogMismatch`."""
    try:
        when = dt.datetime.fromisoformat(created) if isinstance(created, str) else None
    except ValueError:
        when = None
    if when is None or when.utcoffset() != dt.timedelta(0) or when.isoformat(timespec="seconds") != created:
        raise LogMismatch(
            f"its header's created is {str(created)[:80]!r}, not a UTC time to the second (2026-01-01T00:00:00+00:00)"
        )
    latest = (now or dt.datetime.now(dt.timezone.utc)) + dt.timedelta(seconds=FUTURE_SLACK_S)
    epoch = (os.environ if environ is None else environ).get("SOURCE_DATE_EPOCH")
    if epoch and epoch.strip().isdigit() and int(epoch) < 1 << 40:
        latest = max(latest, dt.datetime.fromtimestamp(int(epoch), dt.timezone.utc))
    if when > latest or when.year < 1970:
        raise LogMismatch(f"its header's created {created} is not a time this run could have started at")
    return created


def check_header(head: Any) -> tuple[dict[str, Any], str | None]:
    """``(run, run_id)`` of a header line (``run_id`` None in a version 1 log); :class:`LogMismatch` when it is not one."""
    if not isinstance(head, dict) or head.get("format") != LOG_FORMAT or head.get("version") not in READABLE_VERSIONS:
        raise LogMismatch(
            f"it is not a {LOG_FORMAT} log of version {' or '.join(map(str, READABLE_VERSIONS))} (header {str(head)[:200]})"
        )
    expected = {"format", "version", "created", "run"} | ({"run_id"} if head["version"] >= 2 else set())
    if set(head) != expected:
        raise LogMismatch(
            f"its header has the keys {sorted(head)}, a version {head['version']} header has {sorted(expected)}"
        )
    check_created(head["created"])
    if not isinstance(head["run"], dict):
        raise LogMismatch("its header's run is not an object")
    run_id = head.get("run_id")
    if head["version"] >= 2 and not (_text(run_id, 64) and run_id):
        raise LogMismatch(f"its header's run_id is {str(run_id)[:80]!r}, not an identifier")
    return head["run"], run_id


def _turn(data: Any, where: str) -> StepRecord:
    if not isinstance(data, dict) or set(data) != _TURN_KEYS:
        raise LogMismatch(f"{where}: a turn is an object with the keys {sorted(_TURN_KEYS)}, got {str(data)[:200]}")
    checks = {
        "output": _text(data["output"], ACTION_MAX_LENGTH),
        "action": _text(data["action"]),
        "think": data["think"] is None or _text(data["think"]),
        "valid": isinstance(data["valid"], bool),
        "admissible": isinstance(data["admissible"], bool),
        "observation": _text(data["observation"]),
        "reward": _float(data["reward"]),
    }
    bad = [name for name, ok in checks.items() if not ok]
    if bad:
        raise LogMismatch(
            f"{where}: a turn's {', '.join(bad)} has the wrong type or range ({str({k: data[k] for k in bad})[:200]})"
        )
    return StepRecord(**{k: data[k] for k in checks}, **clean_usage({k: data[k] for k in _ACCOUNTING}))


def record_from_dict(data: Any, where: str) -> EpisodeRecord:
    """An :class:`EpisodeRecord` from a log line's ``record``, every field checked (see the module docstring)."""
    if not isinstance(data, dict) or set(data) != _RECORD_KEYS:
        raise LogMismatch(
            f"{where}: the record is an object with the keys {sorted(_RECORD_KEYS)}, got {str(data)[:200]}"
        )
    checks = {
        "task_id": _text(data["task_id"]),
        "task_type": _text(data["task_type"]),
        "seed": _int(data["seed"]),
        "success": isinstance(data["success"], bool),
        "score": _float(data["score"]),
        "steps": _int(data["steps"]) and data["steps"] >= 0,
        "invalid_actions": _int(data["invalid_actions"]),
        "episode_return": _float(data["episode_return"]),
        "initial_observation": _text(data["initial_observation"]),
        "turns": isinstance(data["turns"], list),
        "privileged": isinstance(data["privileged"], bool),
    }
    bad = [name for name, ok in checks.items() if not ok]
    if bad:
        raise LogMismatch(f"{where}: the record's {', '.join(bad)} has the wrong type or range")
    turns = [_turn(t, f"{where}, turn {k + 1}") for k, t in enumerate(data["turns"])]
    total = 0.0
    for turn in turns:  # the harness's own sum, in its order: an honest record matches it exactly
        total += turn.reward
    derived = {"steps": len(turns), "invalid_actions": sum(not t.valid for t in turns), "episode_return": total}
    for name, value in derived.items():
        if data[name] != value:
            raise LogMismatch(f"{where}: the record's {name} is {data[name]} but its turns give {value}")
    return EpisodeRecord(**{**data, "turns": turns})


def check_entry(entry: Any, where: str, run_id: str | None, plan: Mapping[Key, str] | None) -> tuple[Key, str, Any]:
    """``(key, status, record or error message)`` of an episode line; :class:`LogMismatch` when it does not belong."""
    base = {"seed", "slot", "task_id", "status"} | ({"run_id"} if run_id is not None else set())
    status = entry.get("status") if isinstance(entry, dict) else None
    payload = {"done": "record", "error": "error"}.get(status) if isinstance(status, str) else None
    if payload is None or set(entry) != base | {payload}:
        raise LogMismatch(
            f"{where}: not an episode line (the keys {sorted(base)} and 'record' or 'error'): {str(entry)[:200]}"
        )
    if run_id is not None and entry["run_id"] != run_id:
        raise LogMismatch(
            f"{where}: the line is from another run (run_id {str(entry['run_id'])[:40]!r}, the header's {run_id!r})"
        )
    if not (_int(entry["seed"]) and _int(entry["slot"]) and _text(entry["task_id"])):
        raise LogMismatch(f"{where}: seed, slot and task_id must be two integers and a string")
    key = (entry["seed"], entry["slot"])
    if plan is not None and plan.get(key) != entry["task_id"]:
        expected = "no such episode" if key not in plan else f"the task {plan[key]!r}"
        raise LogMismatch(
            f"{where}: seed {key[0]} slot {key[1]} is task {entry['task_id']!r}, but this run has {expected} there"
        )
    if status == "error":
        if not _text(entry["error"]):
            raise LogMismatch(f"{where}: the error message is not a string")
        return key, status, entry["error"]
    record = record_from_dict(entry["record"], where)
    if record.task_id != entry["task_id"] or record.seed != entry["seed"]:
        raise LogMismatch(
            f"{where}: the record is of task {record.task_id!r} seed {record.seed}, the line of "
            f"{entry['task_id']!r} seed {entry['seed']}"
        )
    return key, status, record
