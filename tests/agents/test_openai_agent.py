"""OpenAIChatAgent against a local OpenAI-style server that the test starts on a free port."""

from __future__ import annotations

import re
import threading
from collections import Counter

import pytest

flask = pytest.importorskip("flask")
from werkzeug.serving import make_server  # noqa: E402

from agents.openai_agent import OpenAIChatAgent, parse_openai_spec  # noqa: E402
from agents.registry import load_agent  # noqa: E402
from sapo_gym.evaluation import evaluate, summarize  # noqa: E402


def _vault_reply(prompt: str) -> str:
    colour = re.findall(r"The panel glows (\w+)\.", prompt)[-1]
    return f"<think>The panel glows {colour}.</think><action>press {colour}</action>"


@pytest.fixture(scope="module")
def server():
    """A chat-completions endpoint: solves Vault prompts; model 'flaky' fails each prompt's first try."""
    app = flask.Flask("fake-openai")
    seen: list[dict] = []
    attempts: Counter[str] = Counter()

    @app.post("/v1/chat/completions")
    def complete():
        body = flask.request.get_json()
        seen.append({"body": body, "auth": flask.request.headers.get("Authorization")})
        prompt = body["messages"][-1]["content"]
        attempts[prompt] += 1
        if body["model"] == "flaky" and attempts[prompt] == 1:
            return flask.jsonify({"error": "overloaded"}), 503
        if body["model"] == "broken":
            return flask.jsonify({"error": {"message": "unknown model"}}), 404
        reply = {"role": "assistant", "content": _vault_reply(prompt)}
        return flask.jsonify({"id": "x", "object": "chat.completion", "model": body["model"],
                              "choices": [{"index": 0, "message": reply, "finish_reason": "stop"}]})

    srv = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_port}/v1", seen
    srv.shutdown()
    thread.join()


def test_openai_agent_solves_vault_through_the_server(server):
    url, seen = server
    seen.clear()
    agent = load_agent(f"openai:{url}#fake-model", seed=3)
    assert isinstance(agent, OpenAIChatAgent) and agent.name == "openai:fake-model"
    records = evaluate(agent, "sapo/Vault-v0", task_ids=[f"vault-train-{i:03d}" for i in range(4)], batch_size=4, progress=False)
    assert summarize(records)["all"]["success"] == 1.0
    assert len(seen) == sum(r.steps for r in records) == 8
    body = seen[0]["body"]
    assert body["model"] == "fake-model" and body["temperature"] == 0.4 and body["messages"][0]["role"] == "user"
    assert sorted(s["body"]["seed"] for s in seen) == list(range(3, 11))  # one distinct seed per request


def test_retries_server_errors_and_sends_the_key(server):
    url, seen = server
    seen.clear()
    agent = OpenAIChatAgent(url, "flaky", api_key="sk-test", system_prompt="Be brief.")
    outputs = agent.act(["The panel glows red.", "The panel glows blue."], [{}, {}])
    assert outputs == [_vault_reply("The panel glows red."), _vault_reply("The panel glows blue.")]
    assert len(seen) == 4 and all(s["auth"] == "Bearer sk-test" for s in seen)
    assert seen[0]["body"]["messages"][0] == {"role": "system", "content": "Be brief."}


def test_client_errors_and_dead_servers_raise(server):
    url, _ = server
    with pytest.raises(RuntimeError, match="HTTP 404"):
        OpenAIChatAgent(url, "broken").act(["The panel glows red."], [{}])
    dead = OpenAIChatAgent("http://127.0.0.1:9/v1", "m", max_retries=1, timeout=2)
    with pytest.raises(RuntimeError, match="failed after 2 attempts"):
        dead.act(["hi"], [{}])


def test_spec_parsing():
    assert parse_openai_spec("openai:http://h:1/v1#org/model-7b") == ("http://h:1/v1", "org/model-7b")
    with pytest.raises(ValueError, match="openai:URL#MODEL"):
        parse_openai_spec("openai:http://h:1/v1")
