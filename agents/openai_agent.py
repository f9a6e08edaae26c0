"""An agent backed by any OpenAI-compatible chat-completions server (plain HTTP with ``requests``).

For prompting baselines: vLLM's or llama.cpp's OpenAI server, a hosted API, anything that answers
``POST {base_url}/chat/completions``. Each observation is one user message (plus an optional
system prompt); the reply's ``choices[0].message.content`` is the raw output sent to the env.
``respond`` answers one env (the continuous pool of :mod:`sapo_gym.pool` keeps up to ``max_concurrency``
of them in flight); ``act`` answers a batch, its requests in parallel. Rate limits, server errors and
connection failures (429, 408/409, 5xx) are retried as :mod:`agents.retry` says: ``Retry-After`` honoured
(never below the backoff's floor), exponential backoff with jitter, until ``retry_total`` seconds or
``max_retries`` retries; any other error, or running out of retries, raises: a broken server must not look
like an agent that writes invalid actions.

Each request is bounded (:mod:`agents.http_bounds`): it goes to the configured URL only (a redirect is refused,
never followed: the prompts, the key and the headers reach no other origin), it ends ``timeout`` seconds after
it started (a wall-clock deadline for the whole request, not per read), and its decoded body may not pass
``max_response_bytes``. The numbers the server reports are bounded too (:mod:`sapo_gym.bounds`: a token count
that is not an int in ``[0, 2**31]`` is unknown).

Each answer from ``respond`` carries its accounting: the server's ``usage`` (prompt and completion tokens),
``finish_reason`` (``length``: the reply hit ``max_tokens``) and the latency (first attempt to answer,
retries included).

The API key comes from the ``api_key`` argument, else the environment variable ``api_key_env``
(``OPENAI_API_KEY``), else none is sent (local servers); ``headers`` are sent with every request.

**Tool calls.** When an env runs protocol ``tool-call-v1`` its info carries ``messages`` (the turn as
chat messages) and ``tools`` (the ``take_action`` schema); for such a turn the agent sends those
``messages`` and ``tools`` and returns the reply's assistant message as JSON (``content`` and
``tool_calls``), which the env parses; a reply without a tool call is returned as its text.
``tools="always"`` sends the schema and lets any refusal raise; ``"never"`` never sends it: the
history's calls are shown as JSON text, tool answers as user turns, and the model is asked to reply
with the call's JSON. ``"auto"`` (default) sends it, and when the server refuses the request with
an error that mentions tools (vLLM without ``--enable-auto-tool-choice``, llama.cpp without
``--jinja``) it switches to ``"never"`` for the rest of its life. A server that silently ignores
``tools`` and answers in text is not detected: its text goes to the env and is parsed as it is.
"""

from __future__ import annotations

import json
import math
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import requests

from agents.http_bounds import DEFAULT_MAX_RESPONSE_BYTES, BoundedAdapter, bounded_post
from agents.retry import DEFAULT_MAX_ATTEMPTS, DEFAULT_RETRY_TOTAL, RetryBudget
from sapo_gym.bounds import finish_reason, token_count
from sapo_gym.tools import ARGUMENT, TOOL_NAME

__all__ = ["OpenAIChatAgent", "RetryExhausted", "parse_openai_spec"]

_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


def parse_openai_spec(spec: str) -> tuple[str, str]:
    """``openai:URL#MODEL`` → (base URL, model name)."""
    body = spec.removeprefix("openai:")
    url, sep, model = body.partition("#")
    if not spec.startswith("openai:") or not sep or not url or not model:
        raise ValueError(f"expected openai:URL#MODEL (e.g. openai:http://127.0.0.1:8000/v1#my-model), got {spec!r}")
    return url, model


class RetryExhausted(RuntimeError):
    """A request still failed when its retry budget was spent (the server is down or refusing for too long)."""


class _Refused(RuntimeError):
    """A non-retryable HTTP answer (the status and body are kept for tool-support detection)."""

    def __init__(self, url: str, status: int, text: str):
        super().__init__(f"{url} answered HTTP {status}: {text[:500]}")
        self.status, self.text = status, text


def _request_headers(key: str | None, headers: dict[str, str] | None) -> dict[str, str]:
    """The headers of every request: ``Authorization: Bearer KEY`` when there is a key, then ``headers`` (which win)."""
    return {**({"Authorization": f"Bearer {key}"} if key else {}), **dict(headers or {})}


def _pooled_session(max_concurrency: int) -> requests.Session:
    """A session that keeps up to ``max_concurrency`` connections per host, each one cuttable by a request's deadline."""
    session = requests.Session()
    adapter = BoundedAdapter(pool_maxsize=max_concurrency)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


class OpenAIChatAgent:
    """Chat-completions agent: ``respond`` for one env, ``act`` for a batch (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        headers: dict[str, str] | None = None,
        temperature: float = 0.4,
        top_p: float = 1.0,
        max_tokens: int = 512,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        request_seed: bool = True,
        system_prompt: str | None = None,
        timeout: float = 120.0,
        max_retries: int | None = None,
        retry_total: float = DEFAULT_RETRY_TOTAL,
        max_concurrency: int = 8,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        tools: Literal["auto", "always", "never"] = "auto",
        name: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ):
        if tools not in ("auto", "always", "never"):
            raise ValueError(f"tools must be 'auto', 'always' or 'never', got {tools!r}")
        base = base_url.rstrip("/")
        self.url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.model = model
        self.name = name or f"openai:{model}"
        self.sampling: dict[str, Any] = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}
        if stop:
            self.sampling["stop"] = list(stop)
        self.seed = seed if request_seed else None
        self.system_prompt = system_prompt
        self.timeout, self.max_retries, self.retry_total = timeout, max_retries, retry_total
        self.max_concurrency, self.max_response_bytes = max_concurrency, max_response_bytes
        self.tools = tools
        self.server_tools: bool | None = {"auto": None, "always": True, "never": False}[tools]
        """Whether tool calls go to the server as ``tools``: None until the first tool-call turn under ``auto``."""
        self.generation = {
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "stop": list(stop or []),
            "request_seed": request_seed,
            "tools": tools,
            "system_prompt": system_prompt,
        }
        """The settings that can change the outputs (a result bundle's ``agent.generation``)."""
        self._headers = _request_headers(api_key if api_key is not None else os.environ.get(api_key_env), headers)
        self._session = _pooled_session(max_concurrency)
        self._sleep, self._clock, self._wall_clock = sleep, clock, wall_clock
        self._rng = rng or random.Random()
        self._rng_lock = threading.Lock()
        self._requests = 0

    def reset(self, num_envs: int) -> None:
        """Stateless between turns: the prompt (or ``info["messages"]``) carries the history."""

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        payloads = [self._payload(obs, info, self._next_seed()) for obs, info in zip(observations, infos)]
        if len(payloads) <= 1:
            return [self._answer(p)[0] for p in payloads]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(payloads))) as pool:
            return [answer[0] for answer in pool.map(self._answer, payloads)]

    def respond(self, observation: str, info: dict[str, Any], turn_seed: int | None = None) -> dict[str, Any]:
        """One env's turn (thread-safe): ``{"output", "prompt_tokens", "completion_tokens", "finish_reason",
        "latency_s"}``. ``turn_seed`` (the harness's, from the episode's seed, task and turn) makes the request
        seed independent of the order requests are sent in."""
        seed = None if self.seed is None or turn_seed is None else (self.seed + int(turn_seed)) % 2**31
        start = self._clock()
        output, body = self._answer(self._payload(observation, info, seed))
        usage = body.get("usage") if isinstance(body, dict) and isinstance(body.get("usage"), dict) else {}
        try:
            finish = body["choices"][0].get("finish_reason")
        except (KeyError, IndexError, TypeError, AttributeError):
            finish = None
        return {
            "output": output,
            "prompt_tokens": token_count(usage.get("prompt_tokens"), "prompt_tokens"),
            "completion_tokens": token_count(usage.get("completion_tokens"), "completion_tokens"),
            "finish_reason": finish_reason(finish),
            "latency_s": self._clock() - start,
        }

    def _next_seed(self) -> int | None:
        if self.seed is None:
            return None
        with self._rng_lock:  # one seed per request, in call order: reproducible and never repeated
            self._requests += 1
            return self.seed + self._requests - 1

    def _payload(self, observation: str, info: dict[str, Any], seed: int | None) -> dict[str, Any]:
        if "tools" in info and "messages" in info:  # a tool-call-v1 turn
            messages = [dict(m) for m in info["messages"]]
            if self.system_prompt and messages and messages[0]["role"] == "system":
                messages[0]["content"] = self.system_prompt + "\n\n" + messages[0]["content"]
            payload: dict[str, Any] = {
                "model": self.model,
                "messages": messages,
                "tools": info["tools"],
                **self.sampling,
            }
            if self.server_tools is False:
                payload = _untooled(payload)
        else:
            system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
            payload = {
                "model": self.model,
                "messages": system + [{"role": "user", "content": observation}],
                **self.sampling,
            }
        if seed is not None:
            payload["seed"] = seed
        return payload

    def _answer(self, payload: dict[str, Any]) -> tuple[str, Any]:
        """(the output, the response body)."""
        if "tools" not in payload:
            body = self._post(payload)
            return _content(body, self.url), body
        try:
            body = self._post(payload)
        except _Refused as refusal:
            if self.tools != "auto" or "tool" not in refusal.text.lower():
                raise
            self.server_tools = False
            body = self._post(_untooled(payload))
            return _content(body, self.url), body
        if self.tools == "auto":
            self.server_tools = True
        return _tool_answer(body, self.url), body

    def _budget(self) -> RetryBudget:
        with self._rng_lock:
            rng = random.Random(self._rng.random())
        attempts = DEFAULT_MAX_ATTEMPTS if self.max_retries is None else self.max_retries + 1
        return RetryBudget(self.retry_total, attempts, rng, self._wall_clock, clock=self._clock)

    def _post(self, payload: dict[str, Any]) -> Any:
        budget = self._budget()
        while True:
            retry_after = None
            try:
                status, headers, body = bounded_post(
                    self._session, self.url, payload, self._headers, self.timeout, self.max_response_bytes
                )
            except (requests.ConnectionError, requests.Timeout) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                text = body.decode("utf-8", "replace")
                if 300 <= status < 400:
                    raise _Refused(
                        self.url,
                        status,
                        f"a redirect to {str(headers.get('Location'))[:300]!r}, not followed: "
                        "the requests go to the configured URL only (give the final URL)",
                    )
                if status in _RETRY_STATUS and not ("tools" in payload and "tool" in text.lower()):
                    problem, retry_after = f"HTTP {status}: {text[:200]}", headers.get("Retry-After")
                elif status != 200:
                    raise _Refused(self.url, status, text)
                else:
                    return _json(body, self.url)
            wait = budget.next_wait(retry_after)
            if wait is None:
                raise RetryExhausted(
                    f"{self.url} failed after {budget.attempts} attempts ({budget.waited:.1f} s of waiting "
                    f"between them, --retry-total {self.retry_total:g}); last error: {problem}"
                )
            self._sleep(wait)


def _json(body: bytes, url: str) -> Any:
    """The body as JSON; an integer literal of more than 40 digits reads as infinity (no count is that large)."""
    try:
        return json.loads(body, parse_int=lambda text: int(text) if len(text) <= 40 else math.inf)
    except (ValueError, RecursionError) as exc:
        raise RuntimeError(
            f"{url} answered HTTP 200 with a body that is not JSON ({type(exc).__name__}: {str(exc)[:200]}): "
            f"{body[:200]!r}"
        ) from None


_NO_TOOLS = (
    "\n\nThis server takes no tools: write the call as text. Reply with only a JSON object "
    + json.dumps({"name": TOOL_NAME, "arguments": {ARGUMENT: "<one admissible action>"}})
    + "."
)


def _untooled(payload: dict[str, Any]) -> dict[str, Any]:
    """The same request for a server without tools: calls as JSON text, tool answers as user turns."""
    messages = []
    for message in payload["messages"]:
        if message.get("tool_calls"):
            function = message["tool_calls"][0]["function"]
            call = {"name": function["name"], "arguments": json.loads(function["arguments"])}
            messages.append({"role": "assistant", "content": json.dumps(call, ensure_ascii=False)})
        elif message["role"] == "tool":
            messages.append({"role": "user", "content": message["content"]})
        else:
            messages.append(dict(message))
    if messages and messages[0]["role"] == "system":
        messages[0]["content"] += _NO_TOOLS
    rest = {k: v for k, v in payload.items() if k not in ("tools", "tool_choice", "messages")}
    return {**rest, "messages": messages}


def _message(body: Any, url: str) -> dict[str, Any]:
    try:
        message = body["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        message = None
    if not isinstance(message, dict):
        raise RuntimeError(f"{url} returned no choices[0].message: {str(body)[:300]}")
    return message


def _content(body: Any, url: str) -> str:
    content = _message(body, url).get("content", ...)
    if content is ...:
        raise RuntimeError(f"{url} returned no choices[0].message.content: {str(body)[:300]}")
    return content or ""


def _tool_answer(body: Any, url: str) -> str:
    """The reply's assistant message as the action: JSON with its tool calls, else its text."""
    message = _message(body, url)
    if message.get("tool_calls"):
        return json.dumps(
            {"role": "assistant", "content": message.get("content"), "tool_calls": message["tool_calls"]},
            ensure_ascii=False,
        )
    return message.get("content") or ""
