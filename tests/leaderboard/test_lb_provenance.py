"""'Verified' means this agent produced these episodes: ownership of episodes, reserved names, oracle marks."""

from __future__ import annotations

import copy
import re

import pytest

from leaderboard.seed import seed_store
from leaderboard.server.worker import Verifier
from sapo_gym.bundle import AgentInfo, build_bundle, parse_bundle
from sapo_gym.parsing import parse_action
from tests.support.leaderboard import body, named, refresh, snapshot


@pytest.fixture
def bob(store) -> dict[str, str]:  # type: ignore[no-untyped-def]
    _, token = store.create_token("bob")
    return {"Authorization": f"Bearer {token}"}


def _reshuffled(bundle, seed: int):  # type: ignore[no-untyped-def]
    """The same episodes in another order, relabelled to another seed (Vault does not depend on it)."""
    out = copy.deepcopy(bundle)
    out["episodes"] = [{**ep, "seed": seed} for ep in reversed(out["episodes"])]
    out["evaluation"]["seeds"] = [seed]
    return refresh(out)


def test_identical_episodes_from_another_token_are_409(client, store, auth, bob, random_bundle) -> None:  # type: ignore[no-untyped-def]
    first = client.post("/api/v1/submissions", data=body(random_bundle), headers=auth)
    assert first.status_code == 201
    sid = first.json["id"]
    before = snapshot(store)
    for copy_ in (
        random_bundle,
        named(random_bundle, "my own agent"),
        _reshuffled(named(random_bundle, "mine too"), 7),
    ):
        r = client.post("/api/v1/submissions", data=body(copy_), headers=bob)
        assert r.status_code == 409 and r.json["error"] == "duplicate_episodes", r.json
        assert f"submission {sid}" in r.json["message"] and "'alice'" in r.json["message"]
    assert snapshot(store) == before
    # the owner may resubmit them (a retry is a duplicate, a new name a new entry); other episodes are bob's to submit
    assert client.post("/api/v1/submissions", data=body(random_bundle), headers=auth).json == {
        **first.json,
        "duplicate": True,
    }
    assert (
        client.post("/api/v1/submissions", data=body(named(random_bundle, "renamed")), headers=auth).status_code == 201
    )
    assert (
        client.post(
            "/api/v1/submissions", data=body(_rethought(random_bundle, "my own thought")), headers=bob
        ).status_code
        == 201
    )


def _rethought(bundle, think: str, episodes: int | None = None):  # type: ignore[no-untyped-def]
    """``bundle`` with every turn of its first ``episodes`` episodes (None: all) thinking ``think``: other work there."""
    out = copy.deepcopy(bundle)
    for ep in out["episodes"][:episodes]:
        for turn in ep["turns"]:
            turn["output"], turn["think"] = (
                turn["output"].replace(f"<think>{turn['think']}</think>", f"<think>{think}</think>"),
                think,
            )
    return refresh(named(out, "rethought"))


def test_the_baselines_episodes_are_not_a_users_to_submit(client, store, boards, auth) -> None:  # type: ignore[no-untyped-def]
    from leaderboard.seed import baseline_bundle

    ids = seed_store(store, boards, ["random"])
    stolen = named(baseline_bundle(next(iter(boards)), "random"), "definitely mine")
    r = client.post("/api/v1/submissions", data=body(stolen), headers=auth)
    assert (
        r.status_code == 409
        and f"submission {ids[0]}" in r.json["message"]
        and "sapo-gym baselines" in r.json["message"]
    )


@pytest.mark.parametrize(
    "name", ["expert (oracle)", "Expert  (Oracle)", "EXPERT-ORACLE", "random (admissible)", "search (observation-only)"]
)
def test_baseline_names_are_reserved_for_the_seeded_entries(client, store, auth, random_bundle, name: str) -> None:  # type: ignore[no-untyped-def]
    before = snapshot(store)
    r = client.post("/api/v1/submissions", data=body(named(random_bundle, name)), headers=auth)
    assert (
        r.status_code == 403
        and r.json["error"] == "reserved_name"
        and "reserved for the seeded baseline" in r.json["message"]
    )
    assert snapshot(store) == before


def test_the_board_marks_baselines_and_privileged_agents(
    client, store, boards, auth, expert_bundle, random_bundle
) -> None:  # type: ignore[no-untyped-def]
    seeded = seed_store(store, boards, ["random"])
    mine = client.post("/api/v1/submissions", data=body(expert_bundle), headers=auth).json[
        "id"
    ]  # the oracle, as a user
    page = client.get(f"/board/{expert_bundle['env']['spec_hash']}").text
    rows = dict(re.findall(r'<tr data-id="(\d+)">(.*?)</tr>', page, flags=re.S))
    assert (
        "best-of-N" in page and "Replay cannot tell whether they were the only ones" in page
    )  # the limit, said on the board
    assert 'class="badge baseline"' in rows[str(seeded[0])] and 'class="badge privileged"' not in rows[str(seeded[0])]
    assert 'class="badge privileged"' in rows[str(mine)] and 'class="badge baseline"' not in rows[str(mine)]
    assert store.marks([store.get(mine)])[mine] == {"baseline": False, "privileged": True, "live": False}
    assert expert_bundle["evaluation"]["harness"]["privileged_agent"] is True
    assert random_bundle["evaluation"]["harness"] == {
        "info_filter": "public",
        "withheld_keys": ["expert_action", "pddl_params"],
        "privileged_agent": False,
    }


def test_a_peeking_agent_is_verified_with_what_it_really_did(client, store, auth, vault_board) -> None:  # type: ignore[no-untyped-def]
    """The attack: a module:Class agent that reads info['expert_action'] was verified at 100 %."""
    from agents.registry import load_agent
    from sapo_gym.evaluation import evaluate

    agent = load_agent("tests.sapo_gym.test_evaluation:PeekingAgent")
    records = evaluate(agent, vault_board.env_id, split=vault_board.split, progress=False)
    bundle = parse_bundle(
        body(build_bundle(records, vault_board.spec_fields, vault_board.spec_hash, AgentInfo(name="peeker"), [0]))
    )
    sid = client.post("/api/v1/submissions", data=body(bundle), headers=auth).json["id"]
    assert Verifier(store).drain() == 1
    record = client.get(f"/api/v1/submissions/{sid}").json
    assert record["status"] == "verified" and record["success"] < 1.0 and agent.seen == set()
    assert bundle["evaluation"]["harness"]["privileged_agent"] is False


# --- stolen bundles: ownership compares tasks and raw outputs, never what replay recomputes --------------------------
def _turn(b, key, value, ep=0, turn=0):  # type: ignore[no-untyped-def]
    b["episodes"][ep]["turns"][turn][key] = value


def _episode(b, key, value, ep=0):  # type: ignore[no-untyped-def]
    b["episodes"][ep][key] = value


def _zero_episode(b) -> int:  # type: ignore[no-untyped-def]
    return next(i for i, ep in enumerate(b["episodes"]) if ep["return"] == 0.0 and ep["score"] == 0.0)


def _text_edit(old: str, new: str):  # type: ignore[no-untyped-def]
    """A spelling of the stored JSON text: the same values, other characters."""

    def edit(text: str) -> str:
        assert old in text
        return text.replace(old, new, 1)

    return edit


_RECOMPUTED = {  # each: what the issue's attacker changes; replay recomputes or ignores it (or admission refuses it)
    "reward -0.0": lambda b: _turn(b, "reward", -0.0, _zero_episode(b)),
    "reward 0": lambda b: _turn(b, "reward", 0, _zero_episode(b)),
    "return -0.0": lambda b: _episode(b, "return", -0.0, _zero_episode(b)),
    "score 1e-12": lambda b: _episode(b, "score", 1e-12, _zero_episode(b)),
    "think": lambda b: _turn(b, "think", "my own thought"),
    "action": lambda b: _turn(b, "action", "press nothing"),
    "observation": lambda b: _turn(b, "observation", "a different world"),
    "valid": lambda b: _turn(b, "valid", False),
    "admissible": lambda b: _turn(b, "admissible", False),
    "initial observation": lambda b: _episode(b, "initial_observation", "elsewhere"),
    "success": lambda b: _episode(b, "success", True, _zero_episode(b)),
    "steps": lambda b: _episode(b, "steps", 3),
    "invalid actions": lambda b: _episode(b, "invalid_actions", 1),
    "agent": lambda b: b["agent"].update(name="mine", description="all my own work", model="x"),
    "created and command": lambda b: (
        b.update(created="2030-01-01T00:00:00+00:00") or b["evaluation"].update(command="me")
    ),
    "episode order and key order": lambda b: b.update(
        episodes=[dict(reversed(list(ep.items()))) for ep in reversed(b["episodes"])]
    ),
    "seeds relabelled": lambda b: (
        b.update(episodes=[{**ep, "seed": 5} for ep in b["episodes"]]) or b["evaluation"].update(seeds=[5])
    ),
}


@pytest.mark.parametrize("what", sorted(_RECOMPUTED))
def test_a_stolen_bundle_with_only_recomputed_fields_changed_is_409(
    what: str, client, store, auth, bob, random_bundle
) -> None:  # type: ignore[no-untyped-def]
    first = client.post("/api/v1/submissions", data=body(random_bundle), headers=auth)
    assert first.status_code == 201
    sid = first.json["id"]
    stolen = client.get(f"/api/v1/submissions/{sid}/bundle").json  # what anybody can download
    _RECOMPUTED[what](stolen)
    stolen = refresh(stolen) if what not in ("agent", "created and command") else stolen  # consistent aggregates
    before = snapshot(store)
    r = client.post("/api/v1/submissions", data=body(stolen), headers=bob)
    assert r.status_code in (409, 422), (what, r.status_code, r.json)  # 422: admission refuses it first
    if r.status_code == 409:
        assert r.json["error"] == "duplicate_episodes" and f"submission {sid}" in r.json["message"]
    assert snapshot(store) == before


@pytest.mark.parametrize(
    "edit",
    [
        _text_edit('"reward":0.0', '"reward":-0.0'),
        _text_edit('"reward":0.0', '"reward":0'),
        _text_edit('"reward":0.0', '"reward":0e0'),
        _text_edit('"return":0.0', '"return":-0.0'),
        _text_edit('"score":0.0,', '"score":1e-12,'),
    ],
    ids=["-0.0", "0", "0e0", "return", "score"],
)
def test_the_issues_stolen_bundle_is_409(edit, client, store, auth, bob, random_bundle) -> None:  # type: ignore[no-untyped-def]
    """The stolen-bundle attack: another submitter's downloaded bytes, one number respelled, posted as is."""
    sid = client.post("/api/v1/submissions", data=body(random_bundle), headers=auth).json["id"]
    text = edit(client.get(f"/api/v1/submissions/{sid}/bundle").get_data(as_text=True))
    r = client.post("/api/v1/submissions", data=text.encode(), headers=bob)
    assert r.status_code == 409 and f"submission {sid}" in r.json["message"], r.json


def _edit_outputs(bundle, edit):  # type: ignore[no-untyped-def]
    out = copy.deepcopy(bundle)
    for ep in out["episodes"]:
        for turn in ep["turns"]:
            turn["output"] = edit(turn["output"])
            turn["think"] = parse_action(turn["output"]).think
    return refresh(named(out, "edited"))


_SAME_WORK = {  # each: an edit of every output that replays to the same actions, with a think that differs in form only
    "text after </action>": lambda o: o + "  \n",
    "text before <think>": lambda o: "Sure! " + o,
    "action re-cased": lambda o: o.replace("<action>press", "<action>PRESS"),
    "spaces around the action": lambda o: o.replace("<action>", "<action>  ").replace("</action>", " </action>"),
    "think re-cased": lambda o: o.replace("random choice", "Random Choice"),
    "think re-spaced": lambda o: o.replace("random choice", "  random\n\tchoice "),
    "think with a no-break space": lambda o: o.replace("random choice", "random\u00a0choice"),
    "think fullwidth": lambda o: o.replace("random", "\uff52\uff41\uff4e\uff44\uff4f\uff4d"),
}


@pytest.mark.parametrize("what", sorted(_SAME_WORK))
def test_outputs_edited_only_where_the_parser_or_canonical_form_ignores_are_the_same_work(
    what, client, store, auth, bob, random_bundle
) -> None:  # type: ignore[no-untyped-def]
    sid = client.post("/api/v1/submissions", data=body(random_bundle), headers=auth).json["id"]
    edited = _edit_outputs(random_bundle, _SAME_WORK[what])
    assert edited["episodes"] != random_bundle["episodes"]
    r = client.post("/api/v1/submissions", data=body(edited), headers=bob)
    assert r.status_code == 409 and f"submission {sid}" in r.json["message"], (what, r.json)


def test_ownership_is_per_episode_a_minority_of_others_work_is_allowed(client, store, auth, bob, random_bundle) -> None:  # type: ignore[no-untyped-def]
    """Half or more of the distinct episodes owned by other tokens is a 409; fewer is the submitter's own work."""
    n = len(random_bundle["episodes"])
    sid = client.post("/api/v1/submissions", data=body(random_bundle), headers=auth).json["id"]
    for mine in (0, 1, n // 2):  # n - mine episodes copied: at least half
        r = client.post("/api/v1/submissions", data=body(_rethought(random_bundle, f"mine {mine}", mine)), headers=bob)
        assert (
            r.status_code == 409
            and f"{n - mine} of the {n}" in r.json["message"]
            and f"submission {sid}" in r.json["message"]
        ), r.json
    r = client.post("/api/v1/submissions", data=body(_rethought(random_bundle, "mostly mine", n // 2 + 1)), headers=bob)
    assert r.status_code == 201, r.json
    # the task ids are part of the work: outputs swapped between two tasks are other work there, a copy elsewhere
    moved = copy.deepcopy(random_bundle)
    a, b = moved["episodes"][0], moved["episodes"][1]
    a["turns"], b["turns"] = b["turns"], a["turns"]
    assert client.post("/api/v1/submissions", data=body(refresh(named(moved, "moved"))), headers=bob).status_code == 409


def test_a_subset_of_seeds_or_a_mix_of_two_victims_is_refused(client, store, auth, bob, vault_board) -> None:  # type: ignore[no-untyped-def]
    from leaderboard.seed import baseline_bundle

    carol = {"Authorization": f"Bearer {store.create_token('carol')[1]}"}
    two = named(baseline_bundle(vault_board, "random", seeds=(3, 4)), "two seeds")
    sid = client.post("/api/v1/submissions", data=body(two), headers=auth).json["id"]
    one = copy.deepcopy(two)
    one["episodes"] = [ep for ep in one["episodes"] if ep["seed"] == 4]
    one["evaluation"]["seeds"] = [4]
    r = client.post("/api/v1/submissions", data=body(refresh(named(one, "one seed of it"))), headers=bob)
    assert r.status_code == 409 and f"submission {sid}" in r.json["message"], r.json
    other = named(_rethought(baseline_bundle(vault_board, "random", seeds=(4,)), "carols thought"), "carols agent")
    assert client.post("/api/v1/submissions", data=body(other), headers=carol).status_code == 201
    mix = copy.deepcopy(one)  # half of alice's episodes, half of carol's
    half = len(mix["episodes"]) // 2
    mix["episodes"] = mix["episodes"][:half] + other["episodes"][half:]
    r = client.post("/api/v1/submissions", data=body(refresh(named(mix, "a mix"))), headers=bob)
    assert r.status_code == 409, r.json


def _old_digest(bundle) -> str:  # type: ignore[no-untyped-def]
    """The legacy ownership digest (every field of every episode but its seed) that migrated databases hold."""
    import hashlib
    import json

    texts = {
        json.dumps(
            {k: v for k, v in ep.items() if k != "seed"}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        for ep in bundle["episodes"]
    }
    h = hashlib.sha256(str(bundle["env"]["spec_hash"]).encode())
    for text in sorted(texts):
        h.update(b"\n" + text.encode())
    return h.hexdigest()


def test_a_database_of_old_digests_is_migrated_and_stays_protected(tmp_path, monkeypatch, random_bundle) -> None:  # type: ignore[no-untyped-def]
    """A database of legacy digests: its owner rows hold old digests, and a stolen copy (one reward
    respelled) was accepted under them. Opened by the current server, the first submitter owns the work again,
    the copy keeps its row and numbers but owns nothing, and no further copy gets in."""
    _old_database_is_migrated(f"sqlite:///{tmp_path / 'old.db'}", monkeypatch, random_bundle)


def test_a_postgres_database_of_old_digests_is_migrated(pg_cluster, monkeypatch, random_bundle) -> None:  # type: ignore[no-untyped-def]
    import uuid

    import psycopg2

    name = f"lb_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(pg_cluster.format(db="postgres").replace("postgresql+psycopg2", "postgresql"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name}")
    try:
        _old_database_is_migrated(pg_cluster.format(db=name), monkeypatch, random_bundle)
    finally:
        admin.cursor().execute(f"DROP DATABASE {name}")
        admin.close()


def _old_database_is_migrated(url: str, monkeypatch, random_bundle) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import delete, select

    from leaderboard.server import provenance
    from leaderboard.server.app import ServerConfig, create_app
    from leaderboard.server.db import EpisodeOwner, Migration
    from tests.support.leaderboard import VAULT

    def serve():  # type: ignore[no-untyped-def]
        app = create_app(ServerConfig(db_url=url, boards=(VAULT,), verify=False))
        return app.test_client(), app.extensions["sapo_gym"]["store"]

    client, store = serve()
    alice, bob, carol = ({"Authorization": f"Bearer {store.create_token(n)[1]}"} for n in ("alice", "bob", "carol"))
    with monkeypatch.context() as old_code:  # the old server: old digests, and the copy admitted under them
        old_code.setattr(provenance, "works_of", lambda bundle: [_old_digest(bundle)])  # one digest per whole bundle
        first = client.post("/api/v1/submissions", data=body(random_bundle), headers=alice).json["id"]
        stolen = client.get(f"/api/v1/submissions/{first}/bundle").json
        i = _zero_episode(stolen)
        stolen["episodes"][i]["turns"][0]["reward"] = -0.0
        taken = client.post("/api/v1/submissions", data=body(named(stolen, "bobs agent")), headers=bob)
        assert taken.status_code == 201
        with store.session.begin() as s:  # a database from before the migration's table
            s.execute(delete(Migration))
            assert len(list(s.scalars(select(EpisodeOwner)))) == 2

    def numbers(st) -> list[tuple]:
        return [(r.id, r.success, r.score, r.episodes, r.aggregates_json, r.status) for r in st.submissions(limit=100)]

    before = numbers(store)
    store.engine.dispose()

    client, store = serve()  # today's server opens it
    assert numbers(store) == before  # no stored submission's numbers move
    with store.session() as s:
        owners = {o.digest: o.submission_id for o in s.scalars(select(EpisodeOwner))}
    assert owners == {work: first for work in provenance.works_of(random_bundle)}
    again = copy.deepcopy(stolen)
    again["episodes"][i]["turns"][0]["reward"] = 0
    for who in (bob, carol):
        r = client.post("/api/v1/submissions", data=body(named(again, "yet another name")), headers=who)
        assert r.status_code == 409 and f"submission {first}" in r.json["message"], r.json
    store.engine.dispose()
    _, store = serve()  # once migrated, a restart changes nothing
    with store.session() as s:
        assert {o.digest: o.submission_id for o in s.scalars(select(EpisodeOwner))} == owners
    store.engine.dispose()
