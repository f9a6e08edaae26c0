"""Submitted agents run in a process of their own: the unmodified ``sapo-gym evaluate``
gives a ``module:Class`` agent nothing but the public observation and info, and its bundle says so."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agents.isolated import AgentProcessError, IsolatedResponder, agent_process, isolate, load_for_harness
from sapo_cli import main
from sapo_gym.interfaces import TurnResponder

ATTACKS = "tests.support.isolation"


def _evaluate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, *extra: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``sapo-gym evaluate`` of ``spec`` on Vault's test split: (the bundle, what the agent reported)."""
    report, out = tmp_path / "report.json", tmp_path / "bundle.json"
    report.unlink(missing_ok=True)
    monkeypatch.setenv("SAPO_ATTACK_REPORT", str(report))
    assert (
        main(
            [
                "evaluate",
                "--env",
                "sapo/Vault-v0",
                "--split",
                "test",
                "--agent",
                spec,
                "--batch-size",
                "4",
                "--out",
                str(out),
                *extra,
            ]
        )
        == 0
    )
    return json.loads(out.read_text()), json.loads(report.read_text()) if report.exists() else {}


@pytest.mark.parametrize("attack", ["FrameAgent", "GcAgent"])
def test_frame_and_gc_attacks_get_nothing_from_the_unmodified_harness(tmp_path, monkeypatch, attack: str) -> None:  # type: ignore[no-untyped-def]
    """(a) caller frames, (b) env objects on the heap: 100 % in the harness's process, nothing once isolated."""
    bundle, report = _evaluate(tmp_path, monkeypatch, f"{ATTACKS}:{attack}")
    assert report["pid"] != os.getpid() and report["turns"] > 0
    assert report["found"] == 0 and report["stolen"] == 0, report  # no info dict with expert_action, no env object
    assert bundle["aggregates"]["all"]["success"] == 0.0  # what an agent that only says 'look' gets
    assert bundle["evaluation"]["harness"] == {
        "info_filter": "public",
        "withheld_keys": ["expert_action", "pddl_params"],
        "privileged_agent": False,
        "agent_process": "isolated",
    }
    # the control: the same agent run in the harness's process steals every turn, and the bundle says in-process
    bundle, report = _evaluate(tmp_path, monkeypatch, f"{ATTACKS}:{attack}", "--agent-process", "in-process")
    assert report["pid"] == os.getpid() and report["found"] > 0 and report["stolen"] == report["turns"], report
    assert bundle["aggregates"]["all"]["success"] == 1.0
    assert bundle["evaluation"]["harness"]["agent_process"] == "in-process"
    assert bundle["evaluation"]["harness"]["privileged_agent"] is False


def test_a_lookup_of_the_public_game_still_wins_and_is_marked_isolated(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """(c) an agent that builds the env itself is not stopped by a process boundary (docs/leaderboard.md says
    so): the mark records how the agent ran, not that it could not look the game up."""
    bundle, report = _evaluate(tmp_path, monkeypatch, f"{ATTACKS}:OwnEnvAgent")
    assert report["pid"] != os.getpid() and report["found"] == 16 and report["stolen"] == report["turns"]
    assert bundle["aggregates"]["all"]["success"] == 1.0
    assert bundle["evaluation"]["harness"]["agent_process"] == "isolated"
    assert bundle["evaluation"]["harness"]["privileged_agent"] is False


def test_an_honest_module_agent_plays_the_same_episodes_isolated_and_in_process(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``agents.baselines:RandomAgent`` named as a module:Class spec (so isolated by default), seeded, two seeds."""
    bundles = {}
    for process in ("auto", "in-process"):
        bundles[process], _ = _evaluate(
            tmp_path, monkeypatch, "agents.baselines:RandomAgent", "--seeds", "0,1", "--agent-process", process
        )
    isolated, in_process = bundles["auto"], bundles["in-process"]
    assert json.dumps(isolated["episodes"]) == json.dumps(in_process["episodes"])  # the same outputs, the same episodes
    assert isolated["aggregates"] == in_process["aggregates"] and 0.0 < isolated["aggregates"]["all"]["success"] < 1.0
    assert isolated["evaluation"]["harness"]["agent_process"] == "isolated"
    assert in_process["evaluation"]["harness"]["agent_process"] == "in-process"
    # the built-in baselines stay in process by default (trusted code; the expert is declared privileged)
    bundle, _ = _evaluate(tmp_path, monkeypatch, "random", "--seeds", "0,1")
    assert bundle["evaluation"]["harness"]["agent_process"] == "in-process"
    assert json.dumps(bundle["episodes"]) == json.dumps(isolated["episodes"])  # the same RandomAgent(seed=0)


def test_the_proxy_hands_over_json_infos_with_arrays_rebuilt(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    report = tmp_path / "report.json"
    monkeypatch.setenv("SAPO_ATTACK_REPORT", str(report))
    with isolate(f"{ATTACKS}:InfoTypesAgent", seed=5) as agent:
        assert agent.name == "info-types" and agent.privileged is False and agent_process(agent) == "isolated"
        assert not isinstance(agent, TurnResponder)  # a batch agent: the harness plays it in lockstep
        agent.reset(1)
        info = {
            "task_id": "t",
            "step": 0,
            "action_mask": np.ones(3, dtype=bool),
            "score": np.float32(0.5),
            "admissible_actions": ("look", "press red"),
        }
        assert agent.act(["obs"], [info]) == ["<think></think><action>look</action>"]
        seen = json.loads(report.read_text())
        assert seen["pid"] != os.getpid() and seen["seed"] == 5
        assert seen["types"] == {
            "task_id": "builtins.str",
            "step": "builtins.int",
            "action_mask": "numpy.ndarray[bool]",
            "score": "builtins.float",
            "admissible_actions": "builtins.list",
        }
        with pytest.raises(AgentProcessError, match="the agent exploded"):  # the child's traceback, and it lives on
            agent.act(["obs"], [{"task_id": "explode"}])
        with pytest.raises(AgentProcessError, match="num_envs must be"):
            agent.reset(-1)
        assert (
            agent.act(["a", "b"], [{"task_id": "x"}, {"task_id": "y"}]) == ["<think></think><action>look</action>"] * 2
        )
    with pytest.raises(AgentProcessError, match="closed"):
        agent.act(["obs"], [{"task_id": "t"}])
    with pytest.raises(ValueError, match="cannot load agent"):  # a bad spec fails as load_agent's would
        isolate("tests.support.isolation:NoSuchAgent")
    with pytest.raises(ValueError, match="valid choices"):
        load_for_harness("random", process="elsewhere")
    assert agent_process(load_for_harness("random")) == "in-process"


@pytest.mark.parametrize("spec", ["SurrogateAgent", "UnsendableAgent"])
def test_an_answer_that_cannot_be_encoded_fails_that_request_and_never_hangs(spec: str) -> None:
    """A lone surrogate or a non-JSON value in a reply: the request gets an error reply (the child lives on)."""
    import threading

    outcome: list[Any] = []
    with isolate(f"tests.support.hostile_agents:{spec}") as agent:
        assert isinstance(agent, IsolatedResponder) and isinstance(agent, TurnResponder)  # its agent has respond

        def call() -> None:
            try:
                outcome.append(agent.respond("The panel glows red.", {}))
            except AgentProcessError as exc:
                outcome.append(exc)

        thread = threading.Thread(target=call, daemon=True)
        thread.start()
        thread.join(120)
        assert not thread.is_alive(), "respond never returned"
        assert isinstance(outcome[0], AgentProcessError) and "cannot be sent to the harness" in str(outcome[0])
        with pytest.raises(AgentProcessError, match="cannot be sent"):  # the child still answers the next request
            agent.respond("The panel glows blue.", {})
