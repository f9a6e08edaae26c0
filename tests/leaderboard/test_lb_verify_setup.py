"""A verifier that cannot build a board's env records no verdict: the submission stays pending ("not verifiable
here") until a verifier that can replays it. A failure is always the submission's, never the verifier's set-up."""

from __future__ import annotations

from typing import Any

import pytest

from leaderboard import private, replay
from leaderboard.server import queue
from leaderboard.server.worker import Verifier
from tests.support.leaderboard import body


def _submit(client: Any, auth: dict[str, str], bundle: dict[str, Any]) -> int:
    response = client.post("/api/v1/submissions", data=body(bundle), headers=auth)
    assert response.status_code == 201, response.json
    return response.json["id"]


def _unbuildable(monkeypatch: pytest.MonkeyPatch, why: Exception) -> None:
    def make_env(env_id: str, split: str | None) -> Any:
        raise why

    monkeypatch.setattr(replay, "make_env", make_env)


def _other_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    real = replay.make_env

    def make_env(env_id: str, split: str | None) -> Any:
        env = real(env_id, split)
        env.unwrapped.spec_hash = lambda: "0123456789abcdef"  # another noun rule, task count or private seed here
        return env

    monkeypatch.setattr(replay, "make_env", make_env)


@pytest.mark.parametrize(
    "setup",
    [
        lambda mp: _unbuildable(
            mp, RuntimeError("sapo/Vault-v0:test needs this server's private seed (--private-seed-file)")
        ),
        lambda mp: _unbuildable(mp, ImportError("No module named 'some_backend'")),
        _other_spec,
    ],
    ids=["no-seed", "no-backend", "other-spec-hash"],
)
def test_a_verifier_that_cannot_build_the_env_leaves_the_submission_pending(
    store, client, auth, expert_bundle, monkeypatch, setup
) -> None:  # type: ignore[no-untyped-def]
    sid = _submit(client, auth, expert_bundle)
    with monkeypatch.context() as mp:
        setup(mp)
        outside = Verifier(store)
        assert outside.drain() == 0  # it ends: the board's jobs are left to other verifiers
        detail = client.get(f"/api/v1/submissions/{sid}").json
        assert detail["status"] == "pending" and not detail["verified"], detail
        assert detail["status_message"].startswith(queue.NOT_VERIFIABLE), detail
        assert outside.run_once() is None  # it does not take the job again at once
    assert Verifier(store).drain() == 1  # a verifier that builds the board's env gives the verdict
    assert client.get(f"/api/v1/submissions/{sid}").json["status"] == "verified"


def test_a_forged_bundle_still_fails_on_a_verifier_that_builds_the_env(store, client, auth, expert_bundle) -> None:  # type: ignore[no-untyped-def]
    from tests.support.leaderboard import refresh

    expert_bundle["episodes"][0]["turns"][0]["observation"] = "something else"
    sid = _submit(client, auth, refresh(expert_bundle))
    assert Verifier(store).drain() == 1
    detail = client.get(f"/api/v1/submissions/{sid}").json
    assert detail["status"] == "failed" and "observation" in detail["status_message"]


def test_replay_bundle_says_not_verifiable_instead_of_failed(expert_bundle, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert replay.replay_bundle(expert_bundle).verified
    _other_spec(monkeypatch)
    result = replay.replay_bundle(expert_bundle)
    assert not result.verified and not result.verifiable and "spec hash" in result.message
    _unbuildable(monkeypatch, RuntimeError("needs this server's private seed"))
    result = replay.replay_bundle(expert_bundle)
    assert not result.verified and not result.verifiable


def test_failures_recorded_by_a_verifier_without_the_env_are_reopened(store, client, auth, expert_bundle) -> None:  # type: ignore[no-untyped-def]
    sid = _submit(client, auth, expert_bundle)
    for message in (
        "replay crashed: RuntimeError: sapo/WebShop-v0:private needs this server's private seed (--private-seed-file)",
        "the replay env's spec hash 0123456789abcdef differs from the bundle's",
    ):
        assert queue.claim(store, "old verifier", 60.0) is not None
        assert queue.finish(store, sid, "old verifier", False, message)
        assert store.get(sid).status == "failed"
        store.requeue_stale()
        assert store.get(sid).status == "pending"
    assert Verifier(store).drain() == 1 and store.get(sid).status == "verified"


def test_an_outside_verifier_without_the_private_setup_leaves_live_private_runs_pending(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The reported case: honest live·private runs, an outside verifier without the seed or with another task count."""
    from leaderboard.server.app import ServerConfig, create_app
    from tests.support.private_live import SEED, TASKS, WEBSHOP, play

    monkeypatch.setattr(private, "ACTIVE", None)  # the app activates the seed; the next test starts without it
    app = create_app(
        ServerConfig(
            db_url=f"sqlite:///{tmp_path / 'lb.db'}",
            boards=("sapo/Vault-v0:test",),
            verify=False,
            private_seed=SEED,
            private_envs=(WEBSHOP,),
            private_tasks=TASKS,
        )
    )
    try:
        store = app.extensions["sapo_gym"]["store"]
        auth = {"Authorization": f"Bearer {store.create_token('alice')[1]}"}
        sid = play(app.test_client(), auth, SEED)["id"]
        for outside in (
            lambda: monkeypatch.setattr(private, "ACTIVE", None),
            lambda: private.activate(SEED, [WEBSHOP], TASKS + 1),
        ):
            outside()
            assert Verifier(store).drain() == 0
            row = store.get(sid)
            assert row.status == "pending" and row.status_message.startswith(queue.NOT_VERIFIABLE), row.status_message
            assert SEED not in row.status_message
        private.activate(SEED, [WEBSHOP], TASKS)
        assert Verifier(store).drain() == 1 and store.get(sid).status == "verified"
    finally:
        store.engine.dispose()
