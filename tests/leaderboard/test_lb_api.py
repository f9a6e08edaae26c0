"""The JSON API: submit / list / detail / compare, authentication, the bad-input corpus, escaping."""

from __future__ import annotations

import copy
import datetime as dt
import gzip
import json
from collections.abc import Callable
from typing import Any

import pytest

from leaderboard.server import queue
from leaderboard.server.worker import Verifier
from tests.support.leaderboard import body, named, refresh, snapshot


def test_submit_list_detail_bundle(client, auth, store, random_bundle) -> None:  # type: ignore[no-untyped-def]
    r = client.post("/api/v1/submissions", data=body(random_bundle), headers=auth)
    assert r.status_code == 201, r.json
    sid = r.json["id"]
    assert (
        r.json["status"] == "pending"
        and not r.json["duplicate"]
        and r.headers["Location"].endswith(f"/api/v1/submissions/{sid}")
    )
    listing = client.get("/api/v1/submissions").json["submissions"]
    assert [s["id"] for s in listing] == [sid]
    detail = client.get(f"/api/v1/submissions/{sid}").json
    assert detail["agent"]["name"] == "random agent" and detail["submitter"] == "alice"
    assert detail["aggregates"] == random_bundle["aggregates"] and detail["verified"] is False
    assert client.get(f"/api/v1/submissions/{sid}/bundle").json == random_bundle
    # the same bundle again (a retried request) is stored once
    again = client.post(
        "/api/v1/submissions", data=gzip.compress(body(random_bundle)), headers={**auth, "Content-Encoding": "gzip"}
    )
    assert again.status_code == 200 and again.json == {**r.json, "duplicate": True}
    assert store.counts()["submissions"] == 1
    by_board = client.get("/api/v1/submissions?env=sapo/Vault-v0&split=test").json["submissions"]
    assert [s["id"] for s in by_board] == [sid]
    assert client.get("/api/v1/submissions?env=sapo/Vault-v0&split=nope").status_code == 404


def test_verification_status_in_api_and_page(client, auth, store, expert_bundle, random_bundle) -> None:  # type: ignore[no-untyped-def]
    honest = client.post("/api/v1/submissions", data=body(expert_bundle), headers=auth).json["id"]
    forged = named(random_bundle, "forger")
    forged["episodes"][0]["turns"][-1]["observation"] = "Click. The vault opens."
    bad = client.post("/api/v1/submissions", data=body(forged), headers=auth).json["id"]
    assert Verifier(store).drain() == 2
    assert client.get(f"/api/v1/submissions/{honest}").json["verified"] is True
    record = client.get(f"/api/v1/submissions/{bad}").json
    assert (
        record["status"] == "failed"
        and "episode 0" in record["status_message"]
        and "observation" in record["status_message"]
    )
    assert "&#10003; verified" in client.get(f"/submission/{honest}").text
    assert "&#10007; failed" in client.get(f"/submission/{bad}").text


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer sgl_not-a-token"},
    ],
    ids=["none", "basic", "empty", "unknown"],
)
def test_unauthenticated_writes_are_401(client, store, auth, random_bundle, headers) -> None:  # type: ignore[no-untyped-def]
    before = snapshot(store)
    r = client.post("/api/v1/submissions", data=body(random_bundle), headers=headers)
    assert r.status_code == 401 and r.json["error"] == "unauthorized" and "token" in r.json["message"]
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    assert snapshot(store) == before


def test_revoked_token_is_401(client, store, random_bundle) -> None:  # type: ignore[no-untyped-def]
    token_id, token = store.create_token("mallory")
    assert store.revoke_token(token_id)
    r = client.post("/api/v1/submissions", data=body(random_bundle), headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 401 and "revoked" in r.json["message"]
    assert all(t.token_hash != token and len(t.token_hash) == 64 for t in store.tokens())  # stored hashed


def _text(fn: Callable[[dict[str, Any]], str]) -> Callable[[dict[str, Any]], bytes]:
    return lambda b: fn(b).encode()


def _mutate(fn: Callable[[dict[str, Any]], Any], recompute: bool = True) -> Callable[[dict[str, Any]], bytes]:
    def build(b: dict[str, Any]) -> bytes:
        fn(b)
        return body(refresh(b) if recompute else b)

    return build


def _drop_task(b: dict[str, Any]) -> None:
    b["episodes"].pop(5)


def _duplicate_task(b: dict[str, Any]) -> None:
    b["episodes"][5] = copy.deepcopy(b["episodes"][4])


BAD_INPUTS: dict[str, tuple[Callable[[dict[str, Any]], bytes], dict[str, str], int, str]] = {
    "malformed JSON": (lambda b: body(b)[:-10], {}, 400, "malformed JSON"),
    "not an object": (lambda b: b"[1, 2, 3]", {}, 400, "JSON object"),
    "empty body": (lambda b: b"", {}, 400, "malformed JSON"),
    "wrong schema version": (_mutate(lambda b: b.__setitem__("version", 2)), {}, 422, "unsupported bundle version 2"),
    "not a bundle": (_mutate(lambda b: b.__setitem__("format", "balrog")), {}, 422, "not a sapo-gym bundle"),
    "oversize": (
        lambda b: body(named(b, "big")).replace(b'"agent": {', b'"agent": {"pad": "' + b"x" * (1 << 20) + b'", '),
        {},
        413,
        "too large",
    ),
    "gzip bomb": (
        lambda b: gzip.compress(b"{" + b" " * (4 << 20) + b"}"),
        {"Content-Encoding": "gzip"},
        413,
        "too large",
    ),
    "bad gzip": (lambda b: b"not gzip at all", {"Content-Encoding": "gzip"}, 400, "gzip"),
    "unknown encoding": (lambda b: body(b), {"Content-Encoding": "br"}, 415, "Content-Encoding"),
    "NaN score": (_text(lambda b: json.dumps(b).replace('"score": 0.0', '"score": NaN', 1)), {}, 400, "NaN"),
    "Infinity reward": (
        _text(lambda b: json.dumps(b).replace('"reward": 0.0', '"reward": Infinity', 1)),
        {},
        400,
        "Infinity",
    ),
    "overflowing number": (
        _text(lambda b: json.dumps(b).replace('"reward": 0.0', '"reward": 1e999', 1)),
        {},
        400,
        "overflows",
    ),
    "forged aggregates": (
        _mutate(lambda b: b["aggregates"]["all"].__setitem__("success", 0.9), recompute=False),
        {},
        422,
        "forged",
    ),
    "forged category": (
        _mutate(lambda b: b["aggregates"]["code2"].__setitem__("score_ci_high", 1.0), recompute=False),
        {},
        422,
        "forged",
    ),
    "inconsistent episode": (_mutate(lambda b: b["episodes"][0].__setitem__("steps", 7)), {}, 422, "steps=7"),
    "score out of range": (
        _mutate(lambda b: b["episodes"][0].__setitem__("score", 1.5), recompute=False),
        {},
        422,
        "episodes[0].score",
    ),
    "missing task id": (_mutate(_drop_task), {}, 422, "missing"),
    "duplicated task id": (_mutate(_duplicate_task), {}, 422, "duplicated task ids ['vault-test-004']"),
    "task id from another split": (
        _mutate(lambda b: b["episodes"][0].__setitem__("task_id", "vault-train-000")),
        {},
        422,
        "not in split",
    ),
    "unknown spec hash": (
        _mutate(lambda b: b["env"].__setitem__("spec_hash", "0123456789abcdef")),
        {},
        422,
        "unknown spec hash",
    ),
    "spec fields that do not match the hash": (
        _mutate(lambda b: b["env"].__setitem__("protocol", "strict-v1")),
        {},
        422,
        "env.protocol",
    ),
    "script in name": (
        _mutate(lambda b: b["agent"].__setitem__("name", "<script>alert(1)</script>")),
        {},
        422,
        "agent.name",
    ),
    "SQL in name": (
        _mutate(lambda b: b["agent"].__setitem__("name", "x'); DROP TABLE submissions;--")),
        {},
        422,
        "agent.name",
    ),
    "javascript code url": (
        _mutate(lambda b: b["agent"].__setitem__("code_url", "javascript:alert(1)")),
        {},
        422,
        "agent.code_url",
    ),
    "unknown field": (_mutate(lambda b: b["episodes"][0].__setitem__("bonus", 1)), {}, 422, "Additional properties"),
    "negative seed": (
        _mutate(
            lambda b: [b["evaluation"].__setitem__("seeds", [-1])] + [e.__setitem__("seed", -1) for e in b["episodes"]]
        ),
        {},
        422,
        "seed",
    ),
    "wrong type": (_mutate(lambda b: b["episodes"][0].__setitem__("success", "yes")), {}, 422, "episodes[0].success"),
    "missing field": (_mutate(lambda b: b["env"].pop("split")), {}, 422, "split"),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_is_rejected_with_a_clear_message(name: str, client, store, auth, random_bundle) -> None:  # type: ignore[no-untyped-def]
    client.post("/api/v1/submissions", data=body(named(random_bundle, "already there")), headers=auth)
    make, headers, status, message = BAD_INPUTS[name]
    payload = make(copy.deepcopy(random_bundle))
    before = snapshot(store)
    r = client.post("/api/v1/submissions", data=payload, headers={**auth, **headers})
    assert r.status_code == status, r.json
    assert r.is_json and message in r.json["message"], r.json
    assert snapshot(store) == before


def test_free_text_renders_escaped_and_sql_stays_data(client, auth, store, random_bundle) -> None:  # type: ignore[no-untyped-def]
    b = named(random_bundle, "escape test")
    b["agent"]["description"] = "<script>alert('x')</script> '; DROP TABLE submissions; --"
    b["agent"]["model"] = "<img src=x onerror=alert(1)>"
    sid = client.post("/api/v1/submissions", data=body(b), headers=auth).json["id"]
    for url in (f"/submission/{sid}", "/"):
        page = client.get(url, follow_redirects=True).text
        assert "<script>alert" not in page and "<img src=x" not in page
    page = client.get(f"/submission/{sid}").text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert client.get(f"/api/v1/submissions/{sid}").json["agent"]["description"] == b["agent"]["description"]
    assert store.counts()["submissions"] == 1


def test_api_errors_are_json(client) -> None:  # type: ignore[no-untyped-def]
    r = client.get("/api/v1/submissions/12345")
    assert r.status_code == 404 and r.json == {"error": "not_found", "message": "no submission 12345", "status": 404}
    r = client.put("/api/v1/submissions")
    assert r.status_code == 405 and r.json["error"] == "method_not_allowed"
    r = client.get("/api/v1/submissions?sort=drop")
    assert r.status_code == 400 and "valid choices" in r.json["message"]
    assert client.get("/api/v1/compare?a=1").status_code == 400


def test_boards_endpoint_lists_spec_hashes(client, vault_board) -> None:  # type: ignore[no-untyped-def]
    boards = client.get("/api/v1/boards").json["boards"]
    assert boards == [
        {
            "env_id": "sapo/Vault-v0",
            "split": "test",
            "spec_hash": vault_board.spec_hash,
            "tasks": 16,
            "spec": vault_board.spec_fields,
        }
    ]


def test_two_verifiers_share_the_queue_without_double_work(client, auth, store, random_bundle) -> None:  # type: ignore[no-untyped-def]
    import threading

    for i in range(6):
        client.post("/api/v1/submissions", data=body(named(random_bundle, f"q{i}")), headers=auth)
    done: list[int] = []
    verifiers = [Verifier(store), Verifier(store)]
    threads = [threading.Thread(target=lambda v=v: done.append(v.drain())) for v in verifiers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(done) == 6 and {r.status for r in store.submissions()} == {"verified"}


def test_stale_claims_are_requeued(client, auth, store, random_bundle) -> None:  # type: ignore[no-untyped-def]
    client.post("/api/v1/submissions", data=body(random_bundle), headers=auth)
    assert queue.claim(store, "a worker", 60) is not None and queue.claim(store, "another", 60) is None  # claimed once
    assert store.requeue_stale() == 0  # its worker is alive: the lease has not expired
    later = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) + dt.timedelta(seconds=61)
    assert store.requeue_stale(now=later) == 1  # the worker died mid-replay: its lease expired
    assert Verifier(store).drain() == 1
