"""The openai agent against misbehaving servers on 127.0.0.1: no redirect is followed, a request has a wall-clock
deadline and a cap on its decoded body, retries are bounded by count and time, reported numbers are bounded.

Hang tests give the agent a short deadline and run it in a thread joined with a generous timeout: they assert
that it returned, never how fast."""

from __future__ import annotations

import email.utils
import random
import threading
from collections.abc import Callable
from typing import Any

import pytest

from agents.http_bounds import ResponseTooLarge
from agents.openai_agent import OpenAIChatAgent, RetryExhausted
from agents.retry import DEFAULT_MAX_ATTEMPTS, RetryBudget, backoff_floor
from tests.support.fake_openai import FakeOpenAI
from tests.support.hostile_http import HostileServer

PROMPT = "You stand before a vault. The panel glows red."
NOW = 1_800_000_000.0


def _agent(url: str, sleeps: list[float] | None = None, **kwargs: Any) -> OpenAIChatAgent:
    return OpenAIChatAgent(
        url,
        "m",
        sleep=(sleeps.append if sleeps is not None else lambda s: None),
        wall_clock=lambda: NOW,
        rng=random.Random(5),
        **kwargs,
    )


def _returns(call: Callable[[], Any], outer: float = 120.0) -> BaseException | Any:
    """Run ``call`` in a thread; assert it returned (or raised) within ``outer`` seconds; its result or exception."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(call())
        except BaseException as exc:  # noqa: BLE001
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(outer)
    assert not thread.is_alive(), "the request did not end"
    return box[0]


@pytest.mark.parametrize("status", [302, 307])
def test_a_redirect_to_another_origin_is_refused_and_nothing_reaches_it(status: int) -> None:
    with (
        FakeOpenAI() as other,
        HostileServer("redirect", status=status, location=other.url + "/chat/completions") as server,
    ):
        agent = _agent(server.url, api_key="sk-secret", headers={"X-Api-Key": "team-secret"}, retry_total=0)
        with pytest.raises(RuntimeError, match=rf"HTTP {status}: a redirect to .*not followed"):
            agent.respond(PROMPT, {})
        assert other.requests == []  # no prompt, no key, no header went to the other port
        assert len(server.requests) == 1 and server.requests[0]["headers"]["X-Api-Key"] == "team-secret"


def test_an_endless_stream_is_cut_at_the_body_cap() -> None:
    with HostileServer("stream", chunk=256 << 10, limit=64 << 20) as server:
        outcome = _returns(lambda: _agent(server.url, max_response_bytes=1 << 20, retry_total=0).respond(PROMPT, {}))
        assert isinstance(outcome, ResponseTooLarge) and "1,048,576 bytes" in str(outcome)


def test_a_gzip_bomb_is_cut_at_the_body_cap_after_decompression() -> None:
    with HostileServer("bomb", size=16 << 20) as server:
        outcome = _returns(lambda: _agent(server.url, max_response_bytes=1 << 20, retry_total=0).respond(PROMPT, {}))
    assert isinstance(outcome, ResponseTooLarge) and "(decoded)" in str(outcome)


def test_gzip_members_decode_one_after_another_and_empty_ones_do_not_pile_up() -> None:
    with HostileServer("members", count=3) as server:
        assert _agent(server.url).respond(PROMPT, {})["output"] == "<action>press red</action>"
    with HostileServer("members", empty=True, count=200_000) as server:  # 4 MB on the wire, nothing decoded
        outcome = _returns(lambda: _agent(server.url, max_response_bytes=1 << 20, retry_total=0).respond(PROMPT, {}))
    assert isinstance(outcome, ResponseTooLarge) and "on the wire" in str(outcome)


@pytest.mark.parametrize("behaviour", ["drip", "drip-headers"])
def test_a_drip_ends_at_the_request_deadline_not_per_read(behaviour: str) -> None:
    """One byte every 0.25 s never trips a 1 s per-read timeout; the 1 s deadline for the whole request ends it."""
    with HostileServer(behaviour, every=0.25, limit=200) as server:
        outcome = _returns(lambda: _agent(server.url, timeout=1.0, retry_total=0).respond(PROMPT, {}))
        assert isinstance(outcome, RetryExhausted), outcome
        assert "DeadlineExceeded" in str(outcome) and "within 1 s" in str(outcome)


@pytest.mark.parametrize("value", ["0", email.utils.formatdate(NOW - 3600, usegmt=True)])
def test_retry_after_zero_or_past_is_bounded_by_count_with_a_minimum_backoff(value: str) -> None:
    sleeps: list[float] = []
    with HostileServer("retry-after", value=value, limit=500) as server:
        with pytest.raises(RetryExhausted, match=f"failed after {DEFAULT_MAX_ATTEMPTS} attempts"):
            _agent(server.url, sleeps).respond(PROMPT, {})
        assert len(server.requests) == DEFAULT_MAX_ATTEMPTS
    assert sleeps == [backoff_floor(k) for k in range(DEFAULT_MAX_ATTEMPTS - 1)] and min(sleeps) > 0


def test_retries_are_bounded_by_the_time_spent_too() -> None:
    """Attempts that each take 50 s (a slow server) end the request once 120 s would be passed, however short the waits."""
    now = [0.0]

    def clock() -> float:
        now[0] += 50.0  # every look at the clock is one more slow attempt
        return now[0]

    budget = RetryBudget(total=120.0, max_attempts=None, rng=random.Random(0), wall_clock=lambda: NOW, clock=clock)
    waits = []
    while (wait := budget.next_wait("0")) is not None:
        waits.append(wait)
    assert budget.attempts == 3 and waits == [
        backoff_floor(0),
        backoff_floor(1),
    ]  # 150 s since the first attempt: given up


@pytest.mark.parametrize(
    "usage",
    [
        '{"prompt_tokens": 1' + "0" * 400 + ', "completion_tokens": 5}',
        '{"prompt_tokens": 1e400, "completion_tokens": -3}',
        '{"prompt_tokens": true, "completion_tokens": 4294967296}',
    ],
)
def test_token_counts_out_of_range_are_unknown(usage: str) -> None:
    with HostileServer("usage", usage=usage) as server:
        reply = _agent(server.url).respond(PROMPT, {})
    assert reply["output"] == "<action>press red</action>"
    assert reply["prompt_tokens"] is None and reply["completion_tokens"] in (None, 5)
