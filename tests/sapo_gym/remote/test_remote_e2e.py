"""A real server in a subprocess on 127.0.0.1: concurrent sessions equal in-process play, a killed client
disturbs no one, bad payloads get 4xx while the server keeps serving, and Remote-v0 passes check_env."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

pytest.importorskip("openenv.core.env_server")

import sapo_gym  # noqa: E402,F401  (registers the ids)
from sapo_gym.remote.wire_types import ACTION_LIMIT_CHARS, MAX_BODY_BYTES  # noqa: E402
from tests.support.remote import ROOT, expert_episode, http, served  # noqa: E402

SESSIONS = 8
ALFWORLD_ARGS = ("--env-arg", "data_dir=embedded")
"""The embedded generated games, whatever $ALFWORLD_DATA says."""


def wait_for_active(url: str, active: int, timeout_s: float = 20.0) -> int:
    """Poll ``GET /sessions`` until ``active`` sessions are open (bounded); the last count seen."""
    deadline = time.monotonic() + timeout_s
    while True:
        count = http("GET", f"{url}/sessions")[1]["active_sessions"]
        if count == active or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


def remote_episode(url: str, env_id: str, seed: int, index: int) -> list:
    env = gym.make("sapo/Remote-v0", url=url, env_id=env_id)
    try:
        return expert_episode(env, seed, {"task_index": index})
    finally:
        env.close()


def local_episodes(env_id: str, env_args: dict, n: int) -> list[list]:
    env = gym.make(env_id, **env_args)
    try:
        return [expert_episode(env, seed=100 + i, options={"task_index": 3 * i}) for i in range(n)]
    finally:
        env.close()


VICTIM = textwrap.dedent("""
    import sys, time, gymnasium as gym, sapo_gym
    env = gym.make("sapo/Remote-v0", url=sys.argv[1], env_id=sys.argv[2])
    obs, info = env.reset(seed=0, options={"task_index": 1})
    env.step("<think>t</think><action>" + info["expert_action"] + "</action>")
    print("mid-episode", flush=True)
    time.sleep(120)
""")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_concurrent_sessions_equal_in_process_play_and_a_killed_client_disturbs_no_one() -> None:
    cases = [("sapo/ALFWorld-v0", ALFWORLD_ARGS, {"data_dir": "embedded"}), ("sapo/WebShop-v0", (), {})]
    expected = {env_id: local_episodes(env_id, kwargs, SESSIONS) for env_id, _, kwargs in cases}
    with (
        served(cases[0][0], *cases[0][1], "--max-sessions", "10") as alf_url,
        served(cases[1][0], "--max-sessions", "10") as shop_url,
    ):
        urls = {cases[0][0]: alf_url, cases[1][0]: shop_url}
        victim = subprocess.Popen(
            [sys.executable, "-c", VICTIM, alf_url, cases[0][0]],
            cwd=ROOT,
            text=True,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            assert victim.stdout.readline().strip() == "mid-episode"
            with ThreadPoolExecutor(2 * SESSIONS) as pool:
                futures = {
                    (env_id, i): pool.submit(remote_episode, urls[env_id], env_id, 100 + i, 3 * i)
                    for env_id in urls
                    for i in range(SESSIONS)
                }
                # kill the victim while the others play (its session and theirs are open together)
                wait_for_active(alf_url, SESSIONS + 1, timeout_s=10)
                victim.send_signal(signal.SIGKILL)
                results = {key: f.result(timeout=240) for key, f in futures.items()}
        finally:
            victim.kill()
            victim.wait(timeout=10)
            victim.stdout.close()
        for (env_id, i), record in results.items():
            assert record == expected[env_id][i], f"{env_id} session {i} differs from the in-process episode"
        assert all(len(r) > 2 for r in results.values())  # whole episodes, several steps each
        assert wait_for_active(alf_url, 0) == 0 and wait_for_active(shop_url, 0) == 0  # the victim's slot was freed


@pytest.mark.timeout(180)
def test_bad_payloads_get_4xx_and_the_server_keeps_serving() -> None:
    with served("sapo/Vault-v0", "--max-sessions", "2") as url:
        status, body = http("POST", f"{url}/sessions")
        assert status == 201
        sid = body["session_id"]
        base = f"{url}/sessions/{sid}"
        bad = [
            ("POST", f"{base}/reset", "{not json", 400),
            ("POST", f"{base}/step", "[1, 2]", 400),
            ("POST", f"{url}/sessions/no-such-session/step", '{"action": {"text": "x"}}', 404),
            ("POST", f"{base}/step", '{"action": {"text": "x"}}', 409),  # before any reset
            ("POST", f"{base}/reset", '{"seed": "seven"}', 422),
            ("POST", f"{base}/reset", '{"options": {"task_index": "0"}}', 422),
            ("POST", f"{base}/reset", '{"options": {"task_id": "no-such-task"}}', 400),
            ("POST", f"{base}/step", '{"action": {"text": 5}}', 422),
            ("POST", f"{base}/step", '{"action": {"txt": "x"}}', 422),
            ("POST", f"{base}/step", '{"action": {"text": "' + "x" * (ACTION_LIMIT_CHARS + 1) + '"}}', 422),
            ("POST", f"{base}/step", b"x" * (MAX_BODY_BYTES + 1), 413),
        ]
        for method, target, payload, code in bad:
            status, body = http(method, target, payload)
            assert status == code, (target, str(payload)[:60], status, body)
            assert body["message"]
        status, body = http("POST", f"{base}/reset", '{"seed": 3, "options": {"task_index": 0}}')
        assert status == 200, body
        status, body = http("POST", f"{base}/step", '{"action": {"text": "<think>t</think><action>look</action>"}}')
        assert status == 200, body
        assert body["observation"]["is_action_valid"] is True and body["done"] is False
        env = gym.make("sapo/Remote-v0", url=url, env_id="sapo/Vault-v0")  # the second slot, over the WebSocket
        try:
            assert env.reset(seed=1)[1]["step"] == 0
            assert http("POST", f"{url}/sessions")[0] == 503  # both slots taken
        finally:
            env.close()
        assert http("DELETE", base)[0] == 200 and http("POST", f"{base}/reset", "{}")[0] == 404


@pytest.mark.timeout(180)
def test_remote_env_passes_check_env_and_names_the_served_env() -> None:
    with served("sapo/Vault-v0") as url:
        env = gym.make("sapo/Remote-v0", url=url, env_id="sapo/Vault-v0")
        local = gym.make("sapo/Vault-v0")
        try:
            check_env(env.unwrapped, skip_render_check=True)
            assert env.unwrapped.spec_hash() == local.unwrapped.spec_hash()
            assert env.unwrapped.spec_fields() == local.unwrapped.spec_fields()
            assert list(env.unwrapped.task_ids) == list(local.unwrapped.task_ids) and env.unwrapped.split == "train"
            assert env.spec.max_episode_steps is None  # the server's TimeLimit truncates
        finally:
            env.close()
            local.close()
        with pytest.raises(ValueError, match="serves 'sapo/Vault-v0', not 'sapo/WebShop-v0'"):
            gym.make("sapo/Remote-v0", url=url, env_id="sapo/WebShop-v0")
    with socket.socket() as closed:  # a port bound without listening: a connection is refused at once
        closed.bind(("127.0.0.1", 0))
        with pytest.raises(ConnectionError, match="Failed to connect"):
            gym.make(
                "sapo/Remote-v0",
                url=f"http://127.0.0.1:{closed.getsockname()[1]}",
                env_id="sapo/Vault-v0",
                connect_timeout_s=5,
            )


@pytest.mark.timeout(180)
def test_a_vector_env_of_remote_members_equals_the_local_one() -> None:
    import numpy as np

    with served("sapo/Vault-v0", "--max-sessions", "4") as url:
        remote = sapo_gym.make_vec("sapo/Remote-v0", 2, 2, vectorization="sync", url=url, env_id="sapo/Vault-v0")
        local = sapo_gym.make_vec("sapo/Vault-v0", 2, 2, vectorization="sync")
        try:
            (r_obs, r_info), (l_obs, l_info) = remote.reset(seed=5), local.reset(seed=5)
            assert r_obs == l_obs and list(r_info["task_id"]) == list(l_info["task_id"])
            for turn in range(4):  # the horizon: every member's episode ends
                moves = ("press red", "press blue", "press green", "look")
                actions = tuple(f"<think>t</think><action>{moves[(turn + m) % 4]}</action>" for m in range(4))
                r_step, l_step = remote.step(actions), local.step(actions)
                assert r_step[0] == l_step[0]
                for r_part, l_part in zip(r_step[1:4], l_step[1:4]):
                    assert np.array_equal(r_part, l_part) and r_part.dtype == l_part.dtype
                r_info, l_info = r_step[4], l_step[4]
                assert list(r_info["is_action_valid"]) == list(l_info["is_action_valid"])
        finally:
            remote.close()
            local.close()
