"""The board under gunicorn (``sapo_cli.leaderboard_wsgi``, docs/leaderboard.md): serve's settings through one
environment variable, several gunicorn workers on one PostgreSQL database, a submission and a live run across them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.support.leaderboard import ROOT, VAULT, body, pg_database
from tests.support.live_protocol import Client, stored_bundle, uninterrupted


def _gunicorn(db: str, log: Path, workers: int) -> tuple[subprocess.Popen, str]:
    """gunicorn on 127.0.0.1 (a free port it binds itself, read from its log) with ``workers`` gthread workers."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
           "SAPO_GYM_LEADERBOARD_ARGS": f"--db {db} --board {VAULT} serve --no-verify --rate-per-minute 0"}
    cmd = [sys.executable, "-m", "gunicorn", "--workers", str(workers), "--worker-class", "gthread", "--threads", "4",
           "--bind", "127.0.0.1:0", "--timeout", "60", "sapo_cli.leaderboard_wsgi:application()"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60  # each worker imports the app and builds its boards (a few seconds each)
    while time.monotonic() < deadline:
        found = re.search(r"Listening at: (http://127\.0\.0\.1:\d+)", log.read_text())
        booted = len(re.findall(r"Booting worker with pid", log.read_text()))
        if found and booted == workers:
            try:
                if requests.get(found.group(1) + "/api/v1/boards", timeout=5).status_code == 200:
                    return proc, found.group(1)
            except requests.RequestException:
                pass
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"gunicorn did not come up: {log.read_text()[-3000:]}")


def test_gunicorn_serves_the_board_from_serves_arguments(pg_cluster: str, tmp_path: Path, token_for, random_bundle) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("gunicorn")
    with pg_database(pg_cluster) as db:
        token = token_for(db)
        proc, url = _gunicorn(db, tmp_path / "gunicorn.log", workers=2)
        try:
            headers = {"Authorization": f"Bearer {token}"}
            sent = requests.post(url + "/api/v1/submissions", data=body(random_bundle), headers=headers, timeout=30)
            again = requests.post(url + "/api/v1/submissions", data=body(random_bundle), headers=headers, timeout=30)
            assert sent.status_code == 201 and again.json()["id"] == sent.json()["id"], (sent.text, again.text)
            assert requests.get(url + "/", timeout=30).status_code == 200
            client = Client(url, token, who="gunicorn: ")
            client.start()
            submission = None
            for _ in range(200):  # 16 Vault episodes end well within 200 steps
                submission = client.play(1)
                if submission is not None:
                    break
            assert submission is not None and submission["id"] is not None, submission
            stored = stored_bundle(db, submission["id"])
            assert stored == uninterrupted(stored, client.who)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    assert proc.returncode == 0, (tmp_path / "gunicorn.log").read_text()[-2000:]


def test_the_wsgi_entry_refuses_what_is_not_serve(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from sapo_cli.leaderboard_wsgi import ARGS_VARIABLE, application

    monkeypatch.delenv(ARGS_VARIABLE, raising=False)
    with pytest.raises(RuntimeError, match=ARGS_VARIABLE):
        application()
    with pytest.raises(RuntimeError, match="'serve' action"):
        application("--db sqlite:///x.db boards")
    with pytest.raises(RuntimeError, match="gunicorn, use its --workers"):
        application("--db sqlite:///x.db serve --workers 2")
