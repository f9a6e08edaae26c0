"""OpenAIChatAgent against a local OpenAI-style server that the test starts on a free port."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter

import pytest

flask = pytest.importorskip("flask")
from werkzeug.serving import make_server  # noqa: E402

from agents.openai_agent import OpenAIChatAgent, parse_openai_spec  # noqa: E402
from agents.registry import load_agent  # noqa: E402
from sapo_gym.evaluation import evaluate, summarize  # noqa: E402


def _vault_colour(prompt: str) -> str:
    return re.findall(r"The panel glows (\w+)\.", prompt)[-1]


def _vault_reply(prompt: str) -> str:
    colour = _vault_colour(prompt)
    return f"<think>The panel glows {colour}.</think><action>press {colour}</action>"


def _tool_reply(body: dict):
    """Models 'tool-model' (calls take_action), 'no-tools' (refuses tools as vLLM does without its flags,
    answers the call as JSON text) and 'tool-in-text' (ignores tools, writes the call as text)."""
    prompt = body["messages"][-1]["content"]
    call = {"name": "take_action", "arguments": json.dumps({"command": f"press {_vault_colour(prompt)}"})}
    if body["model"] == "no-tools" and "tools" in body:
        message = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
        return flask.jsonify({"object": "error", "message": message, "type": "BadRequestError", "code": 400}), 400
    if body["model"] == "tool-model":
        return {
            "role": "assistant",
            "content": "The panel says.",
            "tool_calls": [{"id": "c0", "type": "function", "function": call}],
        }
    return {
        "role": "assistant",
        "content": json.dumps({"name": call["name"], "arguments": json.loads(call["arguments"])}),
    }


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
        reply = (
            _tool_reply(body)
            if body["model"] in ("tool-model", "no-tools", "tool-in-text")
            else {"role": "assistant", "content": _vault_reply(prompt)}
        )
        if isinstance(reply, tuple):
            return reply
        return flask.jsonify(
            {
                "id": "x",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "message": reply, "finish_reason": "stop"}],
            }
        )

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
    records = evaluate(
        agent, "sapo/Vault-v0", task_ids=[f"vault-train-{i:03d}" for i in range(4)], batch_size=4, progress=False
    )
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


VAULT_TASKS = [f"vault-train-{i:03d}" for i in range(4)]


def _tool_episodes(agent: OpenAIChatAgent):
    records = evaluate(
        agent,
        "sapo/Vault-v0",
        task_ids=VAULT_TASKS,
        batch_size=4,
        progress=False,
        env_kwargs={"protocol": "tool-call-v1"},
    )
    return records, summarize(records)["all"]["success"]


def test_tool_call_env_gets_messages_tools_and_the_call_back(server):
    url, seen = server
    seen.clear()
    agent = OpenAIChatAgent(url, "tool-model", seed=0, system_prompt="Be brief.")
    records, success = _tool_episodes(agent)
    assert success == 1.0 and agent.server_tools is True
    assert all(t.valid and t.admissible and t.think == "The panel says." for r in records for t in r.turns)
    bodies = [s["body"] for s in seen]
    assert len(bodies) == sum(r.steps for r in records) == 8
    assert all(b["tools"][0]["function"]["name"] == "take_action" for b in bodies)
    assert all(
        b["messages"][0]["role"] == "system" and b["messages"][0]["content"].startswith("Be brief.\n\n") for b in bodies
    )
    later = [b for b in bodies if len(b["messages"]) > 2]
    assert later and all([m["role"] for m in b["messages"]] == ["system", "user", "assistant", "tool"] for b in later)
    # the env's own tool call comes back in the history of the next turn
    assert all(b["messages"][2]["tool_calls"][0]["function"]["name"] == "take_action" for b in later)


def test_text_envs_keep_the_prompt_even_with_a_tool_model(server):
    url, seen = server
    seen.clear()
    agent = OpenAIChatAgent(url, "fake-model", tools="always")
    records = evaluate(agent, "sapo/Vault-v0", task_ids=VAULT_TASKS[:2], batch_size=2, progress=False)
    assert summarize(records)["all"]["success"] == 1.0
    assert all("tools" not in s["body"] and len(s["body"]["messages"]) == 1 for s in seen)


def test_auto_falls_back_to_text_calls_when_the_server_refuses_tools(server):
    url, seen = server
    seen.clear()
    agent = OpenAIChatAgent(url, "no-tools")
    records, success = _tool_episodes(agent)
    assert success == 1.0 and agent.server_tools is False
    assert all(t.valid for r in records for t in r.turns)
    refused = [s for s in seen if "tools" in s["body"]]
    assert 1 <= len(refused) <= 4  # the first batch probes, once per request in flight; then never again
    text_turns = [s["body"] for s in seen if "tools" not in s["body"]]
    assert len(text_turns) == 8 and all(
        m["role"] in ("system", "user", "assistant") for b in text_turns for m in b["messages"]
    )
    assert all("This server takes no tools" in b["messages"][0]["content"] for b in text_turns)
    history = [m["content"] for b in text_turns for m in b["messages"] if m["role"] == "assistant"]
    assert history and all(json.loads(h)["name"] == "take_action" for h in history)  # past calls shown as JSON text


def test_always_raises_on_refusal_and_never_sends_tools(server):
    url, seen = server
    with pytest.raises(RuntimeError, match="HTTP 400"):
        _tool_episodes(OpenAIChatAgent(url, "no-tools", tools="always"))
    seen.clear()
    records, success = _tool_episodes(OpenAIChatAgent(url, "tool-in-text", tools="never"))
    assert success == 1.0 and all("tools" not in s["body"] for s in seen)
    with pytest.raises(ValueError, match="tools must be"):
        OpenAIChatAgent(url, "m", tools="sometimes")  # type: ignore[arg-type]
