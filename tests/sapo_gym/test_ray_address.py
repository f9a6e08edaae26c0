"""``RayWorkers(address=...)`` (``--ray-address``) against a real head node that ``ray start --head`` starts on
127.0.0.1, under a temporary HOME (the user's ~/.ray is never read): the ``HOST:PORT`` it prints works with Ray's
token auth on (a token file present, ``RAY_AUTH_MODE`` unset, as Ray then defaults) and with it off; a driver that
opts out (``RAY_AUTH_MODE=disabled``) of a token cluster gets an error naming ``RAY_AUTH_MODE``; ``ray://`` works
through the head's Ray Client server with the ``ray`` extra's ``ray[client]``. Every driver runs in its own
process (its auth mode is per process) and plays a Vault episode that must equal the in-process one.

Each head runs as ``ray start --head --block`` in its own process group with its own ``--temp-dir``, and is
stopped by that process and group (SIGTERM, then SIGKILL), never by ``ray stop``, which would stop every Ray on
the machine."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray")

import sapo_gym  # noqa: E402
from sapo_gym import ray_connect  # noqa: E402

pytestmark = pytest.mark.timeout(300)

RAY = str(Path(sys.executable).with_name("ray"))
START_TIMEOUT_S = 90.0
"""How long ``ray start`` may take to say the runtime started (a few seconds on an idle machine)."""
DRIVER_TIMEOUT_S = 120.0
"""A driver that connects, plays one Vault episode and leaves, or fails to connect (Ray retries ~20 s)."""

DRIVER = """
import json, sys
import sapo_gym
from sapo_gym.ray_vector import RayWorkers

vec = sapo_gym.make_vec("sapo/Vault-v0", 1, 1, vectorization="ray", schedule_seed=0,
                        ray_workers=RayWorkers(address=sys.argv[1], num_cpus=0.5, start_timeout_s=60))
try:
    obs, infos = vec.reset(seed=0)
    log = [obs[0]]
    for _ in range(8):
        obs, rewards, terms, truncs, infos = vec.step([f"<think></think><action>{infos['expert_action'][0]}</action>"])
        log.append([obs[0], float(rewards[0]), bool(terms[0]), bool(truncs[0])])
        if terms[0] or truncs[0]:
            break
finally:
    vec.close()
print("EPISODE " + json.dumps(log))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # no stray auth mode, token or address
    # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: Ray gives this machine the address 127.0.0.1 (servers on the loopback)
    return {**env, "HOME": str(home), "OMP_NUM_THREADS": "1", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", **extra}


def _stop(proc: subprocess.Popen) -> None:
    """Stop ``ray start --block`` (it stops the node's processes), then anything left in its process group."""
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):  # the group may outlive its leader
        os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def head_node(home: Path, *extra_args: str, **env: str) -> Iterator[str]:
    """``ray start --head`` of one CPU on 127.0.0.1 under HOME ``home``; yields the address it reports
    (its node IP and GCS port); always stopped."""
    port, temp = _free_port(), Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # short: Unix socket paths
    log = home / f"ray_start_{port}.log"
    cmd = [
        RAY,
        "start",
        "--head",
        "--block",
        f"--port={port}",
        "--num-cpus=1",
        "--node-ip-address=127.0.0.1",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={temp}",
        *extra_args,
    ]
    # no drain on SIGTERM: Ray's handler would wait out its 30 s for the GCS that the same signal to the group stops
    env = {"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0", **env}
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd, env=_env(home, **env), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "Ray runtime started" not in log.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray start did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.25)
        ip = re.search(r"Local node IP: (\S+)", log.read_text()).group(1)
        yield f"{ip}:{port}"
    finally:
        _stop(proc)
        shutil.rmtree(temp, ignore_errors=True)


def drive(home: Path, address: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", DRIVER, address],
        env=_env(home, **env),
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT_S,
    )


def episode(run: subprocess.CompletedProcess) -> list:
    lines = [line for line in run.stdout.splitlines() if line.startswith("EPISODE ")]
    assert run.returncode == 0 and lines, run.stderr[-3000:]
    return json.loads(lines[0][len("EPISODE ") :])


def local_episode() -> list:
    vec = sapo_gym.make_vec("sapo/Vault-v0", 1, 1, vectorization="sync", schedule_seed=0)
    try:
        obs, infos = vec.reset(seed=0)
        log = [obs[0]]
        while True:
            obs, rewards, terms, truncs, infos = vec.step(
                [f"<think></think><action>{infos['expert_action'][0]}</action>"]
            )
            log.append([obs[0], float(rewards[0]), bool(terms[0]), bool(truncs[0])])
            if terms[0] or truncs[0]:
                return log
    finally:
        vec.close()


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    """A HOME holding a Ray auth token, as ``ray get-auth-token --generate`` writes it."""
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text(secrets.token_hex(32))
    return tmp_path


@pytest.mark.slow
def test_host_port_and_ray_client_under_token_auth(home: Path) -> None:
    expected = local_episode()
    assert expected[-1][2]  # a whole expert episode, won
    client_port = _free_port()
    with head_node(home, f"--ray-client-server-port={client_port}") as address:
        assert "Token authentication is enabled" in next(home.glob("ray_start_*.log")).read_text()
        assert episode(drive(home, address)) == expected  # the printed address, RAY_AUTH_MODE unset
        assert episode(drive(home, f"ray://127.0.0.1:{client_port}")) == expected
        elsewhere = home / "elsewhere"  # a HOME without the token
        elsewhere.mkdir()
        for driver_home, env in ((home, {"RAY_AUTH_MODE": "disabled"}), (elsewhere, {})):
            start = time.monotonic()
            refused = drive(driver_home, address, **env)
            assert refused.returncode != 0 and time.monotonic() - start < DRIVER_TIMEOUT_S
            assert f"the Ray cluster at {address} uses token auth" in refused.stderr, refused.stderr[-3000:]
            assert "RAY_AUTH_MODE=token or unset" in refused.stderr


@pytest.mark.slow
def test_host_port_and_ray_client_without_auth_even_with_a_token_here(home: Path) -> None:
    expected = local_episode()
    client_port = _free_port()
    with head_node(home, f"--ray-client-server-port={client_port}", RAY_AUTH_MODE="disabled") as address:
        assert "Token authentication is enabled" not in next(home.glob("ray_start_*.log")).read_text()
        assert episode(drive(home, address)) == expected
        assert episode(drive(home, f"ray://127.0.0.1:{client_port}")) == expected
        refused = drive(home, address, RAY_AUTH_MODE="token")
        assert refused.returncode != 0 and "runs without auth but RAY_AUTH_MODE=token" in refused.stderr, (
            refused.stderr[-3000:]
        )


@pytest.mark.parametrize(
    "wants, mode, token, outcome",
    [
        (True, None, True, "enabled"),
        (True, "token", True, "as is"),
        (True, None, False, "uses token auth"),
        (True, "disabled", True, "uses token auth"),
        (False, None, True, "as is"),
        (False, "disabled", True, "as is"),
        (False, "token", True, "runs without auth"),
        (None, None, True, "as is"),
        (None, "token", False, "as is"),
    ],
)
def test_the_auth_mode_follows_the_cluster(monkeypatch: pytest.MonkeyPatch, wants, mode, token, outcome) -> None:
    """The decision of connect() before ray.init, on what the cluster answered and what this process has."""
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    if mode is not None:
        monkeypatch.setenv("RAY_AUTH_MODE", mode)
    enabled = []
    monkeypatch.setattr(ray_connect, "cluster_wants_token", lambda address: wants)
    monkeypatch.setattr(ray_connect, "has_token", lambda: token)
    monkeypatch.setattr(ray_connect, "_enable_token_auth", lambda: enabled.append(True))
    if outcome in ("enabled", "as is"):
        ray_connect._settle_auth_mode("127.0.0.1:6379")
        assert enabled == ([True] if outcome == "enabled" else [])
    else:
        with pytest.raises(ConnectionError, match=outcome) as err:
            ray_connect._settle_auth_mode("127.0.0.1:6379")
        assert "RAY_AUTH_MODE" in str(err.value) and not enabled


def test_a_closed_port_says_nothing_about_auth() -> None:
    assert ray_connect.cluster_wants_token(f"127.0.0.1:{_free_port()}") is None
    assert ray_connect.cluster_wants_token(f"ray://127.0.0.1:{_free_port()}") is None
