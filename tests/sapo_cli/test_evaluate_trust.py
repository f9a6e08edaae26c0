"""``sapo-gym evaluate`` trusts neither its agent's answers nor the episodes log it resumes, and fails with one clear
line (the file, the ``--resume`` hint) instead of a traceback, a hang or a destroyed bundle.

Each run is a subprocess (``timeout`` bounds it); failures of the disk are a file size limit (``RLIMIT_FSIZE``:
a write past it fails with EFBIG, as a full disk fails with ENOSPC)."""

from __future__ import annotations

import fcntl
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sapo_gym.bundle import check_bundle

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = "tests.support.scripted_agent:ScriptedAgent"
HOSTILE = "tests.support.hostile_agents"
LOG = "b.json.episodes.jsonl"


def _run(cwd: Path, agent: str, *extra: str, file_limit: int | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:
        if file_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    argv = [
        sys.executable,
        "-m",
        "sapo_cli",
        "evaluate",
        "--env",
        "sapo/Vault-v0",
        "--split",
        "test",
        "--seeds",
        "0",
        "--agent",
        agent,
        "--concurrency",
        "2",
        "--out",
        "b.json",
        *extra,
    ]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SOURCE_DATE_EPOCH": "1767225600",
        "OMP_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, preexec_fn=limit)


def _finished(tmp_path: Path, agent: str = SCRIPTED) -> bytes:
    done = _run(tmp_path, agent)
    assert done.returncode == 0, done.stderr
    return (tmp_path / "b.json").read_bytes()


def _edit(path: Path, pick: Callable[[dict], bool], edit: Callable[[dict], None]) -> None:
    lines = path.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if i and pick(json.loads(line)))
    obj = json.loads(lines[index])
    edit(obj)
    lines[index] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n")


def _one_error_line(result: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr


def test_a_second_evaluation_of_a_log_in_use_is_refused(tmp_path: Path) -> None:
    bundle = _finished(tmp_path)
    log = (tmp_path / LOG).read_bytes()
    with open(tmp_path / LOG, "rb") as held:  # another evaluate holds the log
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        for extra in (["--resume"], []):
            refused = _run(tmp_path, SCRIPTED, *extra)
            assert refused.returncode == 2 and "is in use by another sapo-gym evaluate" in _one_error_line(refused)
    assert (tmp_path / LOG).read_bytes() == log and (tmp_path / "b.json").read_bytes() == bundle
    assert not (tmp_path / f"{LOG}.prev").exists()


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda o: o["record"].update(success=True), "does not replay in the env: success is False, log says True"),
        (lambda o: o.update(run_id="0000000000000000"), "the line is from another run"),
        (lambda o: o.update(slot=(o["slot"] + 1) % 16), "but this run has the task"),
        (lambda o: o.pop("record"), "not an episode line"),
    ],
)
def test_resume_refuses_a_log_whose_lines_are_not_this_runs_episodes(tmp_path: Path, edit: Any, message: str) -> None:
    bundle = _finished(tmp_path)
    _edit(tmp_path / LOG, lambda o: o["record"]["success"] is False, edit)
    refused = _run(tmp_path, SCRIPTED, "--resume")
    assert refused.returncode == 2 and message in _one_error_line(refused) and str(LOG) in refused.stderr
    assert (tmp_path / "b.json").read_bytes() == bundle


def test_resume_refuses_a_bad_timestamp(tmp_path: Path) -> None:
    _finished(tmp_path)
    lines = (tmp_path / LOG).read_text().splitlines()
    head = json.loads(lines[0])
    head["created"] = "last tuesday"
    (tmp_path / LOG).write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    refused = _run(tmp_path, SCRIPTED, "--resume")
    assert refused.returncode == 2 and "not a UTC time" in _one_error_line(refused)


def test_huge_numbers_from_the_agent_leave_a_bundle_and_a_cost(tmp_path: Path) -> None:
    done = _run(tmp_path, f"{HOSTILE}:HugeNumbersAgent", "--price-prompt", "0.15", "--json", "j.json")
    assert done.returncode == 0, done.stderr
    assert "recorded as unknown" in done.stderr and "estimated cost $0.0000" in done.stdout
    check_bundle(json.loads((tmp_path / "b.json").read_text()))
    again = _run(tmp_path, f"{HOSTILE}:HugeNumbersAgent", "--price-prompt", "0.15", "--resume")
    assert again.returncode == 0, again.stderr


def test_replies_past_the_action_bound_are_cut_before_they_are_logged(tmp_path: Path) -> None:
    done = _run(tmp_path, f"{HOSTILE}:LongOutputAgent")
    assert done.returncode == 0, done.stderr
    bundle = json.loads((tmp_path / "b.json").read_text())
    check_bundle(bundle)  # a board admits it
    logged = [
        t["output"]
        for line in (tmp_path / LOG).read_text().splitlines()[1:]
        for t in json.loads(line)["record"]["turns"]
    ]
    assert sorted(t["output"] for e in bundle["episodes"] for t in e["turns"]) == sorted(logged) and {
        len(o) for o in logged
    } == {65536}


@pytest.mark.parametrize("process", ["auto", "in-process"])
def test_an_answer_that_cannot_be_encoded_fails_cleanly(tmp_path: Path, process: str) -> None:
    failed = _run(tmp_path, f"{HOSTILE}:SurrogateAgent", "--agent-process", process)
    assert failed.returncode == 1
    assert "cannot be sent to the harness" in failed.stderr or "cannot be encoded as UTF-8" in failed.stderr
    assert "--resume" in _one_error_line(failed)


@pytest.mark.parametrize("agent", [SCRIPTED, "tests.support.scripted_agent:ScriptedBatchAgent"])
def test_a_log_write_that_fails_ends_the_run_with_the_resume_hint(tmp_path: Path, agent: str) -> None:
    failed = _run(tmp_path, agent, file_limit=6000)
    stderr = _one_error_line(failed)
    assert failed.returncode == 1 and f"cannot write to the episodes log {LOG}" in stderr and "--resume" in stderr
    data = (tmp_path / LOG).read_bytes()
    assert data.endswith(b"\n") and all(json.loads(line) for line in data.splitlines())  # no torn line
    finished = _run(tmp_path, agent, "--resume")
    assert finished.returncode == 0, finished.stderr
    assert json.loads((tmp_path / "b.json").read_text())["aggregates"]["all"]["episodes"] == 16


def test_a_bundle_write_that_fails_keeps_the_previous_bundle(tmp_path: Path) -> None:
    bundle = _finished(tmp_path)
    failed = _run(tmp_path, SCRIPTED, "--resume", file_limit=len(bundle) // 2)
    stderr = _one_error_line(failed)
    assert failed.returncode == 1 and "cannot write the bundle b.json" in stderr and "--resume" in stderr
    assert (tmp_path / "b.json").read_bytes() == bundle
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json", LOG]


def test_a_dangling_symlink_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "target.jsonl"
    target.parent.mkdir()
    (tmp_path / LOG).symlink_to(target)
    refused = _run(tmp_path, SCRIPTED)
    assert refused.returncode == 2 and "is a symbolic link" in _one_error_line(refused)
    assert not target.exists()
