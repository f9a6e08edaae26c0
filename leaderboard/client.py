"""Submitting a bundle to a leaderboard server (used by ``sapo-gym submit``).

Submissions are idempotent (the server stores a bundle once, by content digest), so a request
that failed on the network, or that the server's proxy answered for an app that did not (:data:`PROXY_RETRY`),
is simply retried.
"""

from __future__ import annotations

import gzip
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["SubmitError", "response_payload", "submit_bundle", "wait_for_verification", "PROXY_RETRY"]

PROXY_RETRY = (502, 503, 504)
"""Answers of the nginx in front of the server that mean "not now": the app behind it did not answer (a worker
restarting, the server stopping) or this client holds its limit of connections. Retried like a network failure."""


class SubmitError(RuntimeError):
    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Receipt:
    id: int
    duplicate: bool
    status: str
    url: str
    api_url: str


def response_payload(response: Any) -> dict[str, Any]:
    """The JSON body of a 200/201 answer; any other status raises :class:`SubmitError` with the server's message."""
    payload: dict[str, Any]
    try:
        payload = response.json()
    except ValueError:
        payload = {"message": response.text[:500]}
    if response.status_code not in (200, 201):
        raise SubmitError(f"HTTP {response.status_code}: {payload.get('message', payload)}", response.status_code)
    return payload


def submit_bundle(
    data: bytes, server: str, token: str, retries: int = 3, timeout: float = 120.0, max_wait: float = 60.0
) -> Receipt:
    """POST the bundle bytes (gzip-compressed on the wire); raise :class:`SubmitError` with the server's message.

    Network failures are retried with backoff, a ``429`` after its ``Retry-After`` (at most ``max_wait`` s)."""
    import requests

    url = server.rstrip("/") + "/api/v1/submissions"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Content-Encoding": "gzip"}
    body = gzip.compress(data, mtime=0)
    for attempt in range(retries + 1):
        try:
            response = requests.post(url, data=body, headers=headers, timeout=timeout)
        except (requests.ConnectionError, requests.Timeout) as exc:  # safe to retry: submissions are idempotent
            if attempt == retries:
                raise SubmitError(f"cannot reach {url}: {exc}") from None
            time.sleep(0.5 * 2**attempt)
            continue
        if response.status_code not in (429, *PROXY_RETRY) or attempt == retries:
            break
        # the token's rate limit (429), or the proxy's Retry-After
        time.sleep(min(float(response.headers.get("Retry-After", "1") or 1), max_wait))
    payload = response_payload(response)
    return Receipt(payload["id"], payload["duplicate"], payload["status"], payload["url"], payload["api_url"])


def wait_for_verification(api_url: str, timeout: float = 600.0, poll: float = 1.0) -> dict[str, Any]:
    """Poll a submission until its replay verification is over (or ``timeout``); its final API record."""
    import requests

    deadline = time.monotonic() + timeout
    while True:
        record = requests.get(api_url, timeout=30).json()
        if record["status"] in ("verified", "failed") or time.monotonic() > deadline:
            return record
        time.sleep(poll)
