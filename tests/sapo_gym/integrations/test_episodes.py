"""sapo_gym.integrations.episodes: the task rows the adapters play, an episode played from replies (in-process play
exactly), the payloads read back for a bundle; and the light install: neither adapter's package comes with the
package, and a missing one is named with its extra."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from sapo_gym import ENVS
from sapo_gym.integrations.episodes import (
    PAYLOAD_KEY,
    ROW_KEYS,
    EpisodePlay,
    bundle_inputs,
    episode_metrics,
    read_payloads,
    task_rows,
)
from tests.support.blocked import run_without
from tests.support.integrations import expert_script, play

VAULT, MINI = "sapo/Vault-v0", "sapo/ALFWorld-Mini-v0"


def test_task_rows_are_every_task_once_per_seed_with_the_envs_identity():
    rows = task_rows(VAULT, "test", seeds=(0, 3))
    env = gym.make(VAULT, split="test")
    ids = list(env.unwrapped.task_ids)
    assert [(r["seed"], r["task_id"]) for r, _ in rows] == [(s, t) for s in (0, 3) for t in ids]
    fields = env.unwrapped.spec_fields()
    for row, first in rows:
        assert tuple(row) == ROW_KEYS
        assert (
            row["env_id"],
            row["split"],
            row["protocol"],
            row["horizon"],
            row["spec_hash"],
            row["prompt_template"],
        ) == (VAULT, "test", fields["protocol"], 4, env.unwrapped.spec_hash(), fields["prompt"])
        assert first == env.reset(seed=row["seed"], options={"task_id": row["task_id"]})[0]
        json.dumps(row)  # a row travels as JSON
    assert len(task_rows(MINI, "eval_out_of_distribution", limit=2)) == 2


@pytest.mark.parametrize("env_id", [env_id for env_id, entry in ENVS.items() if not entry.needs])
def test_every_registered_text_env_plays_from_its_row(env_id):
    entry = ENVS[env_id]
    row, first = task_rows(env_id, entry.eval_splits[0], limit=1)[0]
    assert (row["split"], row["horizon"], row["protocol"]) == (entry.eval_splits[0], entry.horizon, entry.protocol)
    episode = EpisodePlay(row)
    assert episode.observation == first
    episode.step("<think>Look first.</think><action>look</action>")
    assert episode.record.steps == 1 and episode.record.turns[0].action == "look"
    episode.close()


def test_an_episode_played_from_replies_is_in_process_play():
    script = expert_script(MINI, "eval_out_of_distribution", (1,), limit=1)
    row, first = task_rows(MINI, "eval_out_of_distribution", seeds=(1,), limit=1)[0]
    episode = EpisodePlay(row)
    prompts, rewards = [], []
    assert episode.observation == first
    while not episode.done:
        prompts.append(episode.observation)
        rewards.append(episode.step(script[episode.observation])[1])
    replies = [t.output for t in episode.record.turns]
    seen = play(MINI, "eval_out_of_distribution", row["task_id"], 1, replies)
    assert (prompts, rewards, episode.record.success, episode.record.steps) == (
        seen.prompts,
        seen.rewards,
        True,
        seen.turns,
    )
    assert [t.observation for t in episode.record.turns] == seen.raw_observations
    payload = episode.payload()
    assert payload["complete"] and payload["row"] == row and payload["spec_hash"] == row["spec_hash"]
    metrics = episode_metrics(episode.record)
    assert metrics["success"] == metrics[f"success/{episode.record.task_type}"] == 1.0
    with pytest.raises(RuntimeError, match="over"):
        episode.step("<action>look</action>")
    episode.close()
    with pytest.raises(ValueError, match="spec hash"):
        EpisodePlay({**row, "spec_hash": "0" * 16})


def _payload(task_index: int, replies: int, seed: int = 0) -> dict:
    row, _ = task_rows(VAULT, "test", seeds=(seed,), limit=task_index + 1)[task_index]
    episode = EpisodePlay(row)
    for _ in range(replies):
        if not episode.done:
            episode.step("<think>x</think><action>press red</action>")
    episode.close()
    return episode.payload()


def test_payloads_are_read_wherever_a_line_nests_them_and_checked_before_a_bundle(tmp_path):
    whole = [_payload(0, 4), _payload(1, 4)]
    path = tmp_path / "rollouts.jsonl"
    lines = [{"traces": [{"info": {PAYLOAD_KEY: whole[0]}}]}, {"other": 1}, {PAYLOAD_KEY: whole[1]}]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    assert read_payloads(path) == whole
    fields, spec_hash, records, seeds = bundle_inputs(whole)
    assert (spec_hash, seeds, [r.task_id for r in records]) == (
        whole[0]["spec_hash"],
        [0],
        ["vault-test-000", "vault-test-001"],
    )
    assert fields == whole[0]["spec_fields"]
    with pytest.raises(ValueError, match="did not end"):
        bundle_inputs([*whole, _payload(2, 1)])
    with pytest.raises(ValueError, match="several rollouts"):
        bundle_inputs([*whole, whole[0]])
    with pytest.raises(ValueError, match="one env"):
        bundle_inputs([*whole, {**whole[0], "spec_hash": "0" * 16}])
    (tmp_path / "none.jsonl").write_text(json.dumps({"other": 1}) + "\n")
    with pytest.raises(ValueError, match="no sapo_gym episodes"):
        bundle_inputs(read_payloads(tmp_path / "none.jsonl"))
    path.write_text("{not json\n")
    with pytest.raises(ValueError, match=":1: not JSON"):
        read_payloads(path)


_ADAPTERS = [
    ("sapo_gym.integrations.verifiers", "verifiers", ("verifiers",)),
    ("sapo_gym.integrations.skyrl", "skyrl", ("skyrl_gym",)),
]


def test_the_package_imports_no_ecosystem_and_a_missing_one_names_its_extra():
    light = (
        "import sys, sapo_gym, sapo_gym.integrations, sapo_gym.integrations.episodes\n"
        "print(sorted(m for m in ('verifiers', 'skyrl_gym', 'openai') if m in sys.modules))\n"
    )
    done = run_without(light, ())
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr[-2000:]
    for module, extra, hidden in _ADAPTERS:
        done = run_without(f"import {module}\n", hidden, hidden)
        assert done.returncode == 1, done.stderr[-2000:]
        assert f"pip install 'sapo-gym[{extra}]'" in done.stderr.strip().splitlines()[-1], done.stderr[-2000:]
