"""The flask shop through its test client, and the CLI commands."""

from __future__ import annotations

import re

import pytest

from sapo_cli import build_parser, main
from sapo_gym.webshop.app import create_app
from sapo_gym.webshop.dataset import load_catalog
from sapo_gym.webshop.search import shared_index


@pytest.fixture(scope="module")
def client():
    catalog = load_catalog()
    app = create_app(catalog, shared_index(catalog), goal_range=catalog.goal_indices("test"))
    return app.test_client()


def _sid(response) -> str:
    return response.headers["Location"].rstrip("/").rsplit("/", 1)[-1]


def test_a_person_can_shop(client) -> None:
    sid = _sid(client.get("/start/0"))
    page = client.get(f"/s/{sid}").get_data(as_text=True)
    assert 'id="search_input"' in page and 'data-page="search"' in page
    state = client.application.extensions["webshop"]
    goal = state.sessions[sid].goal
    client.post(f"/s/{sid}/search", data={"q": goal.query})
    page = client.get(f"/s/{sid}").get_data(as_text=True)
    assert "Total results:" in page and 'data-nonce="1"' in page
    while (action := state.sessions[sid].oracle_action()) is not None:
        verb, arg = re.fullmatch(r"(search|click)\[(.+)\]", action).groups()
        client.post(f"/s/{sid}/{verb}", data={"q": arg} if verb == "search" else {"key": arg})
    page = client.get(f"/s/{sid}").get_data(as_text=True)
    assert 'data-page="done"' in page and 'data-score="1.0"' in page and "Thank you for shopping with us!" in page
    assert client.get(f"/s/{sid}/state.json").get_json()["score"] == 1.0


def test_bad_requests(client) -> None:
    assert client.get("/s/nope").status_code == 404
    assert client.get("/start/999999").status_code == 404
    sid = _sid(client.get("/start/1"))
    client.post(f"/s/{sid}/click", data={"key": "buy now"})  # not on the search page: nothing happens
    assert client.get(f"/s/{sid}/state.json").get_json() == {
        "page": "search",
        "nonce": 0,
        "score": 0.0,
        "breakdown": None,
    }
    assert client.get("/").status_code == 302


def test_cli_registers_webshop_serve_and_data() -> None:
    parser = build_parser()
    args = parser.parse_args(["webshop", "serve", "--port", "0", "--split", "train"])
    assert (args.port, args.split, args.host) == (0, "train", "127.0.0.1")
    assert parser.parse_args(["data", "webshop", "--generate", "x"]).generate == "x"


def test_data_cli_explains_validates_and_generates(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("SAPO_WEBSHOP_DATA", raising=False)
    assert main(["data", "webshop"]) == 0
    assert "non-commercial" in capsys.readouterr().out
    assert main(["data", "webshop", "--generate", str(tmp_path), "--num-products", "30"]) == 0
    assert main(["data", "webshop", "--data-dir", str(tmp_path)]) == 0
    assert "ok: 30 products, 60 goals" in capsys.readouterr().out
    assert main(["data", "webshop", "--data-dir", str(tmp_path / "missing")]) == 2


@pytest.mark.parametrize("agent, success", [("expert", "100.0%"), ("random", "0.0%")])
def test_evaluate_cli_expert_and_random(agent: str, success: str, capsys) -> None:
    assert main(["evaluate", "--env", "sapo/WebShop-v0", "--agent", agent, "--split", "test", "--limit", "40"]) == 0
    table = capsys.readouterr().out
    assert re.search(rf"^all\s+40\s+{re.escape(success)}", table, re.M), table


@pytest.mark.parametrize("split", ["test", "verl-agent-test"])
def test_serve_command_serves_pages(split: str) -> None:
    import subprocess
    import sys
    import urllib.request

    proc = subprocess.Popen(
        [sys.executable, "-m", "sapo_cli", "webshop", "serve", "--port", "0", "--split", split],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        with urllib.request.urlopen(url, timeout=10) as response:  # follows / -> /start/<goal> -> /s/<sid>
            page = response.read().decode()
        assert response.status == 200 and 'id="search_input"' in page and "Instruction:" in page
    finally:
        proc.terminate()
        proc.wait(timeout=10)
