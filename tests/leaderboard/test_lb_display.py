"""User text on the pages: display names belong to their first token (twins included), the board shows who
submitted, bidi controls never reorder the page, and a very long word does not stretch the table."""

from __future__ import annotations

from typing import Any

from leaderboard.server.display import name_key, user_text
from tests.support.leaderboard import body, named


def _token(store: Any, name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {store.create_token(name)[1]}"}


def test_name_keys_fold_case_spacing_and_unicode_forms() -> None:
    assert (
        name_key("My Agent")
        == name_key("  my   AGENT ")
        == name_key("Ｍｙ Ａｇｅｎｔ")
        == name_key("My\u202eAgent".replace("\u202e", " "))
    )
    assert name_key("My\u200bAgent") == name_key("MyAgent") != name_key("My Agent")
    assert str(user_text("a\u202eb<i>")) == "<bdi>ab&lt;i&gt;</bdi>"
    assert str(user_text("x" * 2000, 100)) == "<bdi>" + "x" * 99 + "\u2026</bdi>"


def test_another_token_cannot_take_a_display_name_or_its_twin(store, client, expert_bundle, random_bundle) -> None:  # type: ignore[no-untyped-def]
    alice, mallory = _token(store, "alice"), _token(store, "mallory")
    first = client.post("/api/v1/submissions", data=body(named(expert_bundle, "My Agent")), headers=alice)
    assert first.status_code == 201
    for twin in ("My Agent", "my agent", "MY  AGENT", "my agent ", "my Agent"):
        taken = client.post("/api/v1/submissions", data=body(named(random_bundle, twin)), headers=mallory)
        assert taken.status_code == 409 and taken.json["error"] == "name_taken", (twin, taken.json)
        assert "alice" in taken.json["message"]
    run = client.post(
        "/api/v1/live/runs",
        json={"env_id": "sapo/Vault-v0", "split": "test", "agent": {"name": "my agent"}},
        headers=mallory,
    )
    assert run.status_code == 409 and "already used" in run.json["message"], run.json
    own = client.post("/api/v1/submissions", data=body(named(random_bundle, "MY AGENT")), headers=alice)
    assert own.status_code == 201  # the owner may use its name again


def test_the_board_shows_the_submitter_isolates_bidi_and_bounds_long_words(
    store, client, expert_bundle, vault_board
) -> None:  # type: ignore[no-untyped-def]
    from leaderboard.server.worker import Verifier

    auth = _token(store, "eve\u202etnemmoc")
    bundle = named(expert_bundle, "bidi agent")
    bundle["agent"]["description"] = "safe \u202egnp.exe\u202c text"
    bundle["agent"]["model"] = "W" * 2000
    sid = client.post("/api/v1/submissions", data=body(bundle), headers=auth).json["id"]
    assert Verifier(store).drain() == 1
    board = client.get(f"/board/{vault_board.spec_hash}").get_data(as_text=True)
    page = client.get(f"/submission/{sid}").get_data(as_text=True)
    for html in (board, page):
        assert "\u202e" not in html and "\u202c" not in html
        assert "<bdi>evetnemmoc</bdi>" in html  # the submitter, shown on the board too
    assert "<bdi>bidi agent</bdi>" in page and '<td class="agent"><a href="/submission/' in board
    assert "W" * 2000 not in board and "W" * 100 in board  # cut on the board, whole on its own page
    assert "<bdi>safe gnp.exe text</bdi>" in page


def test_names_used_before_they_were_owned_go_to_their_first_token(tmp_path, expert_bundle, random_bundle) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import delete

    from leaderboard.boards import BoardRegistry
    from leaderboard.server import names
    from leaderboard.server.db import DisplayName, Migration
    from leaderboard.server.names import NameTaken
    from leaderboard.server.store import Store
    from tests.support.leaderboard import VAULT

    url = f"sqlite:///{tmp_path / 'old.db'}"
    store, board = Store(url), next(iter(BoardRegistry([VAULT])))
    alice, _ = store.create_token("alice")
    mallory, _ = store.create_token("mallory")
    store.add(named(expert_bundle, "Old Name"), board, "alice", alice)
    with store.session.begin() as s:  # a database from before display names were owned
        s.execute(delete(DisplayName))
        s.execute(delete(Migration).where(Migration.name == names.MIGRATION))
    store.engine.dispose()
    store = Store(url)
    try:
        store.add(named(random_bundle, "old  name"), board, "mallory", mallory)
    except NameTaken:
        pass
    else:
        raise AssertionError("a name used before the table existed was taken by another token")
    finally:
        store.engine.dispose()
