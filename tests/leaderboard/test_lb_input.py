"""Bad input gets a 4xx, never a 500: surrogates, huge literals, overflowing sums, huge ids, float
seeds, gzip framing, anchored patterns, date-times; and the security headers and absolute URLs."""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.leaderboard import body, named, refresh, snapshot

SURROGATE_FIELDS: dict[str, Callable[[dict[str, Any]], None]] = {
    "agent.name": lambda b: b["agent"].__setitem__("name", "abc\ud800"),
    "agent.description": lambda b: b["agent"].__setitem__("description", "x\ud800y"),
    "agent.model": lambda b: b["agent"].__setitem__("model", "\udfff"),
    "evaluation.command": lambda b: b["evaluation"].__setitem__("command", "run \ud800"),
    "env.dataset": lambda b: b["env"].__setitem__("dataset", "\ud800"),
    "episodes[0].task_id": lambda b: b["episodes"][0].__setitem__("task_id", "vault\ud800"),
    "episodes[0].initial_observation": lambda b: b["episodes"][0].__setitem__("initial_observation", "\ud800"),
    "episodes[0].turns[0].output": lambda b: b["episodes"][0]["turns"][0].__setitem__(
        "output", "<action>\ud800</action>"
    ),
    "an object key": lambda b: b["agent"].__setitem__("\ud800", 1),
}


def _post(client, auth, payload: bytes, **headers: str):  # type: ignore[no-untyped-def]
    return client.post("/api/v1/submissions", data=payload, headers={**auth, **headers})


@pytest.mark.parametrize("field", list(SURROGATE_FIELDS))
def test_a_lone_surrogate_in_any_text_field_is_a_400(field: str, client, auth, store, random_bundle) -> None:  # type: ignore[no-untyped-def]
    SURROGATE_FIELDS[field](random_bundle)
    payload = json.dumps(random_bundle).encode()  # ensure_ascii: the surrogate travels as a \\udXXX escape
    assert b"\\ud" in payload
    before = snapshot(store)
    r = _post(client, auth, payload)
    assert r.status_code == 400, r.json
    assert "surrogate" in r.json["message"]
    assert snapshot(store) == before


def test_a_valid_surrogate_pair_is_accepted(client, auth, random_bundle) -> None:  # type: ignore[no-untyped-def]
    random_bundle["agent"]["description"] = "emoji \U0001f600"
    r = _post(client, auth, json.dumps(random_bundle).encode())  # written as \\ud83d\\ude00
    assert r.status_code == 201, r.json
    assert client.get(f"/api/v1/submissions/{r.json['id']}").json["agent"]["description"] == "emoji \U0001f600"


@pytest.mark.parametrize("where", ["seed", "parameters"])
def test_an_integer_literal_of_5000_digits_is_a_400(where: str, client, auth, store, random_bundle) -> None:  # type: ignore[no-untyped-def]
    big = "9" * 5000
    if where == "seed":
        text = json.dumps(random_bundle).replace('"seeds": [0]', f'"seeds": [{big}]', 1)
    else:
        random_bundle["agent"]["parameters"] = 1
        text = json.dumps(random_bundle).replace('"parameters": 1', f'"parameters": {big}', 1)
    assert big in text
    before = snapshot(store)
    r = _post(client, auth, text.encode())
    assert r.status_code == 400 and "digits" in r.json["message"], r.json
    assert snapshot(store) == before


def test_two_rewards_of_1e308_are_a_4xx(client, auth, store, random_bundle) -> None:  # type: ignore[no-untyped-def]
    ep = next(e for e in random_bundle["episodes"] if len(e["turns"]) >= 2)
    ep["turns"][0]["reward"] = ep["turns"][1]["reward"] = 1e308
    ep["return"] = 1e308
    before = snapshot(store)
    r = _post(client, auth, body(random_bundle))
    assert 400 <= r.status_code < 500, r.json
    assert "reward" in r.json["message"] or "return" in r.json["message"], r.json
    assert snapshot(store) == before


HUGE = 2**63


@pytest.mark.parametrize(
    "url",
    [
        f"/api/v1/submissions/{HUGE}",
        f"/api/v1/submissions/{HUGE}/bundle",
        f"/submission/{HUGE}",
        f"/submission/{HUGE}/episode/0",
        "/submission/1/episode/" + str(HUGE),
        f"/api/v1/submissions/{10**30}",
        f"/api/v1/compare?a={HUGE}&b=1",
        f"/api/v1/compare?a=1&b={HUGE}",
        f"/compare?a={HUGE}&b=1",
        f"/compare?a=1&b={10**40}",
        f"/api/v1/live/runs/{HUGE}",
    ],
)
def test_ids_of_2_63_and_more_are_404_or_400(url: str, client, auth, random_bundle) -> None:  # type: ignore[no-untyped-def]
    assert _post(client, auth, body(random_bundle)).json["id"] == 1
    r = client.get(url)
    assert r.status_code in (400, 404), (r.status_code, r.text[:300])


@pytest.mark.parametrize("seed", ["0.0", "1e20", "1.0"])
@pytest.mark.parametrize("where", ["evaluation.seeds", "episodes[].seed"])
def test_integral_floats_are_refused_as_seeds(seed: str, where: str, client, auth, store, random_bundle) -> None:  # type: ignore[no-untyped-def]
    text = json.dumps(random_bundle)
    if where == "evaluation.seeds":
        text = text.replace('"seeds": [0]', f'"seeds": [{seed}]', 1)
    else:
        text = text.replace('"seed": 0,', f'"seed": {seed},')
    before = snapshot(store)
    r = _post(client, auth, text.encode())
    assert r.status_code == 422 and "integer" in r.json["message"], r.json
    assert snapshot(store) == before


def test_a_multi_member_gzip_is_accepted(client, auth, random_bundle) -> None:  # type: ignore[no-untyped-def]
    data = body(random_bundle)
    payload = gzip.compress(data[:1000]) + gzip.compress(data[1000:])
    r = _post(client, auth, payload, **{"Content-Encoding": "gzip"})
    assert r.status_code == 201, r.json


@pytest.mark.parametrize("damage", ["trailing garbage", "missing CRC", "trailing zeros"])
def test_damaged_gzip_is_a_400(damage: str, client, auth, store, random_bundle) -> None:  # type: ignore[no-untyped-def]
    payload = gzip.compress(body(random_bundle))
    payload = {
        "trailing garbage": payload + b"garbage!",
        "missing CRC": payload[:-8],
        "trailing zeros": payload + bytes(16),
    }[damage]
    before = snapshot(store)
    r = _post(client, auth, payload, **{"Content-Encoding": "gzip"})
    assert r.status_code == 400 and "gzip" in r.json["message"], r.json
    assert snapshot(store) == before


@pytest.mark.parametrize("name", ["agent\n", "agent\r\n", "\nagent"])
def test_a_name_with_a_newline_is_refused(name: str, client, auth, store, random_bundle) -> None:  # type: ignore[no-untyped-def]
    before = snapshot(store)
    r = _post(client, auth, body(named(random_bundle, name)))
    assert r.status_code == 422 and "agent.name" in r.json["message"], r.json
    assert snapshot(store) == before


@pytest.mark.parametrize(
    "created", ["2026-13-45T99:99:99Z", "2026-02-30T10:00:00Z", "2026-01-01T10:00:00+25:00", "2026-01-01T10:00:00Z\n"]
)
def test_date_time_format_is_enforced(created: str, client, auth, store, random_bundle) -> None:  # type: ignore[no-untyped-def]
    random_bundle["created"] = created
    before = snapshot(store)
    r = _post(client, auth, body(random_bundle))
    assert r.status_code == 422 and "created" in r.json["message"], r.json
    assert snapshot(store) == before


@pytest.mark.parametrize(
    "created", ["2026-01-01T10:00:00Z", "2026-01-01T10:00:00.123456789+05:30", "2024-02-29T23:59:60Z"]
)
def test_valid_date_times_are_accepted(created: str, client, auth, random_bundle) -> None:  # type: ignore[no-untyped-def]
    random_bundle["created"] = created
    assert _post(client, auth, body(random_bundle)).status_code == 201


def test_security_headers_on_pages_and_api(client, auth, random_bundle) -> None:  # type: ignore[no-untyped-def]
    sid = _post(client, auth, body(random_bundle)).json["id"]
    for url in ("/", f"/submission/{sid}", "/api/v1/boards", "/api/v1/submissions/999", f"/submission/{sid}/episode/0"):
        r = client.get(url, follow_redirects=True)
        assert "default-src 'self'" in r.headers["Content-Security-Policy"], url
        assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"], url
        assert r.headers["X-Content-Type-Options"] == "nosniff", url
        assert r.headers["X-Frame-Options"] == "DENY", url


def test_absolute_urls_come_from_the_configured_base_url(tmp_path, random_bundle) -> None:  # type: ignore[no-untyped-def]
    from leaderboard.server.app import ServerConfig, create_app
    from tests.support.leaderboard import VAULT

    app = create_app(
        ServerConfig(
            db_url=f"sqlite:///{tmp_path / 'b.db'}",
            boards=(VAULT,),
            verify=False,
            base_url="https://board.example.org/lb/",
        )
    )
    try:
        _, token = app.extensions["sapo_gym"]["store"].create_token("alice")
        client = app.test_client()
        headers = {"Authorization": f"Bearer {token}", "Host": "evil.example.com"}
        r = client.post("/api/v1/submissions", data=body(random_bundle), headers=headers)
        sid = r.json["id"]
        assert r.json["url"] == f"https://board.example.org/lb/submission/{sid}"
        assert r.json["api_url"] == r.headers["Location"] == f"https://board.example.org/lb/api/v1/submissions/{sid}"
        detail = client.get(f"/api/v1/submissions/{sid}", headers={"Host": "evil.example.com"}).json
        assert detail["url"] == f"https://board.example.org/lb/submission/{sid}"
        listing = client.get("/api/v1/submissions", headers={"Host": "evil.example.com"}).json["submissions"]
        assert all("evil" not in s["url"] for s in listing)
    finally:
        app.extensions["sapo_gym"]["store"].engine.dispose()


def test_base_url_must_be_http_or_https() -> None:
    from leaderboard.server.app import ServerConfig, create_app

    with pytest.raises(ValueError, match="base_url"):
        create_app(ServerConfig(db_url="sqlite://", verify=False, base_url="javascript:alert(1)"))


def test_refresh_keeps_the_fixture_valid(client, auth, random_bundle) -> None:  # type: ignore[no-untyped-def]
    """Sanity: the untouched fixture is admitted, so every refusal above is the tampering's doing."""
    assert _post(client, auth, body(refresh(copy.deepcopy(random_bundle)))).status_code == 201


def _live_run(client, auth) -> int:  # type: ignore[no-untyped-def]
    r = client.post(
        "/api/v1/live/runs",
        json={"env_id": "sapo/Vault-v0", "split": "test", "agent": {"name": "live input"}},
        headers=auth,
    )
    assert r.status_code == 201, r.json
    run = r.json["run_id"] if "run_id" in r.json else r.json["id"]
    assert client.post(f"/api/v1/live/runs/{run}/reset", json={}, headers=auth).status_code == 200
    return run


@pytest.mark.parametrize("case", ["surrogate output", "5000-digit turn", "5000-digit seeds", "surrogate key"])
def test_live_endpoints_refuse_bad_json_with_a_400(case: str, client, auth) -> None:  # type: ignore[no-untyped-def]
    headers = {**auth, "Content-Type": "application/json"}
    if case == "5000-digit seeds":
        text = '{"env_id": "sapo/Vault-v0", "split": "test", "agent": {"name": "x"}, "seeds": ' + "9" * 5000 + "}"
        r = client.post("/api/v1/live/runs", data=text.encode(), headers=headers)
    else:
        run = _live_run(client, auth)
        text = {
            "surrogate output": '{"output": "<action>\\ud800</action>", "turn": 0}',
            "5000-digit turn": '{"output": "x", "turn": ' + "9" * 5000 + "}",
            "surrogate key": '{"output": "x", "\\udc00": 1}',
        }[case]
        r = client.post(f"/api/v1/live/runs/{run}/step", data=text.encode(), headers=headers)
    assert r.status_code == 400, (r.status_code, r.text[:300])
    assert r.is_json and ("surrogate" in r.json["message"] or "digits" in r.json["message"]), r.json
