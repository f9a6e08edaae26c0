"""``sapo-gym env serve --workers N``: several server processes behind one address (nginx's upstream, least
connections first); each WebSocket session lives in one process, every HTTP session in the first; all of them under
the scheduling policy asked for."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from sapo_cli.deploy import nginx
from tests.support.deploy import nginx_or_skip

pytest.importorskip("openenv.core.env_server")

from sapo_gym.remote.client import SapoEnvClient  # noqa: E402
from sapo_gym.remote.server import ServeConfig, per_process  # noqa: E402
from sapo_gym.remote.wire_types import SapoAction  # noqa: E402
from tests.support.remote import http, served, served_process  # noqa: E402


def test_the_bounds_are_divided_among_the_processes_rounded_up() -> None:
    config = ServeConfig("sapo/Vault-v0", max_sessions=5, max_sessions_per_client=3, max_connections=9)
    each = per_process(config, 2)
    assert (each.max_sessions, each.max_sessions_per_client, each.max_connections) == (3, 2, 5)
    assert per_process(ServeConfig("sapo/Vault-v0"), 1) == ServeConfig("sapo/Vault-v0")
    assert per_process(ServeConfig("sapo/Vault-v0", max_sessions=4), 3).max_sessions_per_client is None
    with pytest.raises(ValueError):
        per_process(config, 0)


def test_nginx_accepts_the_config_with_every_process_upstream(tmp_path: Path) -> None:
    nginx_or_skip()
    (tmp_path / "temp").mkdir()
    config = nginx.FrontConfig(
        listen="127.0.0.1:8000",
        upstream=str(tmp_path / "app.sock"),
        max_body_bytes=1 << 20,
        peers=(str(tmp_path / "app-1.sock"), str(tmp_path / "app-2.sock")),
    )
    text = nginx.render(config, access_log="off")
    assert text.count(f"server unix:{tmp_path}/app") == 4  # three in the balanced group, the first again for sessions
    (tmp_path / "nginx.conf").write_text(text)
    nginx.check(tmp_path)


async def _play_two_then_refuse_a_third(url: str) -> list[str]:
    """Two sessions held at once each reset and take the expert's step; a third is refused (each of the two processes
    holds at most one). The outcomes, in order."""
    clients = [SapoEnvClient(base_url=url, message_timeout_s=60) for _ in range(3)]
    outcomes = []
    try:
        for client in clients[:2]:
            await client.connect()
            first = await client.reset(seed=0, options={"task_index": 1})
            step = await client.step(
                SapoAction(text=f"<think>the expert</think><action>{first.observation.expert_action}</action>")
            )
            outcomes.append(f"step {step.observation.step} valid {step.observation.is_action_valid}")
        try:
            await clients[2].connect()
            await clients[2].reset(seed=0)
            outcomes.append("third played")
        except Exception as exc:  # the server's CAPACITY_REACHED frame, raised by the client
            outcomes.append("third refused" if "CAPACITY_REACHED" in str(exc) else f"third failed: {exc}")
    finally:
        for client in clients:
            await client.close()
    return outcomes


def test_two_sessions_on_two_processes_through_one_address() -> None:
    with served("sapo/ALFWorld-Mini-v0", "--workers", "2", "--max-sessions", "2") as url:
        assert asyncio.run(_play_two_then_refuse_a_third(url)) == [
            "step 1 valid True",
            "step 1 valid True",
            "third refused",
        ]
        # an HTTP session lives in one process: every request naming it must reach that one
        status, body = http("POST", f"{url}/sessions")
        assert status == 201, body
        sid = body["session_id"]
        for _ in range(4):
            status, body = http("POST", f"{url}/sessions/{sid}/reset", json.dumps({"seed": 0}))
            assert status == 200, body
            status, body = http(
                "POST",
                f"{url}/sessions/{sid}/step",
                json.dumps({"action": {"text": "<think></think><action>look</action>"}}),
            )
            assert status == 200, body
        assert http("DELETE", f"{url}/sessions/{sid}")[0] in (200, 204)


def _descendants(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [d for c in children for d in (int(c), *_descendants(int(c)))]


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux scheduling policies")
@pytest.mark.parametrize(("args", "expected"), [((), "SCHED_BATCH"), (("--scheduling", "other"), "SCHED_OTHER")])
def test_the_server_and_nginx_run_under_the_scheduling_asked_for(args: tuple[str, ...], expected: str) -> None:
    """By default (batch) every process the command starts, both uvicorn processes and nginx's master and worker,
    runs under SCHED_BATCH; ``--scheduling other`` leaves Linux's default."""
    with served_process("sapo/Vault-v0", "--workers", "2", *args) as (url, proc):
        assert http("GET", url + "/health")[0] == 200
        processes = {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in _descendants(proc.pid)}
        assert sum(b"uvicorn" in cmd for cmd in processes.values()) == 2
        assert sum(b"nginx" in cmd for cmd in processes.values()) == 2  # master and worker
        assert {os.sched_getscheduler(pid) for pid in processes} == {getattr(os, expected)}
