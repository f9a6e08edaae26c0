"""Where the server runs a session's env calls: on the event loop for an env whose calls are short, in the session's
own thread otherwise, and in its thread from the first call that took longer than the bound."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

pytest.importorskip("openenv.core.env_server")

import sapo_gym  # noqa: E402,F401
from sapo_gym.remote.server import INLINE_BOUND_S, ServeConfig, create_app  # noqa: E402


def _slow_call() -> int:
    started = time.thread_time()
    while time.thread_time() - started <= 2 * INLINE_BOUND_S:  # CPU time: twice the bound, however the clock rounds
        pass
    return threading.get_ident()


def _descheduled_call() -> int:
    """A short call that waits as long as a slow one takes, as a call does while its process waits for a core."""
    time.sleep(4 * INLINE_BOUND_S)
    return threading.get_ident()


async def _threads_of_calls(config: ServeConfig) -> tuple[bool, int, list[int]]:
    """(the session env's short_calls, the event loop's thread, the thread of: a call, a call that waits, a call, a slow
    call, a call)."""
    server: Any = create_app(config).state.env_server
    session_id, env = await server._create_session()
    try:
        calls = (threading.get_ident, _descheduled_call, threading.get_ident, _slow_call, threading.get_ident)
        threads = [await server._run_in_session_executor(session_id, fn) for fn in calls]
    finally:
        await server._destroy_session(session_id)
    return env.short_calls, threading.get_ident(), threads


def test_short_calls_run_on_the_event_loop_until_one_takes_more_cpu_than_the_bound() -> None:
    config = ServeConfig("sapo/ALFWorld-Mini-v0")
    short, loop_thread, (first, waited, second, slow, after) = asyncio.run(_threads_of_calls(config))
    assert short
    assert first == waited == second == loop_thread  # a long wall time with little CPU keeps the session inline
    assert slow == loop_thread  # the slow call itself ran inline: it is measured after
    assert after != loop_thread


@pytest.mark.parametrize(
    "config",
    [ServeConfig("sapo/ALFWorld-Mini-v0", {"expert": "planner"}), ServeConfig("sapo/Vault-v0")],
    ids=["alfworld-planner", "vault"],
)
def test_an_env_without_short_calls_runs_every_call_in_its_thread(config: ServeConfig) -> None:
    short, loop_thread, threads = asyncio.run(_threads_of_calls(config))
    assert not short
    assert loop_thread not in threads


def test_which_envs_say_their_calls_are_short() -> None:
    import gymnasium as gym

    assert gym.make("sapo/WebShop-Mini-v0").unwrapped.calls_are_short()
    assert gym.make("sapo/ALFWorld-Mini-v0").unwrapped.calls_are_short()
    assert not gym.make("sapo/ALFWorld-Mini-v0", engine="reference").unwrapped.calls_are_short()
