"""``submit --live`` takes the same agent settings as ``evaluate`` and records them with the live run's agent."""

from __future__ import annotations

from pathlib import Path

import requests

from tests.support.fake_openai import FakeOpenAI


def test_live_run_with_openai_settings_records_them(tmp_path: Path, make_server, token_for, capsys) -> None:  # type: ignore[no-untyped-def]
    from sapo_cli import main

    db = f"sqlite:///{tmp_path / 'lb.db'}"
    token = token_for(db)
    server = make_server(db).start()
    with FakeOpenAI() as fake:
        rc = main(
            [
                "submit",
                "--live",
                "--agent",
                f"openai:{fake.url}#m",
                "--env",
                "sapo/Vault-v0",
                "--server",
                server.url,
                "--token",
                token,
                "--agent-name",
                "live openai",
                "--temperature",
                "0",
                "--max-tokens",
                "32",
                "--no-request-seed",
            ]
        )
        bodies = [r["body"] for r in fake.requests]
    out = capsys.readouterr().out
    assert rc == 0 and "16 episodes played" in out, out
    assert all(b["temperature"] == 0 and b["max_tokens"] == 32 and "seed" not in b for b in bodies)
    sid = int(out.rsplit("/submission/", 1)[1].split()[0])
    detail = requests.get(f"{server.url}/api/v1/submissions/{sid}", timeout=30).json()
    assert detail["agent"]["generation"]["temperature"] == 0 and detail["agent"]["generation"]["max_tokens"] == 32
