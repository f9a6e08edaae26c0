"""The openai agent's retries, settings and accounting against a fake server on 127.0.0.1 (stdlib, bounded).

Waits are checked exactly through an injected sleep and clock: nothing here sleeps for real or times the wall clock.
"""

from __future__ import annotations

import email.utils
import random

import pytest

from agents.config import AgentConfig
from agents.openai_agent import OpenAIChatAgent, RetryExhausted
from agents.registry import load_agent
from agents.retry import RetryBudget, backoff_delay, parse_retry_after
from tests.support.fake_openai import FakeOpenAI

NOW = 1_800_000_000.0
PROMPT = "You stand before a vault. The panel glows red."


def _agent(url: str, sleeps: list[float], **kwargs) -> OpenAIChatAgent:  # type: ignore[no-untyped-def]
    return OpenAIChatAgent(url, "m", sleep=sleeps.append, wall_clock=lambda: NOW, rng=random.Random(5), **kwargs)


def _expected_backoff(n: int) -> list[float]:
    rng = random.Random(random.Random(5).random())  # the agent draws one sub-generator per request
    return [backoff_delay(k, rng) for k in range(n)]


def test_a_429_with_retry_after_seconds_is_waited_exactly_then_answered() -> None:
    sleeps: list[float] = []
    with FakeOpenAI(script=[(429, {"Retry-After": "7"})]) as server:
        reply = _agent(server.url, sleeps).respond(PROMPT, {}, turn_seed=1)
        assert len(server.requests) == 2
    assert sleeps == [7.0]
    assert reply["output"].endswith("<action>press red</action>") and reply["finish_reason"] == "stop"
    assert reply["prompt_tokens"] == len(PROMPT.split()) and reply["completion_tokens"] == 5


def test_a_retry_after_http_date_is_honoured() -> None:
    sleeps: list[float] = []
    when = email.utils.formatdate(NOW + 30, usegmt=True)
    with FakeOpenAI(script=[(429, {"Retry-After": when}), (503, {"Retry-After": "2"})]) as server:
        _agent(server.url, sleeps).respond(PROMPT, {})
        assert len(server.requests) == 3
    assert sleeps == [30.0, 2.0]


def test_503s_without_retry_after_back_off_exponentially_with_jitter() -> None:
    sleeps: list[float] = []
    with FakeOpenAI(script=[(503, {}), (502, {}), (500, {})]) as server:
        _agent(server.url, sleeps).respond(PROMPT, {})
        assert len(server.requests) == 4
    assert sleeps == _expected_backoff(3)
    assert 0.25 <= sleeps[0] <= 0.5 and 0.5 <= sleeps[1] <= 1.0 and 1.0 <= sleeps[2] <= 2.0


def test_the_run_gives_up_when_the_retry_total_is_spent() -> None:
    sleeps: list[float] = []
    with FakeOpenAI(script=[(503, {"Retry-After": "100"})] * 5) as server:
        with pytest.raises(RetryExhausted, match=r"failed after 3 attempts \(200.0 s of waiting"):
            _agent(server.url, sleeps, retry_total=250).respond(PROMPT, {})
        assert len(server.requests) == 3
    assert sleeps == [100.0, 100.0]


def test_connection_errors_are_retried_within_the_budget() -> None:
    sleeps: list[float] = []
    with pytest.raises(RetryExhausted, match="ConnectionError"):
        _agent("http://127.0.0.1:9/v1", sleeps, retry_total=3.0, timeout=2).respond(PROMPT, {})
    assert sleeps == _expected_backoff(len(sleeps)) and 0 < sum(sleeps) <= 3.0


def test_budget_and_header_parsing() -> None:
    assert parse_retry_after("12", NOW) == 12.0 and parse_retry_after("-3", NOW) == 0.0
    assert parse_retry_after(email.utils.formatdate(NOW - 60, usegmt=True), NOW) == 0.0
    assert parse_retry_after("soon", NOW) is None and parse_retry_after(None, NOW) is None
    budget = RetryBudget(total=10, max_attempts=None, rng=random.Random(0), wall_clock=lambda: NOW)
    assert budget.next_wait("6") == 6.0 and budget.next_wait("5") is None and budget.attempts == 2


def test_every_setting_reaches_the_request_and_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-mine")
    config = AgentConfig(
        max_tokens=33,
        temperature=0.0,
        top_p=0.5,
        stop=("</action>",),
        system_prompt="Be brief.",
        api_key_env="MY_KEY",
        header=("X-Team: sapo",),
        timeout=5,
        retry_total=1,
        concurrency=2,
        tools="never",
    )
    with FakeOpenAI() as server:
        agent = load_agent(f"openai:{server.url}#m", seed=10, config=config)
        agent.respond(PROMPT, {}, turn_seed=5)
        unseeded = load_agent(f"openai:{server.url}#m", seed=10, config=AgentConfig(request_seed=False))
        unseeded.respond(PROMPT, {}, turn_seed=5)
        first, second = server.requests
    body = first["body"]
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["stop"], body["seed"]) == (
        33,
        0.0,
        0.5,
        ["</action>"],
        15,
    )
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert first["headers"]["Authorization"] == "Bearer sk-mine" and first["headers"]["X-Team"] == "sapo"
    assert agent.timeout == 5 and agent.retry_total == 1 and agent.max_concurrency == 2 and agent.tools == "never"
    assert agent.generation == {
        "max_tokens": 33,
        "temperature": 0.0,
        "top_p": 0.5,
        "stop": ["</action>"],
        "request_seed": True,
        "tools": "never",
        "system_prompt": "Be brief.",
    }
    assert "seed" not in second["body"] and unseeded.generation["request_seed"] is False


def test_kinds_that_cannot_honour_a_setting_name_its_flag() -> None:
    with pytest.raises(ValueError, match="--temperature: a builtin agent cannot honour"):
        load_agent("random", config=AgentConfig(temperature=0.1))
    with pytest.raises(ValueError, match="--system-prompt, --header: a module agent"):
        load_agent(
            "tests.support.scripted_agent:ScriptedAgent", config=AgentConfig(system_prompt="x", header=("A: b",))
        )
    with pytest.raises(ValueError, match="--tools: a model agent"):
        load_agent("tiny", config=AgentConfig(tools="never"))
    assert load_agent("random", config=AgentConfig(concurrency=4)).name  # the harness's setting: every kind
