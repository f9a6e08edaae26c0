"""The vLLM test server's start-up (``tests/support/vllm_server.py``) against a stand-in for vLLM: a port found free
can be taken before vLLM binds it (~30 s later), and the process that took it may answer health checks itself."""

from __future__ import annotations

import http.server
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import vllm_server
from tests.support.leaderboard import free_port

FAKE_VLLM = r"""
import argparse, http.server, json, sys
p = argparse.ArgumentParser()
p.add_argument("--port", type=int)
p.add_argument("--served-model-name", nargs="+")
args, _ = p.parse_known_args(sys.argv[sys.argv.index("-m") + 2:])
names = args.served_model_name
class Models(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"data": [{"id": n} for n in names]}).encode()
        self.send_response(200); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
try:
    server = http.server.HTTPServer(("127.0.0.1", args.port), Models)
except OSError as exc:  # what uvicorn prints, lower-cased by the harness
    print(f"ERROR: [Errno 98] error while attempting to bind on address ('127.0.0.1', {args.port}): address already in use ({exc})", flush=True)
    sys.exit(1)
server.serve_forever()
"""


class _Decoy(http.server.BaseHTTPRequestHandler):
    """Another server: 200 to anything, serving a model of the same public name."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(json.dumps({"data": [{"id": vllm_server.SERVED_NAME}]}).encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_python(tmp_path: Path) -> str:
    """An interpreter whose ``-m vllm.entrypoints.openai.api_server`` is the stand-in above."""
    (tmp_path / "fake_vllm.py").write_text(FAKE_VLLM)
    launcher = tmp_path / "python"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{tmp_path / "fake_vllm.py"}" "$@"\n')
    launcher.chmod(0o755)
    return str(launcher)


@pytest.fixture
def decoy() -> Iterator[int]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Decoy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_port_taken_before_the_server_binds_it_is_not_mistaken_for_the_server(
    fake_python: str, decoy: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first port handed out is the decoy's: the harness must neither return the decoy as its server nor fail,
    but start again on another port and wait for its own instance name there."""
    ports = iter([decoy, free_port()])
    monkeypatch.setattr(vllm_server, "free_port", lambda: next(ports))
    server = vllm_server.VLLMServer(fake_python, tmp_path, tmp_path / "server.log", timeout=30)
    try:
        assert server.port != decoy and server.url == f"http://127.0.0.1:{server.port}/v1"
        assert server.instance in server._served_names() and vllm_server.SERVED_NAME in server._served_names()
        assert "address already in use" in server.tail()  # the first attempt's exit, kept in the log
    finally:
        server.stop()
    assert server.proc.poll() is not None


def test_every_port_taken_is_an_error_naming_the_attempts(
    fake_python: str, decoy: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vllm_server, "free_port", lambda: decoy)
    with pytest.raises(RuntimeError, match="2 ports taken"):
        vllm_server.VLLMServer(fake_python, tmp_path, tmp_path / "server.log", timeout=30, attempts=2)


def test_the_unique_name_is_served_beside_the_public_one() -> None:
    command = vllm_server.serve_command("python", Path("m"), 8000, "sapo-gym-test-x")
    names = command[command.index("--served-model-name") + 1 : command.index("--host")]
    assert names == [vllm_server.SERVED_NAME, "sapo-gym-test-x"]
