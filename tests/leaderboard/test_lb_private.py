"""Private boards: live runs on splits generated from the server's secret seed, never published."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from leaderboard import private
from tests.support.leaderboard import VAULT

SEED = "6b" * 32
WEBSHOP = "sapo/WebShop-v0"
MINI = "sapo/ALFWorld-Mini-v0"
TASKS = 3


class Recorder:
    """The app's test client, keeping every response body (to grep them all for the seed)."""

    def __init__(self, client: Any):
        self.client, self.bodies = client, []

    def __call__(self, method: str, url: str, **kw: Any) -> Any:
        response = getattr(self.client, method)(url, **kw)
        self.bodies.append((url, response.get_data(as_text=True)))
        return response


@pytest.fixture
def private_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from leaderboard.server.app import ServerConfig, create_app

    monkeypatch.setattr(private, "ACTIVE", None)  # the apps activate the seed; the next test starts without it

    def _make(env_id: str) -> Any:
        return create_app(
            ServerConfig(
                db_url=f"sqlite:///{tmp_path / 'lb.db'}",
                boards=(VAULT,),
                verify=False,
                private_seed=SEED,
                private_envs=(env_id,),
                private_tasks=TASKS,
            )
        )

    apps: list[Any] = []
    yield lambda env_id: apps.append(_make(env_id)) or apps[-1]
    for app in apps:
        app.extensions["sapo_gym"]["store"].engine.dispose()


def test_the_commitment_checks_the_right_seed_only(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from sapo_cli import main

    commitment = private.commitment(SEED)
    assert len(commitment) == 64 and commitment != private.commitment("6c" * 32) and SEED not in commitment
    path = tmp_path / "seed"
    created = private.read_seed_file(path)  # absent: a fresh 256-bit secret, readable by its owner only
    assert (
        len(created) == 64 and stat.S_IMODE(os.stat(path).st_mode) == 0o600 and private.read_seed_file(path) == created
    )
    assert main(["leaderboard", "private", "reveal", "--private-seed-file", str(path)]) == 0
    assert f"seed {created}\ncommitment {private.commitment(created)}" in capsys.readouterr().out
    argv = ["leaderboard", "private", "check", "--env", WEBSHOP, "--tasks", str(TASKS), "--commitment", commitment]
    assert main(argv + ["--seed", SEED]) == 0
    out = capsys.readouterr().out
    env = gym.make(WEBSHOP, prompt=None, split="private", private_seed=SEED, private_goals=TASKS)
    assert "commitment matches the seed" in out and f"spec {env.unwrapped.spec_hash()}" in out, out
    assert main(argv + ["--seed", "6c" * 32]) == 1 and "DOES NOT MATCH" in capsys.readouterr().out


def test_a_failed_replay_is_reported_without_the_text_it_quotes() -> None:
    message = "episode 2 (task goal-00001, seed 7): step 3: observation is 'i need a red phone case'"
    assert (
        private.redact("private", message)
        == "episode 2 (task goal-00001, seed 7): a turn differs (details withheld: the split is private)"
    )
    assert private.redact("test", message) == message and private.redact(
        "private", "all 3 episodes reproduced exactly"
    ).startswith("all 3")


def _play(call: Recorder, auth: dict[str, str], env_id: str) -> tuple[dict[str, Any], list[str]]:
    """A live run by an agent that follows its own copy of the env's expert (the test knows the seed)."""
    run = call(
        "post",
        "/api/v1/live/runs",
        json={"env_id": env_id, "split": "private", "agent": {"name": "twin"}},
        headers=auth,
    )
    assert run.status_code == 201, run.json
    twin = gym.make(env_id, split="private", private_seed=SEED, **{private.COUNT_ARGS[env_id]: TASKS})
    texts, answer = [], {}
    for _ in range(run.json["episodes"]):
        dealt = call("post", f"/api/v1/live/runs/{run.json['run_id']}/reset", headers=auth).json
        obs, info = twin.reset(seed=dealt["seed"], options={"task_id": dealt["task_id"]})
        assert dealt["observation"] == obs and "expert_action" not in dealt["info"]  # the agent sees what it plays
        texts.append(info["task"])
        for turn in range(60):
            output = f"<think>follow the plan</think><action>{info['expert_action']}</action>"
            obs, _, terminated, truncated, info = twin.step(output)
            answer = call(
                "post",
                f"/api/v1/live/runs/{run.json['run_id']}/step",
                json={"output": output, "turn": turn},
                headers=auth,
            ).json
            assert answer["observation"] == obs
            if terminated or truncated:
                break
    twin.close()
    return answer["submission"], texts


def _check_private_board(app: Any, env_id: str) -> None:
    from leaderboard.server.worker import Verifier

    store, call = app.extensions["sapo_gym"]["store"], Recorder(app.test_client())
    auth = {"Authorization": f"Bearer {store.create_token('alice')[1]}"}
    listed = {b["split"]: b for b in call("get", "/api/v1/boards").json["boards"] if b["env_id"] == env_id}
    board = listed["private"]
    assert (
        board["private"]["commitment"] == private.commitment(SEED)
        and board["tasks"] == TASKS
        and board["private"]["live_only"]
    )
    submission, texts = _play(call, auth, env_id)
    assert Verifier(store).drain() == 1
    sid = submission["id"]
    detail = call("get", f"/api/v1/submissions/{sid}").json
    assert detail["status"] == "verified", detail
    assert detail["marks"]["live"] and detail["marks"]["private"] and detail["spec_hash"] == board["spec_hash"]
    # withheld while the split is active: bundles, episodes, comparisons
    for url in (
        f"/api/v1/submissions/{sid}/bundle",
        f"/submission/{sid}/episode/0",
        f"/api/v1/compare?a={sid}&b={sid}",
        f"/compare?a={sid}&b={sid}",
    ):
        response = call("get", url)
        assert response.status_code == 403 and "private" in response.get_data(as_text=True), url
    page = call("get", f"/submission/{sid}").get_data(as_text=True)
    assert "live · private" in page and 'id="episodes-withheld"' in page and "episode-link" not in page
    board_page = call("get", f"/board/{board['spec_hash']}").get_data(as_text=True)
    assert private.commitment(SEED) in board_page and "live · private" in board_page
    for url in ("/", f"/api/v1/submissions?env={env_id}&split=private", "/api/v1/submissions"):
        assert call("get", url).status_code == 200, url
    # a file bundle for it is refused, even one that would verify (the live run's own, as stored)
    bundle = store.bundle_of(store.get(sid))
    bundle["agent"]["name"] = "a file copy"
    refused = call("post", "/api/v1/submissions", json=bundle, headers=auth)
    assert refused.status_code == 403 and "live runs only" in refused.json["message"], refused.json
    for url, body in call.bodies:
        assert SEED not in body, url
        if "/live/" not in url:  # only the agent playing it sees a private task
            assert not any(text in body for text in texts), url


def test_a_live_run_on_the_private_webshop_board_verifies_and_nothing_of_it_is_published(private_app) -> None:  # type: ignore[no-untyped-def]
    _check_private_board(private_app(WEBSHOP), WEBSHOP)


@pytest.mark.slow
def test_a_live_run_on_the_private_alfworld_mini_board_verifies_and_nothing_of_it_is_published(private_app) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("fast_downward")
    _check_private_board(private_app(MINI), MINI)


def test_the_seed_is_in_no_repr_and_a_board_without_it_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from leaderboard.boards import BoardRegistry
    from leaderboard.server.app import ServerConfig

    monkeypatch.setattr(private, "ACTIVE", None)
    assert SEED not in repr(ServerConfig(private_seed=SEED)) and SEED not in repr(private.activate(SEED, [WEBSHOP]))
    monkeypatch.setattr(private, "ACTIVE", None)  # a process without the seed
    registry = BoardRegistry([f"{WEBSHOP}:private"])
    assert len(registry) == 0 and "private seed" in registry.skipped[f"{WEBSHOP}:private"]
    assert json.dumps(registry.skipped).find(SEED) < 0
