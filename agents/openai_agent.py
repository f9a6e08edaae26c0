"""An agent backed by any OpenAI-compatible chat-completions server (plain HTTP with ``requests``).

For prompting baselines: vLLM's or llama.cpp's OpenAI server, a hosted API, anything that answers
``POST {base_url}/chat/completions``. Each observation is one user message (plus an optional
system prompt); the reply's ``choices[0].message.content`` is the raw output sent to the env.
Requests for one batch run concurrently. Rate limits and server errors (429, 5xx, connection
failures) are retried with exponential backoff; any other error, or running out of retries,
raises: a broken server must not look like an agent that writes invalid actions.

The API key comes from the ``api_key`` argument, else the ``OPENAI_API_KEY`` environment
variable, else none is sent (local servers).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import requests

__all__ = ["OpenAIChatAgent", "parse_openai_spec"]

_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


def parse_openai_spec(spec: str) -> tuple[str, str]:
    """``openai:URL#MODEL`` → (base URL, model name)."""
    body = spec.removeprefix("openai:")
    url, sep, model = body.partition("#")
    if not spec.startswith("openai:") or not sep or not url or not model:
        raise ValueError(f"expected openai:URL#MODEL (e.g. openai:http://127.0.0.1:8000/v1#my-model), got {spec!r}")
    return url, model


class OpenAIChatAgent:
    """Chat-completions agent; ``act`` sends one request per active env (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        temperature: float = 0.4,
        top_p: float = 1.0,
        max_tokens: int = 512,
        seed: int | None = None,
        system_prompt: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 4,
        max_concurrency: int = 8,
        name: str | None = None,
    ):
        base = base_url.rstrip("/")
        self.url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.model = model
        self.name = name or f"openai:{model}"
        self.sampling = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}
        self.seed, self.system_prompt = seed, system_prompt
        self.timeout, self.max_retries, self.max_concurrency = timeout, max_retries, max_concurrency
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._session = requests.Session()
        adapter = requests.adapters.HTTPAdapter(pool_maxsize=max_concurrency)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        self._requests = 0

    def reset(self, num_envs: int) -> None:
        """Stateless between turns: the prompt carries the history."""

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        payloads = [self._payload(obs) for obs in observations]
        if len(payloads) <= 1:
            return [self._complete(p) for p in payloads]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(payloads))) as pool:
            return list(pool.map(self._complete, payloads))

    def _payload(self, observation: str) -> dict[str, Any]:
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        payload: dict[str, Any] = {"model": self.model, "messages": messages + [{"role": "user", "content": observation}], **self.sampling}
        if self.seed is not None:  # one seed per request, in call order: reproducible and never repeated
            payload["seed"] = self.seed + self._requests
        self._requests += 1
        return payload

    def _complete(self, payload: dict[str, Any]) -> str:
        problem = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(min(0.25 * 2 ** (attempt - 1), 8.0))
            try:
                response = self._session.post(self.url, json=payload, headers=self._headers, timeout=self.timeout)
            except (requests.ConnectionError, requests.Timeout) as exc:
                problem = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code in _RETRY_STATUS:
                problem = f"HTTP {response.status_code}: {response.text[:200]}"
                continue
            if response.status_code != 200:
                raise RuntimeError(f"{self.url} answered HTTP {response.status_code}: {response.text[:500]}")
            return _content(response.json(), self.url)
        raise RuntimeError(f"{self.url} failed after {self.max_retries + 1} attempts; last error: {problem}")


def _content(body: Any, url: str) -> str:
    try:
        return body["choices"][0]["message"]["content"] or ""
    except (KeyError, IndexError, TypeError):
        raise RuntimeError(f"{url} returned no choices[0].message.content: {str(body)[:300]}") from None
