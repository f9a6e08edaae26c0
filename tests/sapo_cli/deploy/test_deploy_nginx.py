"""The shipped nginx config and the serve commands' supervisor: every field filled, the config nginx accepts, the
refusals (bad settings, nginx missing), children stopped in order on a signal and all stopped when one exits."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from sapo_cli import main
from sapo_cli.deploy import nginx
from sapo_cli.deploy.supervise import Supervisor
from tests.support.deploy import nginx_or_skip


def _config(**changes: object) -> nginx.FrontConfig:
    fields = {
        "listen": "127.0.0.1:8000",
        "upstream": "/run/sapo/app.sock",
        "max_body_bytes": 1 << 20,
        "header_timeout": 1.5,
        "client_timeout": 30.0,
        "per_client": 7,
        "upstream_timeout": 125.0,
        "drain_seconds": 0.0,
    }
    return nginx.FrontConfig(**{**fields, **changes})  # type: ignore[arg-type]


def test_every_field_of_the_template_is_filled() -> None:
    text = nginx.render(_config(), access_log="off")
    assert "{{" not in text and "}}" not in text
    for line in (
        "listen 127.0.0.1:8000;",
        "server unix:/run/sapo/app.sock;",
        "client_max_body_size 1048576;",
        "client_header_timeout 1500ms;",
        "client_body_timeout 30000ms;",
        "send_timeout 30000ms;",
        "limit_conn per_client 7;",
        "proxy_read_timeout 125000ms;",
        "worker_shutdown_timeout 1ms;",
        "access_log off;",
        f"worker_connections {nginx.connection_limits()[1]};",
        "proxy_request_buffering on;",
    ):
        assert re.search(rf"^\s*{re.escape(line)}", text, re.M), line
    assert ("user root;" in text) == (os.geteuid() == 0)


def test_connections_stay_within_the_open_file_limit(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(nginx.resource, "getrlimit", lambda which: (1024, 1024))
    assert nginx.connection_limits() == (1024, 480)  # two files a connection, 64 spare
    monkeypatch.setattr(nginx.resource, "getrlimit", lambda which: (1024, nginx.resource.RLIM_INFINITY))
    assert nginx.connection_limits() == (2 * nginx.WORKER_CONNECTIONS + 64, nginx.WORKER_CONNECTIONS)


@pytest.mark.parametrize(
    "changes",
    [
        {"header_timeout": 0},
        {"client_timeout": -1.0},
        {"upstream_timeout": 0},
        {"per_client": 0},
        {"max_body_bytes": 0},
        {"drain_seconds": -1.0},
    ],
)
def test_bad_settings_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        _config(**changes)


def test_nginx_accepts_the_rendered_config(tmp_path: Path) -> None:
    nginx_or_skip()
    (tmp_path / "temp").mkdir()
    (tmp_path / "nginx.conf").write_text(nginx.render(_config(upstream=str(tmp_path / "app.sock"))))
    nginx.check(tmp_path)
    (tmp_path / "nginx.conf").write_text(nginx.render(_config()).replace("limit_conn per_client", "limit_conn nowhere"))
    with pytest.raises(ValueError, match="nginx refused"):
        nginx.check(tmp_path)


def test_without_nginx_both_serve_commands_name_the_debian_package(monkeypatch, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(nginx.shutil, "which", lambda name: None)
    monkeypatch.setattr(nginx.os, "access", lambda path, mode: False)
    assert (
        main(["leaderboard", "--db", str(tmp_path / "lb.db"), "--board", "sapo/Vault-v0:test", "serve", "--port", "0"])
        == 2
    )
    assert "apt-get install nginx" in capsys.readouterr().err
    pytest.importorskip("openenv.core.env_server")
    assert main(["env", "serve", "sapo/Vault-v0", "--port", "0"]) == 2
    assert "apt-get install nginx" in capsys.readouterr().err


def _sleeper(log: Path, name: str) -> list[str]:
    """A child that writes ``name SIGNAL`` to ``log`` when signalled, then exits."""
    code = (
        f"import signal, sys, time\n"
        f"def stop(n, f):\n    open({str(log)!r}, 'a').write({name!r} + ' ' + signal.Signals(n).name + '\\n'); sys.exit(0)\n"
        f"signal.signal(signal.SIGTERM, stop); signal.signal(signal.SIGQUIT, stop)\n"
        f"open({str(log)!r}, 'a').write({name!r} + ' up\\n')\ntime.sleep(60)\n"
    )
    return [sys.executable, "-c", code]


def _wait_for(log: Path, lines: int) -> None:
    deadline = time.monotonic() + 30
    while (len(log.read_text().splitlines()) if log.exists() else 0) < lines:
        assert time.monotonic() < deadline, "the children did not start"
        time.sleep(0.05)


def test_a_signal_stops_the_children_last_started_first(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with Supervisor(drain_seconds=5.0) as supervisor:
        app = supervisor.start("app", _sleeper(log, "app"), signal.SIGTERM).proc
        front = supervisor.start("front", _sleeper(log, "front"), signal.SIGQUIT).proc
        _wait_for(log, 2)
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
        assert supervisor.run() == 0
    assert log.read_text().splitlines()[2:] == ["front SIGQUIT", "app SIGTERM"]
    assert app.returncode == front.returncode == 0


def test_a_child_that_exits_stops_the_other(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with Supervisor(drain_seconds=5.0) as supervisor:
        app = supervisor.start("app", _sleeper(log, "app"), signal.SIGTERM).proc
        supervisor.start("front", [sys.executable, "-c", "import time; time.sleep(0.5)"], signal.SIGQUIT)
        _wait_for(log, 1)
        assert supervisor.run() == 1
    assert log.read_text().splitlines()[1:] == ["app SIGTERM"] and app.returncode == 0
