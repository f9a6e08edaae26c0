"""``sapo-gym env serve``: its flags, its refusals, and a served env played through its printed address."""

from __future__ import annotations

import sys

import pytest

from sapo_cli import build_parser, main


def test_serve_flags_parse() -> None:
    args = build_parser().parse_args(
        [
            "env",
            "serve",
            "sapo/ALFWorld-v0",
            "--port",
            "0",
            "--env-arg",
            "split=train",
            "--env-arg",
            "data_dir=embedded",
            "--max-sessions",
            "3",
            "--idle-timeout",
            "0",
        ]
    )
    assert (args.env_id, args.port, args.env_arg, args.max_sessions, args.idle_timeout) == (
        "sapo/ALFWorld-v0",
        0,
        ["split=train", "data_dir=embedded"],
        3,
        0.0,
    )
    assert args.host == "127.0.0.1" and not args.public_only


def test_serve_refuses_unknown_ids_and_malformed_args(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "serve", "sapo/Nope-v0"]) == 2
    assert "valid choices" in capsys.readouterr().err
    pytest.importorskip("openenv.core.env_server")
    assert main(["env", "serve", "sapo/Vault-v0", "--env-arg", "novalue"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    assert main(["env", "serve", "sapo/Vault-v0", "--max-sessions", "0"]) == 2


@pytest.mark.parametrize("missing", ["uvloop", "httptools"])
def test_serve_names_a_missing_server_piece_before_starting(
    missing: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """uvicorn runs in a process of its own with --loop uvloop --http httptools: without one of them the command says
    which and how to install it, instead of starting a server that dies."""
    monkeypatch.setitem(sys.modules, missing, None)  # `import missing` now raises ModuleNotFoundError
    from sapo_cli.deploy import serve as deploy

    def started(*args: object) -> int:
        raise AssertionError("a server was started without " + missing)

    monkeypatch.setattr(deploy, "run", started)
    assert main(["env", "serve", "sapo/Vault-v0", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert missing in err and "serve extra" in err


@pytest.mark.timeout(120)
def test_a_served_env_plays_through_the_printed_address() -> None:
    pytest.importorskip("openenv.core.env_server")
    import gymnasium as gym

    import sapo_gym  # noqa: F401
    from tests.support.remote import expert_episode, served

    with served("sapo/Vault-v0", "--env-arg", "split=test", "--max-sessions", "1") as url:
        assert url.startswith("http://127.0.0.1:")
        remote = gym.make("sapo/Remote-v0", url=url, env_id="sapo/Vault-v0")
        try:
            assert remote.unwrapped.split == "test"
            assert expert_episode(remote, 4) == expert_episode(gym.make("sapo/Vault-v0", split="test"), 4)
        finally:
            remote.close()


@pytest.mark.timeout(120)
def test_evaluate_plays_a_served_env_through_remote_v0(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    pytest.importorskip("openenv.core.env_server")
    import json

    from tests.support.remote import served

    with served("sapo/Vault-v0", "--env-arg", "split=test", "--max-sessions", "2") as url:
        out = tmp_path / "remote.json"
        assert (
            main(
                [
                    "evaluate",
                    "--env",
                    "sapo/Remote-v0",
                    "--env-arg",
                    f"url={url}",
                    "--env-arg",
                    "env_id=sapo/Vault-v0",
                    "--agent",
                    "expert",
                    "--batch-size",
                    "2",
                    "--json",
                    str(out),
                ]
            )
            == 0
        )
    local = tmp_path / "local.json"
    assert (
        main(
            [
                "evaluate",
                "--env",
                "sapo/Vault-v0",
                "--split",
                "test",
                "--agent",
                "expert",
                "--batch-size",
                "2",
                "--json",
                str(local),
            ]
        )
        == 0
    )
    remote_run, local_run = json.loads(out.read_text()), json.loads(local.read_text())
    assert remote_run["summary"] == local_run["summary"]  # the served env's 16 test codes, played remotely
    assert len(remote_run["episodes"]) == 16 and all(e["success"] for e in remote_run["episodes"])


@pytest.mark.timeout(120)
def test_a_client_offering_compression_gets_plain_frames() -> None:
    """A client that offers permessage-deflate (the websockets library does by default) is answered without the
    extension through nginx and uvicorn, and plays on uncompressed frames."""
    pytest.importorskip("openenv.core.env_server")
    import asyncio
    import json

    from websockets.asyncio.client import connect

    from tests.support.remote import served

    async def reset_once(ws_url: str) -> tuple[str | None, list[object], dict]:
        async with connect(ws_url, compression="deflate") as ws:
            offered = ws.request.headers.get("Sec-WebSocket-Extensions")
            assert offered is not None and "permessage-deflate" in offered
            await ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
            answer = json.loads(await ws.recv())
            return ws.response.headers.get("Sec-WebSocket-Extensions"), list(ws.protocol.extensions), answer

    with served("sapo/Vault-v0", "--env-arg", "split=test", "--max-sessions", "1") as url:
        accepted, extensions, answer = asyncio.run(reset_once(url.replace("http://", "ws://") + "/ws"))
    assert accepted is None and extensions == []
    assert answer["type"] == "observation" and answer["data"]["done"] is False
