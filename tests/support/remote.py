"""Helpers of the remote-env tests: a ``sapo-gym env serve`` subprocess on 127.0.0.1, expert episodes,
and a canonical form of (observation, reward, flags, info) that compares types and values exactly."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from tests.support.deploy import nginx_or_skip

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0
"""How long a server may take to print its address (bounded: a broken start fails, never hangs)."""


def _first_line(proc: subprocess.Popen, timeout_s: float) -> str:
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout_s)
    except queue.Empty:
        return ""


@contextmanager
def served(env_id: str, *args: str) -> Iterator[str]:
    """Run ``sapo-gym env serve env_id --port 0 *args`` (uvicorn behind nginx) on 127.0.0.1; yield its base URL once
    it serves; stop it after (a 2 s drain unless ``args`` say otherwise). Skips the test when nginx is missing."""
    with served_process(env_id, *args) as (url, _):
        yield url


@contextmanager
def served_process(env_id: str, *args: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """:func:`served`, yielding the serve command's process beside its URL."""
    nginx_or_skip()
    drain = () if "--drain-seconds" in args else ("--drain-seconds", "2")
    cmd = [
        sys.executable,
        "-m",
        "sapo_cli",
        "env",
        "serve",
        env_id,
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        *drain,
        *args,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = _first_line(proc, START_TIMEOUT_S)
        if "serving" not in line:
            proc.kill()
            raise RuntimeError(f"server did not start: {line!r} {proc.communicate(timeout=10)[1][-2000:]}")
        yield line.split(" on ", 1)[1].split()[0], proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)  # nginx, then uvicorn, each within the drain
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            stream.close()


def http(method: str, url: str, body: bytes | str | None = None, timeout_s: float = 30.0) -> tuple[int, Any]:
    """(status, decoded JSON body) of one request; 4xx and 5xx come back, not raised."""
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def canon(value: Any) -> Any:
    """A comparable form that keeps every type: two values are byte-identical iff their canon forms are equal."""
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tolist())
    if isinstance(value, dict):
        return ("dict", [(k, canon(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [canon(v) for v in value])
    return (type(value).__name__, value)


def expert_episode(env: Any, seed: int, options: dict[str, Any] | None = None) -> list[Any]:
    """Play the privileged expert through one whole episode; every reset and step, in canonical form."""
    obs, info = env.reset(seed=seed, options=options)
    record = [canon((obs, info))]
    done = False
    while not done:
        action = f"<think>the expert says so</think><action>{info['expert_action']}</action>"
        obs, reward, terminated, truncated, info = env.step(action)
        record.append(canon((obs, reward, terminated, truncated, info)))
        done = terminated or truncated
    return record
