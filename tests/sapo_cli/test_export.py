"""``sapo-gym export``: episodes logs and bundles of sapo/Vault-v0 to datasets, the masks, and the refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sapo_cli import main
from sapo_cli.export_data import load_export

TOKENIZER = str(Path(__file__).resolve().parents[2] / "agents" / "assets" / "sapo-tiny-tokenizer.json")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An expert's episodes log (train split) and result bundle (test split) of sapo/Vault-v0."""
    where = tmp_path_factory.mktemp("runs")
    assert (
        main(
            [
                "evaluate",
                "--env",
                "sapo/Vault-v0",
                "--agent",
                "expert",
                "--split",
                "train",
                "--json",
                str(where / "train.json"),
            ]
        )
        == 0
    )
    assert main(["evaluate", "--env", "sapo/Vault-v0", "--agent", "expert", "--out", str(where / "test.json")]) == 0
    return {"log": where / "train.json.episodes.jsonl", "bundle": where / "test.json"}


def _export(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["export", *argv])
    return code, capsys.readouterr().err


def test_a_log_exports_every_turn_with_the_env_messages_and_an_assistant_mask(runs, tmp_path, capsys):
    code, _ = _export(capsys, str(runs["log"]), str(tmp_path / "ds"), "--tokenizer", TOKENIZER)
    assert code == 0
    head = json.loads(runs["log"].read_text().splitlines()[0])["run"]
    meta = json.loads((tmp_path / "ds" / "metadata.json").read_text())
    assert meta["env"]["spec_hash"] == head["spec_hash"] and meta["env"]["protocol"] == "verl-agent-v1"
    assert meta["episodes"] == 16 and meta["turns"] == 32
    ds = load_export(tmp_path / "ds")
    assert json.loads(ds.info.description) == meta and len(ds) == 32
    from agents.offline_models import project_tokenizer

    tokenizer = project_tokenizer()
    for row in ds:
        roles = [m["role"] for m in row["messages"]]
        assert roles[0] == "system" and roles[-1] == "assistant" and set(roles[1:-1]) <= {"user", "assistant"}
        assert row["messages"][-1]["content"] == row["completion"] and row["completion"].endswith(
            f"<action>{row['action']}</action>"
        )
        assert "Admissible actions" in row["messages"][-2]["content"]
        trained = [t for t, m in zip(row["input_ids"], row["assistant_masks"]) if m]
        assert tokenizer.decode(trained) == row["completion"] + "<|im_end|>\n"
        assert row["assistant_masks"] == sorted(row["assistant_masks"])  # zeros, then the reply's ones
    assert [r["return_to_go"] for r in ds if r["task_id"] == ds[0]["task_id"]] == [10.0, 10.0]


def test_the_prompt_view_tokenizes_as_the_policy_prompts(runs, tmp_path, capsys):
    from agents.policy import PolicyModel

    assert (
        _export(capsys, str(runs["bundle"]), str(tmp_path / "ds"), "--view", "prompt", "--tokenizer", TOKENIZER)[0] == 0
    )
    ds = load_export(tmp_path / "ds")
    assert json.loads(ds.info.description)["source"]["kind"] == "bundle" and len(ds) == 32
    policy = PolicyModel.tiny()
    for row in ds.select(range(4)):
        assert [m["role"] for m in row["messages"]] == ["user", "assistant"]
        prompt = policy.encode_prompts([row["prompt"]], max_tokens=4096).token_ids[0]
        assert row["input_ids"][: len(prompt)] == prompt and sum(row["assistant_masks"]) == len(row["input_ids"]) - len(
            prompt
        )


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".ds."))


def _rewrite_line(log: Path, target: Path, number: int, edit) -> Path:
    lines = log.read_text().splitlines(keepends=True)
    lines[number] = edit(lines[number])
    target.write_text("".join(lines))
    return target


def _other_env(line: str) -> str:
    head = json.loads(line)
    head["run"]["env_id"] = "sapo/ALFWorld-Mini-v0"
    return json.dumps(head) + "\n"


def _other_outputs(line: str) -> str:
    entry = json.loads(line)
    for turn in entry["record"]["turns"]:
        turn["output"] = "<think></think><action>look</action>"
    return json.dumps(entry) + "\n"


def _no_record(line: str) -> str:
    return json.dumps({k: v for k, v in json.loads(line).items() if k != "record"}) + "\n"


BAD_LOGS = {
    "another env than the header claims": (lambda log, t: _rewrite_line(log, t, 0, _other_env), "spec hash"),
    "another spec hash": (
        lambda log, t: _rewrite_line(log, t, 0, lambda s: s.replace(json.loads(s)["run"]["spec_hash"], "0" * 16)),
        "spec hash 0000000000000000",
    ),
    "outputs that do not replay": (lambda log, t: _rewrite_line(log, t, 3, _other_outputs), "does not replay"),
    "a truncated last line": (lambda log, t: (t.write_bytes(log.read_bytes()[:-40]), t)[1], "truncated"),
    "a malformed line": (lambda log, t: _rewrite_line(log, t, 2, lambda s: s[:30] + "\n"), "damaged"),
    "an episode line without its record": (
        lambda log, t: _rewrite_line(log, t, 2, _no_record),
        "holds no valid episode record",
    ),
    "not a log at all": (lambda log, t: (t.write_text("hello\n"), t)[1], "neither an episodes log"),
}


@pytest.mark.parametrize("case", sorted(BAD_LOGS))
def test_a_bad_log_is_refused_on_one_line_and_nothing_is_written(case, runs, tmp_path, capsys):
    make, expected = BAD_LOGS[case]
    bad = make(runs["log"], tmp_path / "bad.jsonl")
    code, err = _export(capsys, str(bad), str(tmp_path / "ds"), "--tokenizer", TOKENIZER)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and expected in err, err
    assert not (tmp_path / "ds").exists() and _leftovers(tmp_path) == []


def test_a_missing_tokenizer_or_an_existing_folder_is_refused(runs, tmp_path, capsys):
    code, err = _export(capsys, str(runs["log"]), str(tmp_path / "ds"), "--tokenizer", str(tmp_path / "nowhere"))
    assert (
        code == 2 and err.startswith("error: --tokenizer") and err.count("\n") == 1 and not (tmp_path / "ds").exists()
    )
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "mine").write_text("kept")
    code, err = _export(capsys, str(runs["log"]), str(tmp_path / "ds"))
    assert code == 2 and "--overwrite" in err and (tmp_path / "ds" / "mine").read_text() == "kept"
    assert _export(capsys, str(runs["log"]), str(tmp_path / "ds"), "--overwrite")[0] == 0
    assert (
        sorted(p.name for p in (tmp_path / "ds").iterdir()) == ["metadata.json", "train.parquet"]
        and _leftovers(tmp_path) == []
    )


def test_a_write_that_fails_leaves_nothing(runs, tmp_path, capsys, monkeypatch):
    import datasets

    def broken(self, path, **kwargs):
        Path(path).write_bytes(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(datasets.Dataset, "to_parquet", broken)
    with pytest.raises(OSError):
        main(["export", str(runs["log"]), str(tmp_path / "ds")])
    assert not (tmp_path / "ds").exists() and _leftovers(tmp_path) == []


def _held_out(policy) -> tuple[float, float]:
    """(success, invalid-action rate) of ``policy`` on the 16 held-out codes, greedy, as the project evaluates."""
    import torch

    from agents.generation.base import GenerationParams
    from agents.llm import LLMAgent
    from sapo_gym.evaluation import evaluate

    agent = LLMAgent(policy, params=GenerationParams(max_new_tokens=24, temperature=0.0))
    with torch.no_grad():
        records = evaluate(
            agent,
            "sapo/Vault-v0",
            split="test",
            seeds=(0,),
            batch_size=16,
            env_kwargs={"num_buttons": 2},
            progress=False,
        )
    steps = sum(r.steps for r in records)
    return sum(r.success for r in records) / len(records), sum(r.invalid_actions for r in records) / steps


@pytest.mark.slow
def test_sft_on_exported_expert_episodes_beats_the_untrained_policy(tmp_path, capsys):
    """TRL's SFTTrainer on the exported input_ids and assistant_masks teaches the tiny random-init Qwen2 the answer
    format and the vault's buttons; held-out success rises above the untrained policy's."""
    from trl import SFTConfig, SFTTrainer

    from agents.policy import PolicyModel

    assert (
        main(
            [
                "evaluate",
                "--env",
                "sapo/Vault-v0",
                "--agent",
                "expert",
                "--split",
                "train",
                "--env-arg",
                "num_buttons=2",
                "--json",
                str(tmp_path / "train.json"),
            ]
        )
        == 0
    )
    assert (
        _export(
            capsys,
            str(tmp_path / "train.json.episodes.jsonl"),
            str(tmp_path / "ds"),
            "--view",
            "prompt",
            "--tokenizer",
            TOKENIZER,
        )[0]
        == 0
    )
    data = load_export(tmp_path / "ds").select_columns(["input_ids", "assistant_masks"])
    policy = PolicyModel.tiny(seed=0)
    before, invalid_before = _held_out(policy)
    config = SFTConfig(
        output_dir=str(tmp_path / "sft"),
        max_steps=150,
        per_device_train_batch_size=8,
        learning_rate=3e-3,
        lr_scheduler_type="constant",
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
        logging_strategy="no",
    )
    SFTTrainer(model=policy.model, args=config, train_dataset=data, processing_class=policy.tokenizer).train()
    policy.model.eval()
    after, invalid_after = _held_out(policy)
    assert invalid_before > 0.9 and invalid_after < 0.1, (invalid_before, invalid_after)
    assert after > before, (before, after)
