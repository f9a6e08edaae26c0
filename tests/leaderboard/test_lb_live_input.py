"""Live endpoints parse their bodies as strictly as a bundle and bound them by the env's action space."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leaderboard.server.live_api import LIVE_BODY_LIMIT
from sapo_gym.core import ACTION_MAX_LENGTH

START = {"env_id": "sapo/Vault-v0", "split": "test", "agent": {"name": "x"}}


@pytest.fixture
def live(tmp_path: Path):  # type: ignore[no-untyped-def]
    from leaderboard.server.app import ServerConfig, create_app
    from tests.support.leaderboard import VAULT

    app = create_app(ServerConfig(db_url=f"sqlite:///{tmp_path / 'lb.db'}", boards=(VAULT,), verify=False))
    store = app.extensions["sapo_gym"]["store"]
    yield (
        app.test_client(),
        {"Authorization": f"Bearer {store.create_token('a')[1]}", "Content-Type": "application/json"},
    )
    store.engine.dispose()


@pytest.mark.parametrize("number", ["NaN", "-Infinity", "Infinity", "1e999", "9" * 65])
def test_a_live_start_refuses_non_finite_and_huge_numbers(live, number: str) -> None:  # type: ignore[no-untyped-def]
    client, auth = live
    body = json.dumps({**START, "seeds": 1}).replace('"seeds": 1', f'"seeds": {number}')
    refused = client.post("/api/v1/live/runs", data=body, headers=auth)
    assert refused.status_code == 400 and "invalid number" in refused.json["message"], refused.json
    assert client.post("/api/v1/live/runs", json=START, headers=auth).status_code == 201  # nothing was opened


@pytest.mark.parametrize("body", [b"[1]", b"null", b'"x"', b"[" * 100_000, b'{"a": "\\ud800"}', b"\xff"])
def test_a_live_body_that_is_no_strict_json_object_is_400(live, body: bytes) -> None:  # type: ignore[no-untyped-def]
    client, auth = live
    assert client.post("/api/v1/live/runs", data=body, headers=auth).status_code == 400


def test_a_step_longer_than_the_action_space_is_refused_and_costs_no_turn(live) -> None:  # type: ignore[no-untyped-def]
    client, auth = live
    run_id = client.post("/api/v1/live/runs", json=START, headers=auth).json["run_id"]
    assert client.post(f"/api/v1/live/runs/{run_id}/reset", headers=auth).status_code == 200
    step = f"/api/v1/live/runs/{run_id}/step"
    too_long = client.post(step, json={"output": "a" * (ACTION_MAX_LENGTH + 1), "turn": 0}, headers=auth)
    assert too_long.status_code == 413 and str(ACTION_MAX_LENGTH) in too_long.json["message"]
    # the longest output, each character the longest JSON escape (a non-BMP character as a surrogate pair), fits
    longest = json.dumps({"output": "\U0001f600" * (ACTION_MAX_LENGTH // 2), "turn": 0})
    assert len(longest) < LIVE_BODY_LIMIT
    answer = client.post(step, data=longest, headers=auth)
    assert answer.status_code == 200 and answer.json["turn"] == 0, answer.json


def test_a_live_body_past_the_limit_is_413_before_it_is_parsed(live) -> None:  # type: ignore[no-untyped-def]
    client, auth = live
    body = json.dumps({**START, "pad": "x" * LIVE_BODY_LIMIT})
    assert client.post("/api/v1/live/runs", data=body, headers=auth).status_code == 413


def test_a_run_records_at_most_its_output_budget_and_a_step_past_it_costs_no_turn(tmp_path: Path) -> None:
    """A run's memory is bounded: its outputs in all may not pass ``--max-upload-mb`` (here 1 MiB), the largest
    bundle its submitter could upload instead; the server's bound is that times its open runs."""
    from leaderboard.server.app import ServerConfig, create_app
    from tests.support.leaderboard import VAULT

    app = create_app(
        ServerConfig(db_url=f"sqlite:///{tmp_path / 'lb.db'}", boards=(VAULT,), verify=False, max_upload_mb=1)
    )
    store = app.extensions["sapo_gym"]["store"]
    client, auth = app.test_client(), {"Authorization": f"Bearer {store.create_token('a')[1]}"}
    started = client.post("/api/v1/live/runs", json={**START, "seeds": 4}, headers=auth).json
    assert started["max_output_bytes"] == 1 << 20
    run = f"/api/v1/live/runs/{started['run_id']}"
    output = "\u00e9" * (ACTION_MAX_LENGTH // 2)  # 65,536 UTF-8 bytes, an unparseable output: a no-op turn each
    recorded, refused = 0, None
    for _ in range(4 * 16 * 4 + 1):  # bounded: more turns than the run can play (4 seeds x 16 tasks x horizon 4)
        status = client.get(run, headers=auth).json
        if not status["in_progress"]:
            assert client.post(f"{run}/reset", headers=auth).status_code == 200
            status = client.get(run, headers=auth).json
        answer = client.post(f"{run}/step", json={"output": output}, headers=auth)
        if answer.status_code == 413:
            refused = answer.json
            break
        assert answer.status_code == 200, answer.json
        recorded += 1
    assert refused is not None and "limit of 1048576" in refused["message"], refused
    assert recorded == (1 << 20) // len(output.encode())  # 16 outputs of 64 KiB fill 1 MiB exactly
    after = client.get(run, headers=auth).json
    assert after["output_bytes"] == recorded * len(output.encode()) and after["in_progress"] == status["in_progress"]
    short = client.post(f"{run}/step", json={"output": "<think>x</think><action>press red</action>"}, headers=auth)
    assert short.status_code == 413  # the budget is spent: not even a short output fits now
    store.engine.dispose()
