"""``evaluate --out`` says before the first request whether the bundle can land on a board, and why not."""

from __future__ import annotations

import gymnasium as gym

import sapo_gym  # noqa: F401
from leaderboard.landing import board_verdict
from sapo_cli import main


def _spec(**kwargs):  # type: ignore[no-untyped-def]
    env = gym.make("sapo/Vault-v0", split="test", **kwargs)
    try:
        return env.unwrapped.spec_fields(), env.unwrapped.spec_hash()
    finally:
        env.close()


def test_the_board_and_every_reason_it_refuses() -> None:
    fields, spec_hash = _spec()
    verdict = board_verdict("sapo/Vault-v0", "test", fields, spec_hash, "every-task", False)
    assert verdict.lands and verdict.board == "sapo/Vault-v0:test"
    limited = board_verdict("sapo/Vault-v0", "test", fields, spec_hash, "verl-agent", True)
    assert (
        not limited.lands
        and any("every-task" in r for r in limited.reasons)
        and any("--limit" in r for r in limited.reasons)
    )
    tool_fields, tool_hash = _spec(protocol="tool-call-v1")
    tools = board_verdict("sapo/Vault-v0", "test", tool_fields, tool_hash, "every-task", False)
    assert not tools.lands and "protocol 'tool-call-v1' (the board's: 'verl-agent-v1')" in tools.describe(tool_hash)
    nowhere = board_verdict("sapo/Vault-v0", "train", fields, spec_hash, "every-task", False)
    assert nowhere.board is None and "no board hosts sapo/Vault-v0 split 'train'" in nowhere.reasons[-1]


def test_strict_board_refuses_before_the_agent_is_built(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "b.json"
    rc = main(
        [
            "evaluate",
            "--env",
            "sapo/Vault-v0",
            "--agent",
            "tests.support.scripted_agent:ScriptedAgent",
            "--limit",
            "2",
            "--out",
            str(out),
            "--strict-board",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "--strict-board" in err and "--limit" in err and not out.exists()
    assert main(["evaluate", "--env", "sapo/Vault-v0", "--agent", "expert", "--limit", "2", "--out", str(out)]) == 0
    assert "cannot land on a board: --limit" in capsys.readouterr().err and out.exists()
