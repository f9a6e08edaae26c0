"""One client cannot hold every session of the env server: ``--max-sessions-per-client``.

In process, each request names its peer in a test header that a wrapper puts into the ASGI scope (as a
real connection's address would be), so several clients share one server and one event loop."""

from __future__ import annotations

import pytest

pytest.importorskip("openenv.core.env_server")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

import sapo_gym  # noqa: E402,F401
from sapo_gym.remote.client_bound import SessionOwners, client_key, default_per_client  # noqa: E402
from sapo_gym.remote.server import ServeConfig, create_app  # noqa: E402

PEER = "x-test-peer"


def with_peers(app):  # type: ignore[no-untyped-def]
    """The app, seeing the ``x-test-peer`` header of each request as its peer address."""

    async def wrapped(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] in ("http", "websocket"):
            peer = dict(scope["headers"]).get(PEER.encode())
            if peer is not None:
                scope = {**scope, "client": (peer.decode(), 40000)}
        await app(scope, receive, send)

    wrapped.state = app.state  # type: ignore[attr-defined]
    return wrapped


def serve(**kwargs: object) -> TestClient:
    config = ServeConfig("sapo/Vault-v0", idle_timeout_s=0, **kwargs)  # type: ignore[arg-type]
    return TestClient(with_peers(create_app(config)))


def post(client: TestClient, peer: str):  # type: ignore[no-untyped-def]
    return client.post("/sessions", headers={PEER: peer})


def test_one_client_cannot_hold_every_session_by_default() -> None:
    # a server reachable from other machines: 8 sessions, 2 per client by default
    with serve(host="0.0.0.0", max_sessions=8) as client:
        a = [post(client, "203.0.113.5") for _ in range(2)]
        assert [r.status_code for r in a] == [201, 201]
        refused = post(client, "203.0.113.5")
        body = refused.json()
        assert refused.status_code == 429 and body["error"] == "client_limit"
        assert "client 203.0.113.5 already holds 2 open sessions" in body["message"]
        assert "--max-sessions-per-client 2" in body["message"] and body["detail"] == {"held": 2, "limit": 2}
        assert post(client, "198.51.100.7").status_code == 201  # another client still gets one
        assert client.get("/sessions").json()["active_sessions"] == 3
        sid = a[0].json()["session_id"]
        assert client.delete(f"/sessions/{sid}", headers={PEER: "203.0.113.5"}).status_code == 200
        assert post(client, "203.0.113.5").status_code == 201  # a closed session frees the client's slot


def test_websocket_sessions_count_and_are_refused_with_a_clear_frame() -> None:
    with serve(max_sessions=6, max_sessions_per_client=2) as client:
        assert post(client, "192.0.2.1").status_code == 201
        with client.websocket_connect("/ws", headers={PEER: "192.0.2.1"}) as ws:
            ws.send_json({"type": "reset", "data": {}})
            assert ws.receive_json()["type"] == "observation"
            assert post(client, "192.0.2.1").status_code == 429
            with client.websocket_connect("/ws", headers={PEER: "192.0.2.1"}) as refused:
                frame = refused.receive_json()["data"]
            assert frame["code"] == "CAPACITY_REACHED" and "--max-sessions-per-client 2" in frame["message"]
            assert (frame["active_sessions"], frame["max_sessions"]) == (2, 2)
            with client.websocket_connect("/ws", headers={PEER: "192.0.2.2"}) as other:
                other.send_json({"type": "reset", "data": {}})
                assert other.receive_json()["type"] == "observation"
        assert post(client, "192.0.2.1").status_code == 201  # the socket's session was freed with the socket


def test_the_server_wide_bound_still_answers_503() -> None:
    with serve(max_sessions=2, max_sessions_per_client=2) as client:
        assert [post(client, p).status_code for p in ("192.0.2.1", "192.0.2.2", "192.0.2.3")] == [201, 201, 503]


def test_defaults_and_config() -> None:
    assert [default_per_client(n, "0.0.0.0") for n in (1, 3, 4, 8, 64)] == [1, 1, 1, 2, 16]
    assert default_per_client(8, "127.0.0.1") == default_per_client(8, "localhost") == default_per_client(8, "::1") == 8
    assert ServeConfig("sapo/Vault-v0", host="::", max_sessions=12).per_client == 3
    assert ServeConfig("sapo/Vault-v0", max_sessions=12, max_sessions_per_client=5).per_client == 5
    with pytest.raises(ValueError, match="max_sessions_per_client"):
        ServeConfig("sapo/Vault-v0", max_sessions_per_client=0)


def test_client_keys() -> None:
    assert client_key("203.0.113.5") == "203.0.113.5" and client_key("::ffff:203.0.113.5") == "203.0.113.5"
    assert client_key("2001:db8:1:2::5") == client_key("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::5") != client_key("2001:db8:1:2::5")
    assert client_key(None) == "unknown" and client_key("testclient") == "testclient"


def test_owners_count_sessions_being_built_and_forget_closed_ones() -> None:
    owners = SessionOwners(2, 4)
    owners.claim("a", [])
    owners.claim("a", [])  # two being built
    with pytest.raises(Exception, match="already holds 2"):
        owners.claim("a", [])
    owners.settle("a", None)  # one failed to open
    owners.settle("a", "s1")
    owners.claim("a", ["s1"])
    owners.settle("a", "s2")
    assert owners.held("a", ["s1", "s2"]) == 2
    assert owners.held("a", ["s2"]) == 1  # s1 closed by a path that did not say so
    whole = SessionOwners(2, 2)  # a bound at the server's size leaves the refusal to the server (503)
    whole.claim("a", [])
    whole.claim("a", [])
    whole.claim("a", [])


@pytest.mark.timeout(120)
def test_a_served_remote_env_sees_the_refusal() -> None:
    import gymnasium as gym

    from sapo_gym.remote.client import RemoteEnvError
    from tests.support.remote import http, served

    with served("sapo/Vault-v0", "--max-sessions", "4", "--max-sessions-per-client", "1") as url:
        first = gym.make("sapo/Remote-v0", url=url, env_id="sapo/Vault-v0")
        try:
            with pytest.raises(RemoteEnvError, match="--max-sessions-per-client 1"):
                gym.make("sapo/Remote-v0", url=url, env_id="sapo/Vault-v0")
            status, body = http("POST", f"{url}/sessions")
            assert status == 429 and body["error"] == "client_limit"
        finally:
            first.close()
