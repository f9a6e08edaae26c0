"""The episodes log: durable lines, header identity, torn tails truncated, errors replayed."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from sapo_gym import episode_log
from sapo_gym.episode_log import (
    EpisodeLog,
    LogLocked,
    LogMismatch,
    LogWriteError,
    default_log_path,
    header_differences,
    parse_log,
    run_created,
)
from sapo_gym.records import EpisodeRecord, StepRecord

RUN = {"env_id": "sapo/Vault-v0", "seeds": [0], "tasks": ["a", "b"], "generation": {"temperature": 0.0}}


def _record(task: str) -> EpisodeRecord:
    turn = StepRecord("<action>x</action>", "x", None, True, False, "obs", 0.1 + 0.2, 12, 3, 0.25, "length")
    return EpisodeRecord(task, "t", 0, False, 0.0, 1, 0, 0.1 + 0.2, "start", [turn])


def test_records_round_trip_exactly_and_the_log_resumes(tmp_path: Path) -> None:
    path = tmp_path / "run.episodes.jsonl"
    log = EpisodeLog.open(path, RUN, resume=False)
    log.episode(0, 0, "a", _record("a"))
    log.error(0, 1, "b", "HTTP 503")
    log.close()
    again = EpisodeLog.open(path, RUN, resume=True)
    assert again.done == {(0, 0): _record("a")} and again.errors == {(0, 1): "HTTP 503"}
    assert again.created == log.created
    again.episode(0, 1, "b", _record("b"))
    again.close()
    third = EpisodeLog.open(path, RUN, resume=True)
    assert set(third.done) == {(0, 0), (0, 1)} and not third.errors  # the error was played again and is done


def test_a_torn_last_line_is_ignored_and_truncated(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    EpisodeLog.open(path, RUN, resume=False).episode(0, 0, "a", _record("a"))
    intact = path.read_bytes()
    path.write_bytes(intact + b'{"seed": 0, "slot": 1, "task_id": "b", "sta')
    log = EpisodeLog.open(path, RUN, resume=True)
    assert list(log.done) == [(0, 0)] and path.read_bytes() == intact
    log.episode(0, 1, "b", _record("b"))
    assert len(parse_log(path.read_bytes())[1]) == 2


def test_a_damaged_line_in_the_middle_and_another_run_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    EpisodeLog.open(path, RUN, resume=False).episode(0, 0, "a", _record("a"))
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + b"{not json\n" + lines[1])
    with pytest.raises(LogMismatch, match="line 2 of the log is damaged"):
        EpisodeLog.open(path, RUN, resume=True)
    path.write_bytes(b"".join(lines))
    with pytest.raises(LogMismatch, match=r"generation: log \{\"temperature\": 0.0\}, this run \{\}"):
        EpisodeLog.open(path, {**RUN, "generation": {}}, resume=True)


def test_a_new_run_keeps_the_previous_log_aside(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    EpisodeLog.open(path, RUN, resume=False).episode(0, 0, "a", _record("a"))
    EpisodeLog.open(path, RUN, resume=False).close()
    assert not EpisodeLog.open(path, RUN, resume=True).done
    assert (tmp_path / "log.jsonl.prev").exists()


def test_small_pieces() -> None:
    assert default_log_path("b.json", "j.json") == "b.json.episodes.jsonl"
    assert default_log_path(None, "j.json") == "j.json.episodes.jsonl" and default_log_path(None, None) is None
    assert header_differences({"a": 1, "b": 2}, {"a": 1, "c": 3}) == [
        "b: log 2, this run (absent)",
        "c: log (absent), this run 3",
    ]
    assert run_created({"SOURCE_DATE_EPOCH": "0"}) == "1970-01-01T00:00:00+00:00"


PLAN = {(0, 0): "a", (0, 1): "b"}


def _edited(path: Path, line: int, edit) -> None:  # type: ignore[no-untyped-def]
    """Apply ``edit`` to the JSON object on ``line`` (1-based) of the log."""
    lines = path.read_text().splitlines()
    obj = json.loads(lines[line - 1])
    edit(obj)
    lines[line - 1] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n")


def _two_episodes(path: Path) -> bytes:
    with EpisodeLog.open(path, RUN, resume=False, plan=PLAN) as log:
        log.episode(0, 0, "a", _record("a"))
        log.episode(0, 1, "b", _record("b"))
    return path.read_bytes()


def test_a_log_in_use_is_refused_and_freed_by_close(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    held = EpisodeLog.open(path, RUN, resume=False)
    for resume in (True, False):
        with pytest.raises(LogLocked, match="in use by another sapo-gym evaluate"):
            EpisodeLog.open(path, RUN, resume=resume)
    held.episode(0, 0, "a", _record("a"))
    held.close()
    with EpisodeLog.open(path, RUN, resume=True) as again:
        assert list(again.done) == [(0, 0)]
    assert not (tmp_path / "log.jsonl.prev").exists()


def test_a_symbolic_link_is_not_followed(tmp_path: Path) -> None:
    path, target = tmp_path / "log.jsonl", tmp_path / "elsewhere.jsonl"
    path.symlink_to(target)  # dangling
    for resume in (True, False):
        with pytest.raises(ValueError, match="is a symbolic link"):
            EpisodeLog.open(path, RUN, resume=resume)
    assert not target.exists()


@pytest.mark.parametrize(
    "line, edit, message",
    [
        (2, lambda o: o.update(run_id="0123456789abcdef"), "line 2: the line is from another run"),
        (3, lambda o: o.update(task_id="a"), "line 3: seed 0 slot 1 is task 'a', but this run has the task 'b' there"),
        (3, lambda o: o.update(slot=7), "line 3: seed 0 slot 7 is task 'b', but this run has no such episode"),
        (2, lambda o: o["record"].update(success="yes"), "line 2: the record's success has the wrong type"),
        (2, lambda o: o["record"].update(steps=3), "line 2: the record's steps is 3 but its turns give 1"),
        (
            2,
            lambda o: o["record"].update(episode_return=0.3),
            "line 2: the record's episode_return is 0.3 but its turns give 0.30000000000000004",
        ),
        (2, lambda o: o["record"]["turns"][0].update(reward="1"), "line 2, turn 1: a turn's reward has the wrong type"),
        (
            2,
            lambda o: o["record"]["turns"][0].update(output="x" * 65537),
            "line 2, turn 1: a turn's output has the wrong type or range",
        ),
        (
            2,
            lambda o: o["record"].update(task_id="b"),
            "line 2: the record is of task 'b' seed 0, the line of 'a' seed 0",
        ),
        (2, lambda o: o.update(summary={"success": 1.0}), "line 2: not an episode line"),
        (
            1,
            lambda o: o.update(created="2026-13-01T00:00:00+00:00"),
            "created is '2026-13-01T00:00:00\\+00:00', not a UTC time",
        ),
        (1, lambda o: o.update(created="2026-01-01T02:00:00+02:00"), "not a UTC time"),
        (1, lambda o: o.update(created="9999-01-01T00:00:00+00:00"), "is not a time this run could have started at"),
    ],
)
def test_every_line_is_checked_against_the_run_it_resumes(tmp_path: Path, line: int, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "log.jsonl"
    _two_episodes(path)
    _edited(path, line, edit)
    with pytest.raises(LogMismatch, match=message) as caught:
        EpisodeLog.open(path, RUN, resume=True, plan=PLAN)
    assert str(path) in str(caught.value) and "without --resume" in str(caught.value)


def test_an_episode_done_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    lines = _two_episodes(path).splitlines(keepends=True)
    path.write_bytes(b"".join(lines) + lines[1])
    with pytest.raises(LogMismatch, match="line 4: seed 0 slot 0 is already done at line 2"):
        EpisodeLog.open(path, RUN, resume=True, plan=PLAN)


def test_accounting_out_of_bounds_in_a_log_is_read_as_unknown(tmp_path: Path) -> None:
    """A log written before the bounds (10^400 prompt tokens) resumes: its counts are unknown, nothing overflows."""
    path = tmp_path / "log.jsonl"
    _two_episodes(path)
    _edited(path, 2, lambda o: o["record"]["turns"][0].update(prompt_tokens=10**400, latency_s=-1.0))
    with EpisodeLog.open(path, RUN, resume=True, plan=PLAN) as log:
        turn = log.done[(0, 0)].turns[0]
    assert turn.prompt_tokens is None and turn.latency_s is None and turn.completion_tokens == 3


def test_a_failed_write_leaves_no_torn_line_and_says_which_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log.jsonl"
    log = EpisodeLog.open(path, RUN, resume=False, plan=PLAN)
    log.episode(0, 0, "a", _record("a"))
    intact = path.read_bytes()
    real_write = os.write

    def full_disk(fd: int, data: bytes) -> int:
        real_write(fd, bytes(data[:7]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(episode_log.os, "write", full_disk)
    with pytest.raises(LogWriteError, match=r"cannot write to the episodes log .*log.jsonl: No space left on device"):
        log.episode(0, 1, "b", _record("b"))
    monkeypatch.undo()
    log.close()
    assert path.read_bytes() == intact
    with EpisodeLog.open(path, RUN, resume=True, plan=PLAN) as again:
        assert list(again.done) == [(0, 0)]
