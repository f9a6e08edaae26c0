"""The SkyRL adapter (sapo_gym.integrations.skyrl) driven as SkyRL's generator drives skyrl-gym envs
(tests.support.skyrl_generator): with the expert as the scripted model, every episode is in-process play of the
same task and seed; the rows survive SkyRL's Parquet files; the env's record file becomes a bundle that the board
admits and replay-verifies."""

from __future__ import annotations

import json

import pytest

skyrl_gym = pytest.importorskip("skyrl_gym", reason="the skyrl extra (skyrl-gym==0.4.0) is not installed")

from leaderboard.boards import BoardRegistry  # noqa: E402
from leaderboard.checks import admit  # noqa: E402
from leaderboard.replay import replay_bundle  # noqa: E402
from sapo_cli.bundle import bundle_from_payloads  # noqa: E402
from sapo_gym.bundle import AgentInfo  # noqa: E402
from sapo_gym.integrations.episodes import PAYLOAD_KEY, bundle_inputs, read_payloads  # noqa: E402
from sapo_gym.integrations.skyrl import ENV_CLASS, SapoTextEnv, dataset_rows  # noqa: E402
from tests.support.integrations import expert_script, play, scripted_model  # noqa: E402
from tests.support.skyrl_generator import agent_loop  # noqa: E402

CASES = [("sapo/ALFWorld-Mini-v0", "eval_out_of_distribution", 3), ("sapo/WebShop-Mini-v0", "test", 2)]


def _generate(script: dict[str, str]):
    reply = scripted_model(script)
    return lambda chat_history: reply({"messages": chat_history})


def test_registered_in_skyrl_gym_and_the_rows_survive_parquet(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    assert skyrl_gym.registry[ENV_CLASS].entry_point == "sapo_gym.integrations.skyrl:SapoTextEnv"
    rows = dataset_rows("sapo/Vault-v0", "test", seeds=(0,), env_args={"history_length": 1}, limit=2)
    pd.DataFrame(rows).to_parquet(tmp_path / "rows.parquet")
    back = pd.read_parquet(tmp_path / "rows.parquet").to_dict("records")
    env = skyrl_gym.make(back[1]["env_class"], env_config={}, extras={"extra_info": back[1]["extra_info"]})
    assert isinstance(env, SapoTextEnv) and env.row["env_args"] == {"history_length": 1}
    chat, meta = env.init([{"role": "system", "content": "Be brief."}, *list(back[1]["prompt"])])
    assert chat == [{"role": "system", "content": "Be brief."}, rows[1]["prompt"][0]]
    assert meta["row"]["spec_hash"] == rows[1]["extra_info"]["spec_hash"] and meta["row"]["task_id"] == "vault-test-001"
    env.close()


@pytest.mark.parametrize("env_id,split,tasks", CASES)
def test_generator_episodes_are_in_process_play(env_id, split, tasks):
    seeds = (0, 1)
    generate = _generate(expert_script(env_id, split, seeds, tasks))
    for row in dataset_rows(env_id, split, seeds, limit=tasks):
        extra = row["extra_info"]
        out = agent_loop(row["prompt"], row["env_class"], {"extra_info": extra}, generate, max_turns=extra["horizon"])
        replies = [m["content"] for m in out.chat_history if m["role"] == "assistant"]
        seen = play(env_id, split, extra["task_id"], extra["seed"], replies)
        prompts = [m["content"] for m in out.chat_history if m["role"] == "user"]
        assert prompts == seen.prompts and out.rewards == seen.rewards, (extra["task_id"], extra["seed"])
        assert seen.success and seen.done and len(replies) == seen.turns
        assert out.env_metrics["success"] == 1.0 and out.env_metrics["steps"] == seen.turns
        last = out.metadata[-1][PAYLOAD_KEY]
        assert last["complete"] and [t["observation"] for t in last["record"]["turns"]] == seen.raw_observations
        assert all(m["row"] == last["row"] for m in out.metadata) and last["row"]["protocol"] == "verl-agent-v1"


def test_max_turns_ends_the_episode_and_the_record_says_it_was_cut(tmp_path):
    record = tmp_path / "episodes.jsonl"
    row = dataset_rows("sapo/ALFWorld-Mini-v0", "eval_out_of_distribution", limit=1)[0]
    out = agent_loop(
        row["prompt"],
        ENV_CLASS,
        {"extra_info": row["extra_info"]},
        lambda chat: "<action>look</action>",
        max_turns=2,
        env_config={"record_path": str(record)},
    )
    assert len(out.rewards) == 2 and out.chat_history[-1]["role"] == "assistant"
    (payload,) = read_payloads(record)
    assert not payload["complete"] and payload["record"]["steps"] == 2
    with pytest.raises(ValueError, match="did not end"):
        bundle_inputs([payload])


def test_the_record_file_is_a_bundle_the_board_admits_and_replays(tmp_path):
    record = tmp_path / "episodes.jsonl"
    generate = _generate(expert_script("sapo/Vault-v0", "test", (0,), 16))
    for row in dataset_rows("sapo/Vault-v0", "test"):
        agent_loop(
            row["prompt"],
            row["env_class"],
            {"extra_info": row["extra_info"]},
            generate,
            max_turns=row["extra_info"]["horizon"],
            env_config={"record_path": str(record)},
        )
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(lines) == 16 and all(line[PAYLOAD_KEY]["complete"] for line in lines)
    bundle = bundle_from_payloads(read_payloads(record), AgentInfo("scripted expert", spec="skyrl-gym:scripted-expert"))
    board = admit(bundle, BoardRegistry(["sapo/Vault-v0:test"]))
    assert board.key == "sapo/Vault-v0:test" and bundle["aggregates"]["all"]["success"] == 1.0
    result = replay_bundle(bundle)
    assert result.verified and result.episodes == 16, result.message
