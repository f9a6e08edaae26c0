"""The served app driven in process: its sessions play expert episodes through the app's ``/ws`` handler and the
report holds a row a session count."""

from __future__ import annotations

import pytest

pytest.importorskip("openenv.core.env_server")
pytest.importorskip("uvloop")

from benchmarks import env_app_in_process  # noqa: E402


def test_each_session_count_reports_its_cost_a_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert env_app_in_process.main(["--sessions", "1,3", "--steps", "40", "--warm-steps", "10"]) == 0
    rows = [line.strip("| ").split(" | ") for line in capsys.readouterr().out.strip().splitlines()[-2:]]
    assert [row[0] for row in rows] == ["1", "3"]
    for _, per_step, driver in rows:
        # the driver's JSON is part of each step's cost, so it is less than the whole; both are some work
        assert 0 < float(driver) < float(per_step), rows


def test_an_answer_that_is_not_an_observation_fails_the_run() -> None:
    """A session that gets an error frame raises (the run is not reported as if it had played)."""

    async def refusing_app(scope, receive, send):  # type: ignore[no-untyped-def]
        await receive()
        await send({"type": "websocket.accept"})
        await receive()
        await send({"type": "websocket.send", "text": '{"type": "error", "data": {"message": "no"}}'})

    import uvloop

    with pytest.raises(RuntimeError, match="answered"):
        uvloop.run(env_app_in_process.run(refusing_app, 1, steps=10, warm=5))
