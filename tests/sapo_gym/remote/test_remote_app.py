"""The server app in process (Starlette's TestClient): WebSocket error frames, HTTP status codes, env
errors confined to their session, capacity, idle expiry, OpenEnv's schema and metadata routes."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("openenv.core.env_server")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402
from starlette.websockets import WebSocketDisconnect  # noqa: E402

import sapo_gym  # noqa: E402,F401
from sapo_gym.remote.server import ServeConfig, create_app  # noqa: E402
from sapo_gym.remote.websocket import IDLE_CLOSE_CODE  # noqa: E402

LOOK = {"text": "<think>t</think><action>look</action>"}


@pytest.fixture()
def client() -> TestClient:
    with TestClient(create_app(ServeConfig("sapo/Vault-v0", max_sessions=2, idle_timeout_s=0))) as c:
        yield c


def ws_call(ws, message: dict) -> dict:  # type: ignore[no-untyped-def]
    ws.send_json(message)
    return ws.receive_json()


def test_websocket_bad_frames_are_errors_and_the_session_lives_on(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        ws.send_text("{not json")
        assert ws.receive_json()["data"]["code"] == "INVALID_JSON"
        assert ws_call(ws, {"type": "step", "data": LOOK})["data"]["message"] == "call reset before step"
        assert ws_call(ws, {"type": "step", "data": {"text": 5}})["data"]["code"] == "VALIDATION_ERROR"
        assert (
            ws_call(ws, {"type": "reset", "data": {"options": {"task_index": "0"}}})["data"]["code"]
            == "VALIDATION_ERROR"
        )
        unknown = ws_call(ws, {"type": "reset", "data": {"options": {"task_id": "nope"}}})["data"]
        assert unknown["code"] == "EXECUTION_ERROR" and "unknown task_id 'nope'" in unknown["message"]
        assert "unknown reset argument" in ws_call(ws, {"type": "reset", "data": {"colour": "red"}})["data"]["message"]
        assert ws_call(ws, {"type": "teleport"})["data"]["code"] == "UNKNOWN_TYPE"
        first = ws_call(ws, {"type": "reset", "data": {"seed": 1, "options": {"task_index": 2}}})
        assert first["type"] == "observation" and first["data"]["observation"]["step"] == 0
        step = ws_call(ws, {"type": "step", "data": LOOK})["data"]
        assert step["observation"]["is_action_admissible"] is True and step["done"] is False
        state = ws_call(ws, {"type": "state"})["data"]
        assert state["env_id"] == "sapo/Vault-v0" and state["step_count"] == 1 and len(state["task_ids"]) == 16


def open_session(client: TestClient) -> str:
    response = client.post("/sessions")
    assert response.status_code == 201, response.text
    return response.json()["session_id"]


def test_an_env_exception_is_an_error_for_that_session_only(client: TestClient) -> None:
    a, b = open_session(client), open_session(client)
    for sid in (a, b):
        assert client.post(f"/sessions/{sid}/reset", json={"seed": 0}).status_code == 200
    env_a = client.app.state.env_server._sessions[a]

    def broken_step(text: str):  # type: ignore[no-untyped-def]
        raise RuntimeError("the backend fell over")

    env_a._env.step = broken_step
    failed = client.post(f"/sessions/{a}/step", json={"action": LOOK})
    assert failed.status_code == 500 and "the backend fell over" in failed.json()["message"]
    assert client.post(f"/sessions/{b}/step", json={"action": LOOK}).status_code == 200
    assert client.get("/sessions").json()["active_sessions"] == 2  # the failed session stays open
    assert client.post(f"/sessions/{a}/reset", json={"seed": 0}).status_code == 200  # and can start over


def test_capacity_is_shared_by_http_and_websocket_sessions(client: TestClient) -> None:
    open_session(client)
    with client.websocket_connect("/ws") as ws:
        assert ws_call(ws, {"type": "reset", "data": {}})["type"] == "observation"
        full = client.post("/sessions")
        assert full.status_code == 503 and full.json()["error"] == "capacity"
        with client.websocket_connect("/ws") as refused:
            assert refused.receive_json()["data"]["code"] == "CAPACITY_REACHED"
    assert client.get("/sessions").json() == {"active_sessions": 1, "max_sessions": 2}


def test_http_session_lifecycle_and_state(client: TestClient) -> None:
    sid = open_session(client)
    assert client.get(f"/sessions/{sid}/state").json()["episode_id"] is None
    reset = client.post(f"/sessions/{sid}/reset", json={"seed": 2, "episode_id": "ep-1", "options": {"task_index": 3}})
    body = reset.json()
    assert reset.status_code == 200 and body["reward"] is None and body["done"] is False
    assert body["observation"]["info_keys"][:3] == ["raw_observation", "task", "task_id"]
    state = client.get(f"/sessions/{sid}/state").json()
    assert state["episode_id"] == "ep-1" and state["task_id"] == body["observation"]["task_id"]
    assert client.delete(f"/sessions/{sid}").status_code == 200
    assert client.get(f"/sessions/{sid}/state").status_code == 404
    assert client.delete(f"/sessions/{sid}").status_code == 404


def test_public_only_leaves_the_privileged_keys_out() -> None:
    with TestClient(create_app(ServeConfig("sapo/ALFWorld-v0", {"data_dir": "embedded"}, public_only=True))) as c:
        sid = open_session(c)
        obs = c.post(f"/sessions/{sid}/reset", json={"seed": 0}).json()["observation"]
        assert obs["expert_action"] is None and "expert_action" not in obs["info_keys"]
        assert "pddl_params" not in obs["extra"] and obs["task"]


def test_openenv_schema_metadata_and_health(client: TestClient) -> None:
    schema = client.get("/schema").json()
    assert "text" in schema["action"]["properties"] and "admissible_actions" in schema["observation"]["properties"]
    assert "spec_hash" in schema["state"]["properties"]
    assert client.get("/metadata").json()["name"] == "sapo/Vault-v0"
    assert client.get("/health").json()["status"] == "healthy"
    assert client.post("/reset").status_code in (404, 405)  # OpenEnv's stateless routes are off (production mode)


def test_a_bad_env_id_or_argument_fails_at_start() -> None:
    with pytest.raises(TypeError, match="valid choices"):
        create_app(ServeConfig("sapo/Vault-v0", {"colour": "red"}))
    with pytest.raises(ValueError, match="max_sessions"):
        ServeConfig("sapo/Vault-v0", max_sessions=0)


@pytest.mark.timeout(60)
def test_idle_sessions_expire_and_an_idle_websocket_is_closed() -> None:
    timeout_s = 0.2
    with TestClient(create_app(ServeConfig("sapo/Vault-v0", idle_timeout_s=timeout_s))) as c:
        sid = open_session(c)
        with c.websocket_connect("/ws") as ws:
            assert ws_call(ws, {"type": "reset", "data": {}})["type"] == "observation"
            with pytest.raises(
                WebSocketDisconnect
            ) as closed:  # the server closes the idle socket (test timeout bounds it)
                ws.receive_json()
            assert closed.value.code == IDLE_CLOSE_CODE and "idle" in closed.value.reason
            # expiry comes within timeout + one check interval (timeout / 4); wait up to 25x that, bounded
            deadline = time.monotonic() + 25 * 1.25 * timeout_s
            while c.get("/sessions").json()["active_sessions"] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert c.get("/sessions").json()["active_sessions"] == 0
        assert c.post(f"/sessions/{sid}/reset", json={}).status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        '{"seed": ' + "9" * 5000 + "}",  # past Python's own int() digit limit
        '{"seed": ' + "9" * 65 + "}",  # past the server's bound on integer literals
        "[" * 100_000 + "]" * 100_000,  # nesting past the parser's recursion limit
        '{"seed": NaN}',
        '{"seed": Infinity}',  # not JSON
    ],
)
def test_a_reset_body_the_parser_cannot_take_is_400_and_the_session_lives_on(client: TestClient, body: str) -> None:
    sid = open_session(client)
    answer = client.post(f"/sessions/{sid}/reset", content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400 and answer.json()["error"] == "not_json", answer.text[:300]
    assert client.post(f"/sessions/{sid}/reset", json={"seed": 2}).status_code == 200


def test_a_step_with_deeply_nested_metadata_is_400(client: TestClient) -> None:
    sid = open_session(client)
    client.post(f"/sessions/{sid}/reset", json={"seed": 0})
    deep = '{"action": {"text": "x", "metadata": ' + '{"a": ' * 10_000 + "1" + "}" * 10_000 + "}}"
    answer = client.post(f"/sessions/{sid}/step", content=deep, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text[:300]
    assert client.post(f"/sessions/{sid}/step", json={"action": LOOK}).status_code == 200
