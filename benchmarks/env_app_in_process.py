"""The served app's own cost a step, without sockets: ``sapo-gym env serve``'s ASGI app (OpenEnv's ``/ws`` handler
behind the guard, the env) driven in this process by N interleaved WebSocket sessions whose frames are handed to
it as ASGI messages, on uvloop as the server runs it.

What a served step costs the server apart from the transport (uvicorn's framing, the socket calls, nginx): the
guard's screen, OpenEnv's handler and its pydantic models, the env's reset and step, the answer's JSON. Each session
plays expert episodes (the observation's ``expert_action``; a reset after each episode); after ``--warm-steps`` steps
in all the CPU clock of this process runs for ``--steps`` more. Reported per session count: CPU microseconds a step
(resets' share included), and apart, what the driver's own JSON costs a step (encoding a step frame, decoding an
answer: measured on an answer of the run), which the first number includes.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/env_app_in_process.py [--env sapo/ALFWorld-Mini-v0]
        [--sessions 1,16,64,256] [--steps 30000] [--warm-steps 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.env_workers import cpu_line, interpreter_line  # noqa: E402

ANSWER_TIMEOUT_S = 60.0
"""Longest wait for one answer of the app (bounded: a lost answer fails the run, never hangs it)."""


@dataclass
class Count:
    """Shared by the sessions of one run."""

    warm: int
    steps: int = 0
    stop: bool = False
    warmed: asyncio.Event = field(default_factory=asyncio.Event)
    sample: str = ""
    """An answer frame of the run (for the driver's own JSON cost)."""


def _step_frame(answer: dict[str, Any]) -> str:
    action = answer["data"]["observation"]["expert_action"]
    return json.dumps({"type": "step", "data": {"text": f"<think></think><action>{action}</action>"}})


async def session(app: Any, index: int, count: Count) -> None:
    """One WebSocket session of the app: connect, then reset and step until the count stops."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    scope = {
        "type": "websocket",
        "path": "/ws",
        "raw_path": b"/ws",
        "query_string": b"",
        "headers": [(b"host", b"bench")],
        "client": ("127.0.0.1", 1024 + index),
        "server": ("127.0.0.1", 8765),
        "scheme": "ws",
        "root_path": "",
        "subprotocols": [],
        "asgi": {"version": "3.0"},
    }
    rng = random.Random(index)

    async def answer(frame: str) -> dict[str, Any]:
        await inbox.put({"type": "websocket.receive", "text": frame})
        message = await asyncio.wait_for(outbox.get(), ANSWER_TIMEOUT_S)
        reply = json.loads(message["text"])
        if reply.get("type") != "observation":
            raise RuntimeError(f"session {index}: the app answered {message['text'][:200]}")
        count.sample = count.sample or message["text"]
        return reply

    def reset() -> str:
        return json.dumps({"type": "reset", "data": {"seed": index, "options": {"task_index": rng.randrange(1 << 16)}}})

    await inbox.put({"type": "websocket.connect"})
    served = asyncio.create_task(app(scope, inbox.get, outbox.put))
    accepted = await asyncio.wait_for(outbox.get(), ANSWER_TIMEOUT_S)
    if accepted["type"] != "websocket.accept":
        raise RuntimeError(f"session {index}: not accepted: {accepted}")
    reply = await answer(reset())
    while not count.stop:
        if reply["data"]["done"]:
            reply = await answer(reset())
            continue
        reply = await answer(_step_frame(reply))
        count.steps += 1
        if count.steps == count.warm:
            count.warmed.set()
    await inbox.put({"type": "websocket.disconnect", "code": 1000})
    await asyncio.wait_for(served, ANSWER_TIMEOUT_S)


async def run(app: Any, sessions: int, steps: int, warm: int) -> tuple[float, str]:
    """(CPU seconds a step over ``steps`` steps after ``warm``, an answer frame of the run)."""
    count = Count(warm=warm)
    tasks = [asyncio.create_task(session(app, i, count)) for i in range(sessions)]
    waiting = asyncio.create_task(count.warmed.wait())
    await asyncio.wait([waiting, *tasks], return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        if task.done():
            task.result()  # a session that failed before the warm-up ended: its error
    started, cpu0 = count.steps, time.process_time()
    while count.steps - started < steps and not any(t.done() for t in tasks):
        await asyncio.sleep(0.02)
    cpu, done = time.process_time() - cpu0, count.steps - started
    count.stop = True
    await asyncio.gather(*tasks)
    return cpu / max(1, done), count.sample


def driver_json_s(sample: str) -> float:
    """CPU seconds a step of the driver's own JSON: an answer decoded, a step frame encoded."""
    n = 2000
    started = time.process_time()
    for _ in range(n):
        _step_frame(json.loads(sample))
    return (time.process_time() - started) / n


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="sapo/ALFWorld-Mini-v0", help="the registered env id the app serves")
    p.add_argument("--sessions", default="1,16,64,256", help="comma-separated counts of interleaved sessions")
    p.add_argument("--steps", type=int, default=30000, help="steps timed per session count")
    p.add_argument("--warm-steps", type=int, default=5000, help="steps played before the clock starts")
    args = p.parse_args(argv)
    import uvloop

    from sapo_gym.remote.server import ServeConfig, create_app

    print(cpu_line(), flush=True)
    print(interpreter_line(), flush=True)
    rows = ["| sessions | CPU µs / step | of it, the driver's JSON µs |", "|---|---|---|"]
    for n in (int(v) for v in args.sessions.split(",") if v.strip()):
        app = create_app(ServeConfig(args.env, max_sessions=n, max_sessions_per_client=n, max_connections=n + 8))
        gc.collect()
        gc.freeze()  # as the served process does (app_from_environment)
        per_step, sample = uvloop.run(run(app, n, args.steps, args.warm_steps))
        gc.unfreeze()
        rows.append(f"| {n} | {per_step * 1e6:.1f} | {driver_json_s(sample) * 1e6:.1f} |")
        print(rows[-1], flush=True)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
