"""Result bundles: the shipped schema, building from evaluation records, the evaluate CLI, strict parsing."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from sapo_cli import main
from sapo_gym.bundle import (
    BUNDLE_VERSION,
    AgentInfo,
    BundleError,
    build_bundle,
    check_bundle,
    load_schema,
    parse_bundle,
)
from sapo_gym.evaluation import summarize


def test_schema_is_a_valid_documented_draft_2020_12_schema() -> None:
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["version"]["const"] == BUNDLE_VERSION
    undocumented = []

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            undocumented.extend(f"{path}.{k}" for k, v in node.get("properties", {}).items() if "description" not in v)
            for key, value in node.items():
                walk(value, f"{path}.{key}")

    walk(schema, "")
    assert not undocumented, f"schema fields without a description: {undocumented}"


def test_build_bundle_from_records_matches_the_harness_summary(vault_board) -> None:  # type: ignore[no-untyped-def]
    from agents.registry import load_agent
    from sapo_gym.evaluation import evaluate

    records = evaluate(load_agent("random", seed=3), vault_board.env_id, split="test", seeds=[0, 1], progress=False)
    bundle = build_bundle(records, vault_board.spec_fields, vault_board.spec_hash, AgentInfo(name="r"), [0, 1])
    check_bundle(json.loads(json.dumps(bundle)))
    assert len(bundle["episodes"]) == 2 * len(vault_board.task_ids)
    harness = summarize(records)
    for category, row in harness.items():
        for key in ("episodes", "success", "success_ci_low", "success_ci_high", "score", "steps", "invalid_rate"):
            # the same functions (sapo_gym.intervals) over the same values in the same order: equal, bit for bit
            assert bundle["aggregates"][category][key] == row[key], (category, key)
    first = records[0]
    ep = bundle["episodes"][0]
    assert [t["output"] for t in ep["turns"]] == [t.output for t in first.turns]
    assert ep["return"] == first.episode_return and ep["initial_observation"] == first.initial_observation


def test_evaluate_cli_writes_a_valid_bundle_with_agent_metadata(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bundle.json"
    rc = main(
        [
            "evaluate",
            "--env",
            "sapo/Vault-v0",
            "--split",
            "test",
            "--agent",
            "random",
            "--out",
            str(out),
            "--agent-name",
            "my agent",
            "--agent-parameters",
            "1500000000",
            "--agent-algorithm",
            "SAPO",
            "--agent-code-url",
            "https://example.org/code",
        ]
    )
    assert rc == 0 and "wrote result bundle" in capsys.readouterr().out
    bundle = parse_bundle(out.read_bytes())
    check_bundle(bundle)
    assert bundle["agent"] == {
        "name": "my agent",
        "parameters": 1500000000,
        "algorithm": "SAPO",
        "code_url": "https://example.org/code",
        "spec": "random",
    }
    assert bundle["env"]["id"] == "sapo/Vault-v0" and bundle["env"]["split"] == "test"
    assert bundle["evaluation"]["seeds"] == [0]
    assert main(["evaluate", "--env", "sapo/Vault-v0", "--agent", "expert", "--out", str(out)]) == 0
    assert parse_bundle(out.read_bytes())["env"]["split"] == "test"  # the board's split, not the env's default "train"


@pytest.mark.parametrize(
    "text, message",
    [
        (b'{"format": ', "malformed JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"x": NaN}', "NaN and Infinity"),
        (b'{"x": -Infinity}', "NaN and Infinity"),
        (b'{"x": 1e400}', "overflows"),
        (b"\xff\xfe{}", "UTF-8"),
        (b"[" * 100000 + b"]" * 100000, "malformed JSON"),
    ],
)
def test_parse_bundle_is_strict(text: bytes, message: str) -> None:
    with pytest.raises(BundleError, match=message) as info:
        parse_bundle(text)
    assert info.value.status == 400


@pytest.mark.parametrize(
    "tamper, message",
    [
        (lambda b: b.__setitem__("version", 2), "unsupported bundle version 2"),
        (lambda b: b["episodes"][0].__setitem__("steps", 9), "steps=9 but it has"),
        (lambda b: b["episodes"][0].__setitem__("invalid_actions", 1), "invalid_actions=1"),
        (lambda b: b["episodes"][0].__setitem__("return", 99.0), "return=99.0"),
        (lambda b: b["episodes"][0].__setitem__("score", 1.5), "episodes\\[0\\].score"),
        (lambda b: b["episodes"][0].__setitem__("seed", 7), "seeds \\[7\\]"),
        (lambda b: b["agent"].__setitem__("name", "<b>x</b>"), "agent.name"),
        (lambda b: b.__setitem__("extra", 1), "Additional properties"),
        (lambda b: b.__setitem__("created", "yesterday"), "created"),
    ],
)
def test_check_bundle_rejects_inconsistent_bundles(random_bundle, tamper, message: str) -> None:  # type: ignore[no-untyped-def]
    tamper(random_bundle)
    with pytest.raises(BundleError, match=message):
        check_bundle(random_bundle)


def test_forged_aggregates_are_rejected(random_bundle) -> None:  # type: ignore[no-untyped-def]
    random_bundle["aggregates"]["all"]["success"] = 1.0
    with pytest.raises(BundleError, match="forged"):
        check_bundle(random_bundle)


# ------------------------------------------------------------------ evaluation mode (split and mode of a number)
def test_bundles_record_the_evaluation_mode_and_old_bundles_stay_valid(random_bundle, vault_board) -> None:  # type: ignore[no-untyped-def]
    from agents import RandomAgent
    from sapo_gym.bundle import evaluation_mode_name
    from sapo_gym.evaluation import evaluate
    from sapo_gym.records import evaluation_mode

    assert random_bundle["evaluation"]["mode"] == {"name": "every-task"}
    old = json.loads(json.dumps(random_bundle))
    del old["evaluation"]["mode"]  # written before the field existed
    check_bundle(old)
    assert evaluation_mode_name(old) == "every-task"
    mode = evaluation_mode("verl-agent", workers=12, round=2)
    records = evaluate(RandomAgent(seed=1), vault_board.env_id, split="test", seeds=[4], progress=False, mode=mode)
    bundle = json.loads(
        json.dumps(
            build_bundle(records, vault_board.spec_fields, vault_board.spec_hash, AgentInfo(name="r"), [4], mode=mode)
        )
    )
    check_bundle(bundle)
    assert bundle["env"]["split"] == "test" and evaluation_mode_name(bundle) == "verl-agent"
    assert bundle["evaluation"]["mode"] == {"name": "verl-agent", "workers": 12, "seed_offset": 1000, "round": 2}
    assert bundle["aggregates"]["all"]["episodes"] == 12
    for category, row in summarize(records).items():  # tasks repeat in this mode: the table still is the bundle's
        assert {k: bundle["aggregates"][category][k] for k in row} == row, category
    bundle["evaluation"]["mode"]["workers"] = 13
    with pytest.raises(BundleError, match="seed 4: 12 episodes, but the verl-agent mode plays one per worker \\(13\\)"):
        check_bundle(bundle)
    bundle["evaluation"]["mode"] = {"name": "sampled"}
    with pytest.raises(BundleError, match="evaluation.mode.name"):
        check_bundle(bundle)


def test_boards_admit_every_task_bundles_only(random_bundle, boards) -> None:  # type: ignore[no-untyped-def]
    from leaderboard.checks import admit

    board = admit(random_bundle, boards)
    assert board.key == "sapo/Vault-v0:test"
    random_bundle["evaluation"]["mode"] = {
        "name": "verl-agent",
        "workers": len(board.task_ids),
        "seed_offset": 1000,
        "round": 0,
    }
    with pytest.raises(BundleError, match="boards rank every-task evaluations only"):
        admit(random_bundle, boards)
