"""``sapo-gym leaderboard token|boards|seed|verify|serve`` and ``sapo-gym submit`` end to end."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import requests

from leaderboard.server.store import Store
from sapo_cli import main


def test_token_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "t.db")
    assert main(["leaderboard", "--db", db, "token", "create", "alice"]) == 0
    token = capsys.readouterr().out.strip().splitlines()[-1]
    assert token.startswith("sgl_")
    store = Store(f"sqlite:///{db}")
    assert store.authenticate(token).name == "alice"
    assert main(["leaderboard", "--db", db, "token", "list"]) == 0
    assert "alice" in capsys.readouterr().out and token not in Path(db).read_bytes().decode("latin-1")
    assert main(["leaderboard", "--db", db, "token", "revoke", "1"]) == 0
    assert store.authenticate(token) is None
    assert main(["leaderboard", "--db", db, "token", "revoke", "7"]) == 2  # clear error, no traceback
    assert "no token 7" in capsys.readouterr().err


def test_boards_command_lists_spec_hash_and_unavailable(capsys: pytest.CaptureFixture[str], vault_board) -> None:  # type: ignore[no-untyped-def]
    assert main(["leaderboard", "--board", "sapo/Vault-v0:test", "--board", "sapo/Vault-v0:nosuch", "boards"]) == 0
    out = capsys.readouterr().out
    assert vault_board.spec_hash in out and "unavailable: sapo/Vault-v0:nosuch" in out and "valid choices" in out


def test_a_board_named_by_its_env_alone_hosts_that_envs_boards(capsys: pytest.CaptureFixture[str], vault_board) -> None:  # type: ignore[no-untyped-def]
    """``--board sapo/Vault-v0`` (no ``:SPLIT``) was read as env id '' and failed in gymnasium; it is the env's boards."""
    from leaderboard.boards import EVAL_SPLITS

    assert main(["leaderboard", "--board", "sapo/Vault-v0", "--board", " sapo/Vault-v0:test ", "boards"]) == 0
    out = capsys.readouterr().out
    assert "unavailable" not in out and "Malformed" not in out
    assert [line.split()[:2] for line in out.splitlines()] == [
        ["sapo/Vault-v0", s] for s in EVAL_SPLITS["sapo/Vault-v0"]
    ]
    assert vault_board.spec_hash in out


def test_an_env_without_boards_named_alone_says_why_it_has_none(capsys: pytest.CaptureFixture[str]) -> None:
    """``--board sapo/WebShop-Browser-v0`` hosted nothing and said nothing; it is now reported as skipped, with why."""
    assert (
        main(["leaderboard", "--board", "sapo/WebShop-Browser-v0", "--board", "sapo/WebShop-Browser-v0:test", "boards"])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[1] for line in lines] == ["sapo/WebShop-Browser-v0", "sapo/WebShop-Browser-v0:test"]
    assert all(line.startswith("unavailable: ") and "replayed on sapo/WebShop-v0's boards" in line for line in lines)


def test_seed_then_verify_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.db")
    assert main(["leaderboard", "--db", db, "--board", "sapo/Vault-v0:test", "seed"]) == 0
    store = Store(f"sqlite:///{db}")
    assert [r.status for r in store.submissions()] == ["pending", "pending"]
    assert main(["leaderboard", "--db", db, "verify"]) == 0
    assert "verified 2 submission(s)" in capsys.readouterr().out
    assert sorted((r.agent_name, r.status) for r in store.submissions()) == [
        ("expert (oracle)", "verified"),
        ("random (admissible)", "verified"),
    ]


@pytest.mark.slow
def test_evaluate_submit_wait_against_a_live_server(
    tmp_path: Path, make_server, token_for, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'live.db'}"
    token = token_for(db)
    server = make_server(db, "--seed").start()
    bundle = tmp_path / "b.json"
    # seeds 1 and 2: at seed 0 the built-in random agent plays the seeded baseline's own episodes (its work, not ours)
    assert (
        main(
            [
                "evaluate",
                "--env",
                "sapo/Vault-v0",
                "--split",
                "test",
                "--agent",
                "random",
                "--seeds",
                "1,2",
                "--out",
                str(bundle),
                "--agent-name",
                "cli agent",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["submit", str(bundle), "--server", server.url, "--token", token, "--wait", "--timeout", "60"]) == 0
    out = capsys.readouterr().out
    sid = re.search(r"accepted as submission (\d+) ", out).group(1)
    assert "replay verification: verified: all 32 episodes reproduced exactly" in out
    assert main(["submit", str(bundle), "--server", server.url, "--token", token]) == 0
    assert f"already stored as submission {sid} " in capsys.readouterr().out
    assert main(["submit", str(bundle), "--server", server.url, "--token", "sgl_wrong"]) == 1
    assert "rejected: HTTP 401: invalid or revoked token" in capsys.readouterr().out
    deadline = time.monotonic() + 60
    while (
        len(rows := requests.get(server.url + "/api/v1/submissions", timeout=10).json()["submissions"]) < 3
        and time.monotonic() < deadline
    ):
        time.sleep(0.2)  # the baselines are seeded in the background
    names = [r["agent"]["name"] for r in rows]  # best success first
    assert names[0] == "expert (oracle)" and sorted(names) == ["cli agent", "expert (oracle)", "random (admissible)"]
    assert json.loads(bundle.read_text())["evaluation"]["seeds"] == [1, 2]


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://board:s3cr3t-pw@db.internal:5432/lb",
        "postgresql+psycopg://board:s3cr3t-pw%40x@127.0.0.1/lb?sslmode=require",
        "postgresql://board:s3cr3t-pw@/lb?host=/tmp/pg",
        "not a url but s3cr3t-pw",
    ],
)
def test_the_start_up_line_never_shows_the_database_password(url: str) -> None:
    from leaderboard.server.db import shown_url

    shown = shown_url(url)
    assert "s3cr3t" not in shown
    if url.startswith("postgresql"):
        assert shown.startswith(url.split("://")[0] + "://board:***@")  # the rest is still there to read


def test_a_url_without_a_password_is_shown_as_given() -> None:
    from leaderboard.server.db import shown_url

    assert shown_url("sqlite:////var/lib/board.db") == "sqlite:////var/lib/board.db"
    assert shown_url("postgresql://board@127.0.0.1/lb") == "postgresql://board@127.0.0.1/lb"
