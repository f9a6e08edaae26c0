"""The verifiers adapter run by verifiers' own evaluation: ``vf-eval sapo-gym-verifiers`` in the venv that
scripts/setup_verifiers.sh builds (verifiers 0.4.0 cannot share the project's venv), its client pointed at a
scripted expert on 127.0.0.1 (tests.support.fake_openai). Each episode is in-process play of the same task and
seed; vf-eval's traces.jsonl becomes a bundle the board admits and replay-verifies. Skips without that venv."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from leaderboard.boards import BoardRegistry
from leaderboard.checks import admit
from leaderboard.replay import replay_bundle
from sapo_cli.bundle import bundle_from_payloads
from sapo_gym.bundle import AgentInfo
from sapo_gym.integrations.episodes import PAYLOAD_KEY, read_payloads, task_rows
from tests.support.fake_openai import FakeOpenAI
from tests.support.integrations import expert_script, play, scripted_model

ROOT = Path(__file__).resolve().parents[3]
VENV = Path(os.environ.get("VERIFIERS_VENV") or Path.home() / ".cache/sapo_gym/verifiers-venv")
MODEL = "scripted-expert"


def _vf_eval(
    out: Path, url: str, env_id: str, seeds: Sequence[int], limit: int | None, split: str | None = None
) -> Path:
    """Run vf-eval on the first ``limit`` tasks of the split per seed (all: None); the traces.jsonl it wrote."""
    exe = VENV / "bin" / "vf-eval"
    if not (VENV / ".sapo_gym_verifiers_ok").exists():  # the stamp setup_verifiers.sh writes once the venv is whole
        pytest.skip(f"no verifiers venv at {VENV} (build it with: bash scripts/setup_verifiers.sh; make setup does)")
    cmd = [
        str(exe),
        "sapo-gym-verifiers",
        "--env.taskset.env",
        env_id,
        "--env.taskset.seeds",
        *map(str, seeds),
        "--model",
        MODEL,
        "--client.base-url",
        url,
        "--no-push",
        "-o",
        str(out),
    ]
    cmd += ["--env.taskset.split", split] if split else []
    cmd += ["--env.taskset.limit", str(limit)] if limit is not None else []
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PRIME_API_KEY": ""}
    done = subprocess.run(cmd, cwd=out.parent, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    (traces,) = out.glob("*/traces.jsonl")
    return traces


def _traces(path: Path) -> list[dict[str, Any]]:
    episodes = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert all(e["ok"] and len(e["traces"]) == 1 for e in episodes), [e["errors"] for e in episodes]
    return [e["traces"][0] for e in episodes]


@pytest.mark.parametrize(
    "env_id,split,seeds,tasks",
    [("sapo/ALFWorld-Mini-v0", "eval_out_of_distribution", (0, 1), 3), ("sapo/WebShop-Mini-v0", "test", (0,), 2)],
)
def test_vf_eval_episodes_are_in_process_play(tmp_path, env_id, split, seeds, tasks):
    rows = [row for row, _ in task_rows(env_id, split, seeds, limit=tasks)]
    with FakeOpenAI(reply=scripted_model(expert_script(env_id, split, seeds, tasks))) as server:
        traces = _traces(_vf_eval(tmp_path / "out", server.url, env_id, seeds, tasks, split))
    assert sorted((t["task"]["data"]["info"]["seed"], t["task"]["data"]["info"]["task_id"]) for t in traces) == sorted(
        (r["seed"], r["task_id"]) for r in rows
    )
    for trace in traces:
        row = trace["task"]["data"]["info"]
        assert row in rows  # the task row travels as the task's info: protocol, split, horizon, spec hash
        messages = [n["message"] for n in trace["nodes"]]
        replies = [m["content"] for m in messages if m["role"] == "assistant"]
        seen = play(env_id, split, row["task_id"], row["seed"], replies)
        assert [m["content"] for m in messages if m["role"] == "user"] == seen.prompts, (row["task_id"], row["seed"])
        assert seen.success and seen.done and trace["metrics"]["steps"] == seen.turns == len(replies)
        assert trace["metrics"]["success"] == 1.0 and trace["rewards"]["return"]["score"] == sum(seen.rewards)
        payload = trace["info"][PAYLOAD_KEY]
        assert payload["complete"] and payload["row"] == row
        assert [t["observation"] for t in payload["record"]["turns"]] == seen.raw_observations
        assert [t["reward"] for t in payload["record"]["turns"]] == seen.rewards
    # the harness sends each turn's prompt alone, as one user message (the prompt carries its history window)
    assert len(server.requests) == sum(t["metrics"]["steps"] for t in traces)
    assert all(
        [m["role"] for m in r["body"]["messages"]] == ["user"] and r["body"]["model"] == MODEL for r in server.requests
    )


def test_vf_eval_traces_are_a_bundle_the_board_admits_and_replays(tmp_path):
    with FakeOpenAI(reply=scripted_model(expert_script("sapo/Vault-v0", "test", (0,), 16))) as server:
        traces = _vf_eval(tmp_path / "out", server.url, "sapo/Vault-v0", (0,), None)  # the default split: test
    bundle = bundle_from_payloads(read_payloads(traces), AgentInfo("scripted expert", spec="verifiers:" + MODEL))
    board = admit(bundle, BoardRegistry(["sapo/Vault-v0:test"]))
    assert board.key == "sapo/Vault-v0:test" and len(bundle["episodes"]) == 16
    assert bundle["aggregates"]["all"]["success"] == 1.0
    result = replay_bundle(bundle)
    assert result.verified and result.episodes == 16, result.message
