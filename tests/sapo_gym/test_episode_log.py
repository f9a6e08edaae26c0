"""The episodes log: durable lines, header identity, torn tails truncated, errors replayed."""

from __future__ import annotations

from pathlib import Path

import pytest

from sapo_gym.episode_log import EpisodeLog, LogMismatch, default_log_path, header_differences, parse_log, run_created
from sapo_gym.evaluation import EpisodeRecord, StepRecord

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
    assert header_differences({"a": 1, "b": 2}, {"a": 1, "c": 3}) == ["b: log 2, this run (absent)", "c: log (absent), this run 3"]
    assert run_created({"SOURCE_DATE_EPOCH": "0"}) == "1970-01-01T00:00:00+00:00"
