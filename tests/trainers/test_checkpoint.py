"""Checkpoint → resume reproduces the next iteration exactly on CPU, for every method."""

from __future__ import annotations

import pytest
import torch

from trainers.checkpoint import latest_checkpoint, load_checkpoint


@pytest.mark.parametrize(
    "algo,old_log_probs", [("sapo", "recompute"), ("ppo", "recompute"), ("grpo", "recompute"), ("sapo", "rollout")]
)
def test_resume_reproduces_the_next_losses(make_trainer, algo, old_log_probs):
    straight = make_trainer(algo, iterations=2, checkpoint_every=1, old_log_probs=old_log_probs)
    rows = straight.train()
    assert len(rows) == 2
    checkpoints = sorted((straight.out_dir / "checkpoints").glob("*.pt"))
    assert [p.name for p in checkpoints] == ["checkpoint-000001.pt", "checkpoint-000002.pt"]
    checkpoints[-1].unlink()  # as if the run died during iteration 2

    resumed = make_trainer(algo, iterations=2, checkpoint_every=1, resume=True, old_log_probs=old_log_probs)
    assert resumed.iteration == 1
    again = resumed.train()
    assert len(again) == 1
    for key in ("actor/loss", "actor/policy_loss", "rollout/success", "rollout/turns"):
        assert again[0][key] == rows[1][key], key
    if algo == "ppo":
        assert again[0]["critic/value_loss"] == rows[1]["critic/value_loss"]
    for (name, a), b in zip(straight.policy.model.named_parameters(), resumed.policy.model.parameters()):
        assert torch.equal(a, b), name
    lines = (resumed.out_dir / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2  # the resumed run rewrote iteration 1, it did not append a duplicate


def test_resume_refuses_a_different_config(make_trainer):
    make_trainer("sapo", iterations=1).train()
    with pytest.raises(ValueError, match="lr"):
        make_trainer("sapo", iterations=2, resume=True, lr=5e-4)


def test_checkpoint_holds_reference_and_rng(make_trainer):
    trainer = make_trainer("sapo", iterations=1, kl_coef=0.01)
    trainer.train()
    state = load_checkpoint(latest_checkpoint(trainer.out_dir))
    assert state["iteration"] == 1 and state["reference"] is not None
    assert set(state["rng"]) == {"torch", "shuffle", "python", "numpy"}
    assert state["config"]["algo"] == "sapo"
