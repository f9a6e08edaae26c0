"""Cost caps at admission: a small gzip body that inflates to tens of MiB of tiny turns is refused in
well under a second, before it is parsed; counts are checked before the schema; the caps hold
when keys are spelled with escapes."""

from __future__ import annotations

import copy
import gzip
import json
import time

import pytest

import leaderboard.precheck as precheck
from tests.support.leaderboard import VAULT, body, named, refresh, snapshot

TINY_TURN = {
    "output": "",
    "action": "",
    "think": None,
    "valid": True,
    "admissible": True,
    "observation": "",
    "reward": 0,
}


@pytest.fixture
def big_app(tmp_path):  # type: ignore[no-untyped-def]
    from leaderboard.server.app import ServerConfig, create_app

    app = create_app(
        ServerConfig(db_url=f"sqlite:///{tmp_path / 'caps.db'}", boards=(VAULT,), verify=False, max_upload_mb=96)
    )
    yield app
    app.extensions["sapo_gym"]["store"].engine.dispose()


def test_a_gzip_bomb_of_tiny_turns_is_refused_fast(big_app, random_bundle) -> None:  # type: ignore[no-untyped-def]
    store = big_app.extensions["sapo_gym"]["store"]
    _, token = store.create_token("bomber")
    ep = copy.deepcopy(random_bundle["episodes"][0])
    ep["turns"] = [TINY_TURN] * 1000
    random_bundle["episodes"] = [ep] * 740  # 740,000 turns, ~70 MiB of JSON
    payload = gzip.compress(json.dumps(random_bundle, separators=(",", ":")).encode(), 6)
    assert len(payload) < 600 << 10
    before = snapshot(store)
    start = time.monotonic()
    r = big_app.test_client().post(
        "/api/v1/submissions", data=payload, headers={"Authorization": f"Bearer {token}", "Content-Encoding": "gzip"}
    )
    elapsed = time.monotonic() - start
    assert r.status_code == 413 and "turns" in r.json["message"], r.json
    assert elapsed < 3.0, elapsed  # before the caps: ~80 s of schema validation, then a 422
    assert snapshot(store) == before


def test_more_turns_than_the_horizon_is_refused_before_the_schema(
    client, auth, store, random_bundle, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    def no_schema(_bundle):  # type: ignore[no-untyped-def]
        raise AssertionError("the schema validation ran")

    monkeypatch.setattr("leaderboard.checks.check_bundle", no_schema)
    ep = random_bundle["episodes"][0]
    ep["turns"] = ep["turns"] * 10
    ep["bogus"] = "x" * 10  # a schema violation too: the count is reported first
    r = client.post("/api/v1/submissions", data=body(random_bundle), headers=auth)
    assert r.status_code == 422 and "ends every episode by step 4" in r.json["message"], r.json
    more = named(random_bundle, "more")
    more["episodes"] = more["episodes"] * 2
    r = client.post("/api/v1/submissions", data=body(more), headers=auth)
    assert r.status_code == 422 and "more than the 1 seed(s) x 16 tasks" in r.json["message"], r.json


def test_the_caps_count_keys_written_with_escapes(client, auth, store, random_bundle, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(precheck, "MAX_TURNS", 10)
    text = json.dumps(refresh(random_bundle)).replace('"output"', '"\\u006futput"')
    assert '"output"' not in text
    before = snapshot(store)
    r = client.post("/api/v1/submissions", data=text.encode(), headers=auth)
    assert r.status_code == 413 and "more than 10 turns" in r.json["message"], r.json
    assert snapshot(store) == before
    monkeypatch.setattr(precheck, "MAX_TURNS", 250_000)
    assert (
        client.post("/api/v1/submissions", data=text.encode(), headers=auth).status_code == 201
    )  # same bundle, within the cap
