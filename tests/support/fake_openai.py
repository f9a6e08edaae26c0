"""A fake OpenAI-compatible chat-completions server on 127.0.0.1 (stdlib only), for the agent's and the pool's tests
and benchmarks/evaluate_pool.py.

It answers Vault prompts correctly (``press <the panel's colour>``) with a ``usage`` block and ``finish_reason``, or
with what ``reply`` (a function of the request's body) returns; ``script`` is a list of ``(status, headers)``
answered first, one per request (429s, 503s); ``latency`` is a function of the request number returning seconds to
sleep before answering (a latency distribution).
Every request's body and headers are kept in ``requests``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import threading
import time
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def vault_reply(prompt: str) -> str:
    """Vault: press the panel's colour. Other envs: one of the quoted admissible actions near the prompt's end,
    picked by a hash of the prompt (a deterministic random walk)."""
    found = re.findall(r"The panel glows (\w+)\.", prompt)
    if found or "vault" in prompt:
        colour = found[-1] if found else "red"
        return f"<think>The panel glows {colour}.</think><action>press {colour}</action>"
    actions = re.findall(r"'([^'\n]{1,80})'", prompt[-3000:])
    action = actions[zlib.crc32(prompt.encode()) % len(actions)] if actions else "look"
    return f"<think>Trying something.</think><action>{action}</action>"


def lognormal_latency(median: float, sigma: float, seed: int, n: int = 100_000) -> Callable[[int], float]:
    """Request ``k`` waits the ``k``-th draw of a seeded lognormal (median ``median`` s, log-sd ``sigma``)."""
    rng = random.Random(seed)
    draws = [median * math.exp(rng.gauss(0.0, sigma)) for _ in range(n)]
    return lambda k: draws[k % n]


class FakeOpenAI:
    """``with FakeOpenAI() as server:`` → ``server.url`` (``http://127.0.0.1:PORT/v1``)."""

    def __init__(
        self,
        script: list[tuple[int, dict[str, str]]] | None = None,
        latency: Callable[[int], float] | None = None,
        reply: Callable[[dict[str, Any]], str] | None = None,
    ):
        self.script = list(script or [])
        self.latency = latency
        self.reply = reply or (lambda body: vault_reply(body["messages"][-1]["content"]))
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with fake.lock:
                    number = len(fake.requests)
                    fake.requests.append({"body": body, "headers": dict(self.headers)})
                    scripted = fake.script.pop(0) if fake.script else None
                if fake.latency is not None:
                    time.sleep(fake.latency(number))
                if scripted is not None:
                    status, headers = scripted
                    self._send(status, {"error": {"message": "scripted failure"}}, headers)
                    return
                prompt = body["messages"][-1]["content"]
                content = fake.reply(body)
                answer = {
                    "id": f"c{number}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                    ],
                    "usage": {
                        "prompt_tokens": len(prompt.split()),
                        "completion_tokens": len(content.split()),
                        "total_tokens": len(prompt.split()) + len(content.split()),
                    },
                }
                self._send(200, answer, {})

            def _send(self, status: int, obj: Any, headers: dict[str, str]) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def main() -> None:
    """``python -m tests.support.fake_openai --median 0.05 --sigma 1 --seed 0``: serve until killed; prints the URL."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--median", type=float, default=0.0)
    parser.add_argument("--sigma", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    latency = lognormal_latency(args.median, args.sigma, args.seed) if args.median > 0 else None
    with FakeOpenAI(latency=latency) as server:
        print(server.url, flush=True)
        sys.stdin.read()  # until the parent closes stdin (or kills this process)


if __name__ == "__main__":
    main()
