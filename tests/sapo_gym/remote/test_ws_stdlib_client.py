"""The stdlib-only WebSocket client of docs/remote.md (``docs/examples/ws_client_stdlib.py``), run as a user runs
it against ``sapo-gym env serve`` on 127.0.0.1: its expert episode equals the same episode played in process
(prompt, reward, flags, task, admissible actions, the oracle's actions), and its state frame the env's."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys

import gymnasium as gym
import pytest

pytest.importorskip("openenv.core.env_server")

import sapo_gym  # noqa: E402,F401  (registers the ids)
from tests.support.remote import ROOT, served  # noqa: E402

CLIENT = ROOT / "docs" / "examples" / "ws_client_stdlib.py"
FIELDS = (
    "prompt",
    "terminated",
    "truncated",
    "task_id",
    "admissible_actions",
    "action_mask",
    "step",
    "won",
    "score",
    "expert_action",
)


def local_episode(env_id: str, seed: int, task_index: int) -> tuple[list[dict], str]:
    """The client's episode in process: one record per reset and step, with the fields the client's frames carry."""
    env = gym.make(env_id)
    try:
        obs, info = env.reset(seed=seed, options={"task_index": task_index})
        records, reward, terminated, truncated = [], None, False, False
        while True:
            records.append(
                {
                    "prompt": obs,
                    "reward": reward,
                    "done": terminated or truncated,
                    "terminated": terminated,
                    "truncated": truncated,
                    **{k: info.get(k) for k in FIELDS[3:]},
                    "action_mask": [bool(x) for x in info["action_mask"]],
                }
            )
            if terminated or truncated:
                return records, env.unwrapped.spec_hash()
            action = f"<think>the expert says so</think><action>{info['expert_action']}</action>"
            obs, reward, terminated, truncated, info = env.step(action)
    finally:
        env.close()


def wire_record(frame: dict) -> dict:
    assert frame["type"] == "observation", frame
    obs = frame["data"]["observation"]
    return {"reward": frame["data"]["reward"], "done": frame["data"]["done"], **{k: obs[k] for k in FIELDS}}


@pytest.mark.timeout(180)
@pytest.mark.parametrize("env_id, seed, task_index", [("sapo/Vault-v0", 0, 3), ("sapo/ALFWorld-Mini-v0", 7, 2)])
def test_the_stdlib_client_plays_the_in_process_episode(env_id: str, seed: int, task_index: int) -> None:
    expected, spec_hash = local_episode(env_id, seed, task_index)
    assert len(expected) > 2 and expected[-1]["won"]  # a whole expert episode, not a one-step one
    with served(env_id) as url:
        run = subprocess.run(
            [sys.executable, str(CLIENT), url, "--seed", str(seed), "--task-index", str(task_index)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert run.returncode == 0, run.stderr[-2000:]
    frames = [json.loads(line) for line in run.stdout.splitlines()]
    assert [wire_record(f) for f in frames[:-1]] == expected
    state = frames[-1]
    assert state["type"] == "state" and state["data"]["env_id"] == env_id
    assert state["data"]["step_count"] == len(expected) - 1 and state["data"]["spec_hash"] == spec_hash


@pytest.mark.timeout(120)
def test_the_stdlib_client_gets_the_documented_error_frames_and_the_session_lives_on() -> None:
    WebSocket = runpy.run_path(str(CLIENT))["WebSocket"]  # noqa: N806  (the client file's class)
    with served("sapo/Vault-v0") as url:
        ws = WebSocket(url)
        try:
            wrong = ws.call({"type": "step", "data": {"action": {"text": "look"}}})  # the HTTP body shape
            assert wrong["type"] == "error" and wrong["data"]["code"] == "VALIDATION_ERROR"
            assert [e["loc"] for e in wrong["data"]["errors"]] == [["text"], ["action"]]
            flat = ws.call({"type": "reset", "seed": 0})  # arguments outside "data"
            assert flat["data"]["code"] == "VALIDATION_ERROR" and flat["data"]["errors"][0]["loc"] == ["seed"]
            early = ws.call({"type": "step", "data": {"text": "<action>look</action>"}})
            assert early["data"] == {"message": "call reset before step", "code": "EXECUTION_ERROR"}
            assert ws.call({"type": "teleport"})["data"]["code"] == "UNKNOWN_TYPE"
            first = ws.call({"type": "reset", "data": {"seed": 0, "options": {"task_index": 3}}})
            assert first["type"] == "observation" and first["data"]["reward"] is None
            assert first["data"]["observation"]["task_id"] == "vault-train-003"
        finally:
            ws.close()


def test_the_docs_quote_the_client_file() -> None:
    """docs/remote.md's excerpt of the client is the file's text, so what the page shows is what this test runs."""
    docs = (ROOT / "docs" / "remote.md").read_text()
    marker = "Its episode, from `docs/examples/ws_client_stdlib.py`:\n\n```python\n"
    assert marker in docs
    excerpt = docs.split(marker, 1)[1].split("```", 1)[0]
    assert len(excerpt.splitlines()) >= 10 and excerpt in CLIENT.read_text()
