"""Only verified submissions are ranked (board, index, API); pending ones are listed apart, failed
ones only on their own page; ranks count every verified row of the board; task types are the board's."""

from __future__ import annotations

import re

from leaderboard.server.worker import Verifier
from tests.support.leaderboard import body, bulk_verified, named, refresh, snapshot


def _forged_winner(bundle):  # type: ignore[no-untyped-def]
    """A bundle that claims every task was won; its replay fails (the observations are made up)."""
    forged = named(bundle, "forged winner")
    for ep in forged["episodes"]:
        ep["success"], ep["score"] = True, 1.0
        ep["turns"][-1]["observation"] = "Click. The vault opens."
    return refresh(forged)


def _board_names(html: str) -> list[str]:
    table = html.split('<table id="board"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<td class="agent"><a href="/submission/\d+">([^<]+)</a>', table)


def test_failed_submissions_are_not_ranked_anywhere_and_pending_ones_are_apart(
    client, auth, store, vault_board, expert_bundle, random_bundle
) -> None:  # type: ignore[no-untyped-def]
    honest = client.post("/api/v1/submissions", data=body(random_bundle), headers=auth).json["id"]
    forged = client.post("/api/v1/submissions", data=body(_forged_winner(random_bundle)), headers=auth).json["id"]
    assert Verifier(store).drain() == 2
    assert client.get(f"/api/v1/submissions/{forged}").json["status"] == "failed"
    waiting = client.post("/api/v1/submissions", data=body(expert_bundle), headers=auth).json["id"]  # stays pending
    page = client.get(f"/board/{vault_board.spec_hash}").text
    assert _board_names(page) == ["random agent"]
    assert "forged winner" not in page
    pending = page.split('id="pending"', 1)[1]
    assert "expert agent" in pending and f"/submission/{waiting}" in pending
    assert "forged winner" not in client.get("/", follow_redirects=True).text
    listing = client.get("/api/v1/submissions").json["submissions"]
    assert [(s["id"], s["rank"]) for s in listing] == [(honest, 1), (waiting, None)]  # verified first; failed left out
    failed = client.get("/api/v1/submissions?status=failed").json["submissions"]
    assert [(s["id"], s["rank"]) for s in failed] == [(forged, None)]
    assert {s["id"] for s in client.get("/api/v1/submissions?status=all").json["submissions"]} == {
        honest,
        forged,
        waiting,
    }
    assert client.get("/api/v1/submissions?status=bogus").status_code == 400
    own_page = client.get(f"/submission/{forged}").text
    assert "forged winner" in own_page and "&#10007; failed" in own_page
    assert client.get(f"/api/v1/submissions/{forged}").json["rank"] is None
    assert client.get(f"/api/v1/submissions/{honest}").json["rank"] == 1


def test_ranks_count_every_verified_row_not_only_the_loaded_ones(
    client, auth, store, vault_board, random_bundle
) -> None:  # type: ignore[no-untyped-def]
    first = client.post("/api/v1/submissions", data=body(random_bundle), headers=auth).json["id"]
    n = 600
    bulk_verified(store, first, n)
    listing = client.get("/api/v1/submissions?sort=agent&order=asc&limit=3").json["submissions"]
    assert [(s["agent"]["name"], s["rank"]) for s in listing] == [
        ("agent 000", n),
        ("agent 001", n - 1),
        ("agent 002", n - 2),
    ]
    page = client.get(f"/board/{vault_board.spec_hash}?sort=agent&order=asc").text
    ranks = [int(r) for r in re.findall(r'<td class="rank">(\d+)</td>', page)]
    names = _board_names(page)
    assert names[:2] == ["agent 000", "agent 001"] and ranks[:2] == [n, n - 1]
    assert all(rank == n - int(name.split()[1]) for name, rank in zip(names, ranks))
    best = client.get(f"/board/{vault_board.spec_hash}").text
    assert _board_names(best)[0] == "agent 599" and re.search(r'<td class="rank">1</td>', best)
    assert "agent 599" in client.get("/", follow_redirects=True).text


def test_task_type_must_be_the_boards(client, auth, store, random_bundle) -> None:  # type: ignore[no-untyped-def]
    for i, ep in enumerate(random_bundle["episodes"]):
        ep["task_type"] = f"made-up-{i}"  # 16 new category columns, if admitted
    before = snapshot(store)
    r = client.post("/api/v1/submissions", data=body(refresh(random_bundle)), headers=auth)
    assert r.status_code == 422 and "task_type" in r.json["message"] and "code2" in r.json["message"], r.json
    assert snapshot(store) == before
