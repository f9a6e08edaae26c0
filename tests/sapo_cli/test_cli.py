"""The sapo-gym command line, run as a user would."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sapo_cli", *args], input=stdin, capture_output=True, text=True, timeout=300
    )


def test_envs_lists_every_id() -> None:
    out = _cli("envs")
    assert out.returncode == 0
    for env_id in ("sapo/ALFWorld-v0", "sapo/WebShop-v0", "sapo/Vault-v0"):
        assert env_id in out.stdout
    assert "horizon=50" in out.stdout and "horizon=15" in out.stdout


def _listed_splits(stdout: str) -> dict[str, dict[str, tuple[int, str]]]:
    """env id -> split -> (tasks, dataset), and env id -> default evaluation split under the key ''."""
    table: dict[str, dict[str, tuple[int, str]]] = {}
    env_id = ""
    for line in stdout.splitlines():
        if line and not line.startswith(" "):
            env_id = line.split()[0]
            table[env_id] = {}
        elif line.startswith("    split "):
            _, split, tasks, _, dataset = line.split(maxsplit=4)
            table[env_id][split] = (int(tasks.replace(",", "")), dataset)
        elif line.startswith("    default evaluation split: "):
            table[env_id][""] = (0, line.split(": ", 1)[1].split()[0])
    return table


def test_envs_lists_each_split_with_its_task_count_and_the_default_evaluation_split() -> None:
    import gymnasium as gym

    import sapo_gym

    listed = _listed_splits(_cli("envs").stdout)
    assert set(listed) == set(sapo_gym.ENVS)
    for env_id, entry in sapo_gym.ENVS.items():
        assert listed[env_id][""][1] == entry.eval_splits[0], env_id
        names = entry.split_names()
        assert names and set(listed[env_id]) - {""} == set(names), env_id
        with pytest.raises(ValueError, match="valid choices") as bad:  # the names are the ones the backend accepts
            gym.make(env_id, split="no-such-split", prompt=None)
        assert all(repr(name) in str(bad.value) for name in names), (env_id, str(bad.value))
        for split in names:
            env = gym.make(env_id, split=split, prompt=None)
            assert listed[env_id][split] == (len(env.unwrapped.task_ids), env.unwrapped.spec_fields()["dataset"]), (
                env_id,
                split,
            )
            env.close()
    assert listed["sapo/Vault-v0"]["test"][0] == 16
    assert "eval_out_of_distribution" in listed["sapo/ALFWorld-v0"]
    names_only = _cli("envs", "--no-counts")
    assert (
        names_only.returncode == 0
        and "splits: train, eval_in_distribution, eval_out_of_distribution" in names_only.stdout
    )


def test_evaluate_names_split_and_mode_in_the_table_and_json(tmp_path) -> None:
    path = tmp_path / "out.json"
    out = _cli(
        "evaluate",
        "--env",
        "sapo/Vault-v0",
        "--agent",
        "random",
        "--mode",
        "verl-agent",
        "--workers",
        "6",
        "--seeds",
        "0,1",
        "--json",
        str(path),
    )
    assert out.returncode == 0, out.stderr
    assert "split=test · mode=verl-agent (6 workers seeded seed+1000+i, round 0)" in out.stdout
    data = json.loads(path.read_text())
    assert data["split"] == "test" and data["mode"] == {
        "name": "verl-agent",
        "workers": 6,
        "seed_offset": 1000,
        "round": 0,
    }
    assert [e["seed"] for e in data["episodes"]] == [0] * 6 + [1] * 6
    out = _cli("evaluate", "--env", "sapo/Vault-v0", "--agent", "random", "--mode", "sampled")
    assert out.returncode == 2 and "valid choices: ['every-task', 'verl-agent']" in out.stderr


def test_evaluate_prints_table_and_writes_json(tmp_path) -> None:
    path = tmp_path / "out.json"
    out = _cli("evaluate", "--env", "sapo/Vault-v0", "--agent", "expert", "--split", "test", "--json", str(path))
    assert out.returncode == 0, out.stderr
    assert "100.0%" in out.stdout and "code2" in out.stdout
    data = json.loads(path.read_text())
    assert len(data["episodes"]) == 16 and data["summary"]["all"]["success"] == 1.0


def test_evaluate_defaults_to_the_evaluation_split() -> None:
    out = _cli("evaluate", "--env", "sapo/Vault-v0", "--agent", "random")
    assert out.returncode == 0, out.stderr
    assert "split=test" in out.stdout


def test_play_in_the_terminal() -> None:
    import gymnasium as gym

    import sapo_gym  # noqa: F401

    env = gym.make("sapo/Vault-v0", prompt=None)
    _, info = env.reset(seed=0, options={"task_id": "vault-train-004"})
    code = env.unwrapped.codes[4]
    stdin = "".join(f"press {c}\n" for c in code)
    out = _cli("play", "sapo/Vault-v0", "--task-id", "vault-train-004", stdin=stdin)
    assert out.returncode == 0, out.stderr
    assert "The vault opens" in out.stdout and "episode over: won, return 10" in out.stdout
    out = _cli("play", "sapo/Vault-v0", stdin="press purple\nquit\n")
    assert "admissible=False" in out.stdout and "bye" in out.stdout


def test_bad_env_and_split_errors_are_clear() -> None:
    out = _cli("evaluate", "--env", "sapo/Vault-v0", "--split", "nope")
    assert out.returncode == 2 and "valid choices" in out.stderr
