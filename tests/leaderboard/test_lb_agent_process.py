"""The board marks how the submitter's harness ran the agent (``evaluation.harness.agent_process``): isolated in a
process of its own, or in the harness's."""

from __future__ import annotations

import copy
import re
from pathlib import Path

from sqlalchemy import inspect, text

from leaderboard.server.db import make_engine
from leaderboard.server.worker import Verifier
from sapo_cli import main
from tests.support.leaderboard import body


def test_the_board_shows_how_the_harness_ran_the_agent(client, store, auth, random_bundle, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ids = {}
    for process in ("auto", "in-process"):  # a module:Class spec: auto isolates it
        out = tmp_path / f"{process}.json"
        assert (
            main(
                [
                    "evaluate",
                    "--env",
                    "sapo/Vault-v0",
                    "--split",
                    "test",
                    "--agent",
                    "agents.baselines:RandomAgent",
                    "--agent-process",
                    process,
                    "--agent-name",
                    f"random {process}",
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
        r = client.post("/api/v1/submissions", data=out.read_bytes(), headers=auth)
        assert r.status_code == 201, r.json
        ids[process] = r.json["id"]
    assert (
        "agent_process" not in random_bundle["evaluation"]["harness"]
    )  # bundles from before the field: format 1 still
    ids["unrecorded"] = client.post("/api/v1/submissions", data=body(random_bundle), headers=auth).json["id"]
    assert Verifier(store).drain() == 3  # replay does not depend on the claim
    marks = store.marks([store.get(i) for i in ids.values()])
    assert {k: marks[ids["auto"]][k] for k in ("baseline", "privileged", "live", "agent_process")} == {
        "baseline": False,
        "privileged": False,
        "live": False,
        "agent_process": "isolated",
    }
    assert marks[ids["in-process"]]["agent_process"] == "in-process" and "agent_process" not in marks[ids["unrecorded"]]
    record = client.get(f"/api/v1/submissions/{ids['auto']}").json
    assert record["status"] == "verified" and record["marks"]["agent_process"] == "isolated"
    page = client.get(f"/board/{random_bundle['env']['spec_hash']}").text
    rows = dict(re.findall(r'<tr data-id="(\d+)">(.*?)</tr>', page, flags=re.S))
    assert (
        'class="badge isolated"' in rows[str(ids["auto"])] and 'class="badge in-process"' not in rows[str(ids["auto"])]
    )
    assert (
        'class="badge in-process"' in rows[str(ids["in-process"])]
        and 'class="badge isolated"' not in rows[str(ids["in-process"])]
    )
    assert (
        "badge isolated" not in rows[str(ids["unrecorded"])] and "badge in-process" not in rows[str(ids["unrecorded"])]
    )
    assert "it could still look up a public game" in page  # what the mark does not establish, said on the board
    assert 'class="badge isolated"' in client.get(f"/submission/{ids['auto']}").text


def test_an_unknown_agent_process_is_a_schema_violation(client, auth, random_bundle) -> None:  # type: ignore[no-untyped-def]
    bad = copy.deepcopy(random_bundle)
    bad["evaluation"]["harness"]["agent_process"] = "sandboxed"
    r = client.post("/api/v1/submissions", data=body(bad), headers=auth)
    assert r.status_code == 422 and "agent_process" in r.json["message"], r.json


def test_a_database_made_before_the_claims_table_opens_and_gets_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE harness_claims"))
    engine.dispose()
    engine = make_engine(url)  # what a server started on an older database does
    assert "harness_claims" in inspect(engine).get_table_names()
    engine.dispose()
