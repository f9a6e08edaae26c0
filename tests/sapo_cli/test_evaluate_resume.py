"""``sapo-gym evaluate`` killed (SIGKILL at seeded points, Ctrl-C) and resumed ends with the bundle and summary of
an uninterrupted run: byte-for-byte for the bundle, and for ``--json`` but the measured latencies."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
POOL_AGENT = "tests.support.scripted_agent:ScriptedAgent"
BATCH_AGENT = "tests.support.scripted_agent:ScriptedBatchAgent"


def _argv(agent: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "sapo_cli",
        "evaluate",
        "--env",
        "sapo/Vault-v0",
        "--split",
        "test",
        "--seeds",
        "0,1",
        "--agent",
        agent,
        "--concurrency",
        "3",
        "--out",
        "b.json",
        "--json",
        "j.json",
        *extra,
    ]


def _env(delay: float, hold_at: str = "") -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SCRIPTED_DELAY": str(delay),
        "SOURCE_DATE_EPOCH": "1767225600",
        "OMP_NUM_THREADS": "1",
        "SCRIPTED_HOLD_AT": hold_at,
    }


def _run(cwd: Path, agent: str, *extra: str, delay: float = 0.0) -> subprocess.CompletedProcess:
    return subprocess.run(_argv(agent, *extra), cwd=cwd, env=_env(delay), capture_output=True, text=True, timeout=300)


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _default_sigint() -> None:
    """In the child: Ctrl-C's default action. A test run started in the background (``make test &``, nohup) ignores
    SIGINT, its children inherit that, and Python then installs no KeyboardInterrupt handler: the Ctrl-C test saw
    the run play to its end and exit 0 (twice in CI runs started that way)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_and_stop(cwd: Path, agent: str, lines: int, sig: int, resume: bool) -> subprocess.Popen:
    """Start the evaluation (slowed down), wait until its log holds ``lines`` lines (header included), send ``sig``.
    The agent holds every turn from then on (``SCRIPTED_HOLD_AT``): the signal reaches a run still playing, however
    late this process gets to send it (CI once saw all 32 episodes end before a Ctrl-C sent after the 5th)."""
    log = cwd / "b.json.episodes.jsonl"
    proc = subprocess.Popen(
        _argv(agent, *(["--resume"] if resume else [])),
        cwd=cwd,
        env=_env(0.03, f"{log}:{lines}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    deadline = time.monotonic() + 120
    while proc.poll() is None and _lines(log) < lines and time.monotonic() < deadline:
        time.sleep(0.005)
    if proc.poll() is None:
        proc.send_signal(sig)
    proc.wait(timeout=60)
    return proc


def _without_latency(path: Path) -> dict:
    data = json.loads(path.read_text())
    for episode in data["episodes"]:
        for turn in episode["turns"]:
            assert turn.pop("latency_s") is not None
    for key in ("latency_s_total", "latency_s_mean"):
        data["usage"].pop(key)
    return data


def _reference(tmp_path: Path, agent: str) -> Path:
    ref = tmp_path / "reference"
    ref.mkdir()
    done = _run(ref, agent)
    assert done.returncode == 0, done.stderr
    return ref


def _assert_same(ref: Path, cut: Path) -> None:
    assert (cut / "b.json").read_bytes() == (ref / "b.json").read_bytes()
    assert _without_latency(cut / "j.json") == _without_latency(ref / "j.json")
    assert (cut / "b.json.episodes.jsonl").read_bytes().endswith(b"\n")


def _cut(tmp_path: Path) -> Path:
    cut = tmp_path / "cut"
    cut.mkdir()
    return cut


def _resume_matches(ref: Path, cut: Path, agent: str) -> None:
    """Resume the run in ``cut`` to its end: the same outputs as the uninterrupted run in ``ref``."""
    final = _run(cut, agent, "--resume")
    assert final.returncode == 0, final.stderr
    _assert_same(ref, cut)


@pytest.mark.slow
def test_sigkill_at_seeded_points_then_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    ref = _reference(tmp_path, POOL_AGENT)
    bundle = json.loads((ref / "b.json").read_text())
    assert 0 < bundle["aggregates"]["all"]["success"] < 1  # the scripted agent wins some, loses some
    assert bundle["created"] == "2026-01-01T00:00:00+00:00" and "--resume" not in bundle["evaluation"]["command"]
    cut = _cut(tmp_path)
    rng = random.Random(26)
    points = sorted(rng.sample(range(2, 33), 4))  # 32 episodes + the header: kill after 1 .. 31 episodes
    for n, lines in enumerate(points):
        proc = _start_and_stop(cut, POOL_AGENT, lines, signal.SIGKILL, resume=n > 0)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        assert not (cut / "b.json").exists()
    with (cut / "b.json.episodes.jsonl").open("ab") as fh:  # a kill in the middle of a write leaves a torn line
        fh.write(b'{"seed": 1, "slot": 15, "task_id": "vault-te')
    _resume_matches(ref, cut, POOL_AGENT)
    records = [json.loads(line) for line in (cut / "b.json.episodes.jsonl").read_text().splitlines()[1:]]
    assert len({(r["seed"], r["slot"]) for r in records}) == len(records) == 32  # nothing played twice


@pytest.mark.slow
def test_ctrl_c_leaves_a_consistent_log_and_exits_130_then_resume_finishes(tmp_path: Path) -> None:
    ref = _reference(tmp_path, POOL_AGENT)
    cut = _cut(tmp_path)
    proc = _start_and_stop(cut, POOL_AGENT, 6, signal.SIGINT, resume=False)
    stderr = proc.stderr.read()
    assert proc.returncode == 130, stderr
    assert "--resume" in stderr and "episodes are saved in" in stderr
    data = (cut / "b.json.episodes.jsonl").read_bytes()
    assert data.endswith(b"\n") and all(json.loads(line) for line in data.splitlines())
    _resume_matches(ref, cut, POOL_AGENT)


@pytest.mark.slow
def test_a_batch_agent_killed_in_lockstep_resumes_to_the_same_bundle(tmp_path: Path) -> None:
    ref = _reference(tmp_path, BATCH_AGENT)
    cut = _cut(tmp_path)
    proc = _start_and_stop(cut, BATCH_AGENT, 9, signal.SIGKILL, resume=False)
    assert proc.returncode == -signal.SIGKILL
    _resume_matches(ref, cut, BATCH_AGENT)


def test_resume_refuses_a_log_of_another_run_naming_the_difference(tmp_path: Path) -> None:
    assert _run(tmp_path, POOL_AGENT, "--limit", "2").returncode == 0
    other = _run(tmp_path, POOL_AGENT, "--limit", "3", "--resume")
    assert other.returncode == 2
    assert "log of another run" in other.stderr and "tasks: log" in other.stderr
    again = _run(
        tmp_path, POOL_AGENT, "--limit", "2", "--resume"
    )  # all done: nothing is played, the outputs are rewritten
    assert again.returncode == 0 and json.loads((tmp_path / "b.json").read_text())["aggregates"]["all"]["episodes"] == 4
