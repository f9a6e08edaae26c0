"""The shared loop: metrics rows, phase timings, bad input (long prompts/responses, NaN losses)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from tests.support.params import moved, snapshot
from trainers.checkpoint import latest_checkpoint
from trainers.profiling import PHASES
from trainers.strategy import TrainingDiverged


def test_metrics_jsonl_has_phases_memory_and_rollout_stats(make_trainer):
    trainer = make_trainer("sapo", iterations=2, checkpoint_every=0)
    trainer.train()
    rows = [json.loads(line) for line in (trainer.out_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [0, 1]
    for row in rows:
        assert all(row[f"time/{p}"] >= 0 for p in PHASES)
        # the same sum of the same floats in the same order (PhaseTimer.as_metrics; JSON round-trips floats)
        assert row["time/iteration"] == sum(row[f"time/{p}"] for p in PHASES)
        assert row["memory/peak_bytes"] > sum(p.numel() * 4 for p in trainer.policy.model.parameters())
        assert 0 <= row["rollout/success"] <= 1 and row["rollout/turns"] >= 8
        assert row["time/generation"] > 0 and row["time/actor_update"] > 0
    assert [p.name for p in (trainer.out_dir / "checkpoints").glob("*.pt")] == ["checkpoint-000002.pt"]


def test_long_prompts_and_responses_are_truncated_and_counted(make_trainer):
    trainer = make_trainer("grpo", max_prompt_tokens=48, max_response_tokens=4)
    row = trainer.run_iteration()
    assert row["rollout/prompt_truncated"] == row["rollout/turns"]  # every Vault prompt is ~70 tokens
    assert row["rollout/response_truncated"] > 0
    assert math.isfinite(row["actor/loss"])


def test_nan_loss_stops_with_a_clear_error_and_keeps_the_last_checkpoint(make_trainer):
    trainer = make_trainer("sapo", iterations=3, checkpoint_every=1)
    trainer.run_iteration()
    good = trainer.save()
    before = {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters()}

    def poisoned(mb, logits, stats):
        return logits.action.new_tensor(float("nan"))

    trainer.method.value_terms = poisoned
    with pytest.raises(TrainingDiverged, match="non-finite actor loss .* last good checkpoint: .*checkpoint-000001.pt"):
        trainer.train()
    assert all(torch.equal(before[n], p) for n, p in trainer.policy.model.named_parameters())
    assert latest_checkpoint(trainer.out_dir) == good


def test_empty_generations_train_without_nan(make_trainer):
    trainer = make_trainer("ppo")
    eos = trainer.policy.tokenizer.eos_token_id

    def end_at_once(module, args, out):  # the model emits its end-of-turn token first, every time
        out.logits[..., :] = -1e4
        out.logits[..., eos] = 0.0
        return out

    handle = trainer.policy.model.register_forward_hook(end_at_once)
    try:
        rollout_row = trainer.run_iteration()
    finally:
        handle.remove()
    assert rollout_row["rollout/invalid_rate"] == 1.0 and rollout_row["rollout/response_tokens"] == 1.0
    assert math.isfinite(rollout_row["actor/loss"]) and math.isfinite(rollout_row["critic/value_loss"])


def test_cli_train_runs_end_to_end(tmp_path, capsys):
    from sapo_cli import main

    argv = [
        "train",
        "--algo",
        "grpo",
        "--env",
        "sapo/Vault-v0",
        "--iterations",
        "1",
        "--episodes-per-iteration",
        "4",
        "--group-size",
        "2",
        "--max-response-tokens",
        "6",
        "--prompt",
        "plain",
        "--history-length",
        "0",
        "--env-arg",
        "code_length=1",
        "--out-dir",
        str(tmp_path),
        "--no-progress",
        "--eval-split",
        "test",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "grpo: 1 iterations" in out and "success" in out
    assert (tmp_path / "metrics.jsonl").read_text().count("\n") == 1
    assert (tmp_path / "final" / "config.json").exists() and (tmp_path / "eval.json").exists()
    assert [p.name for p in (tmp_path / "checkpoints").glob("*.pt")] == ["checkpoint-000001.pt"]


def test_tensorboard_is_optional(tmp_path):
    import importlib.util

    from trainers.metrics import MetricsLogger

    if importlib.util.find_spec("tensorboard") is None:
        with pytest.raises(ValueError, match="pip install tensorboard"):
            MetricsLogger(tmp_path, tensorboard=True)
        return
    logger = MetricsLogger(tmp_path, tensorboard=True)
    logger.log({"iteration": 0, "rollout/success": 0.5})
    logger.close()
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))


def test_gradient_checkpointing_gives_the_same_update_with_less_memory(make_trainer):
    plain = make_trainer("sapo", micro_batch_size=4)  # each Trainer seeds torch: build, then step, one at a time
    a = plain.run_iteration()
    ckpt = make_trainer("sapo", micro_batch_size=4, gradient_checkpointing=True)
    b = ckpt.run_iteration()
    assert a["rollout/turns"] == b["rollout/turns"]
    # deterministic: the backward recomputes the same forward (same kernels, inputs and weights, one
    # process), so the losses, gradients and step are the same floats on every CPU kind
    assert b["actor/loss"] == a["actor/loss"]
    for (name, p), q in zip(plain.policy.model.named_parameters(), ckpt.policy.model.parameters()):
        assert torch.equal(p, q), name
    assert b["memory/peak_bytes"] < a["memory/peak_bytes"]


def test_bf16_autocast_update_is_finite(make_trainer):
    row = make_trainer("ppo", bf16=True).run_iteration()
    assert math.isfinite(row["actor/loss"]) and math.isfinite(row["critic/value_loss"])


@pytest.mark.parametrize("algo", ["ppo", "grpo"])
def test_a_critic_warmup_leaves_the_actor_of_a_method_with_its_own_critic_or_none(algo, make_trainer):
    """--critic-warmup 1: the first iteration does not move the actor (PPO trains its critic, GRPO has no value
    function to train); the second one does."""
    trainer = make_trainer(algo, critic_warmup=1)
    actor = snapshot(trainer.policy.model)
    critic = trainer.critic and snapshot(trainer.critic.module)
    row = trainer.run_iteration()
    assert not moved(actor, trainer.policy.model) and not any(k.startswith("actor/") for k in row)
    if critic is not None:
        assert moved(critic, trainer.critic.module) and "critic/value_loss" in row
    trainer.run_iteration()
    assert moved(actor, trainer.policy.model)


def test_a_run_with_a_critic_warmup_shows_its_progress(make_trainer):
    """A warm-up row has no actor statistics: the progress bar shows what the row has (it raised KeyError)."""
    trainer = make_trainer("grpo", critic_warmup=1, iterations=2, progress=True, checkpoint_every=0)
    rows = trainer.train()
    assert "actor/loss" not in rows[0] and "actor/loss" in rows[1]


def test_a_sapo_critic_warmup_trains_the_readout_without_the_policy_term(make_trainer):
    """SAPO's V and Q are the actor's: its warm-up update keeps them and drops the policy term. With c_V = c_Q = 0
    and no KL nothing is left, so Adam's first step (a zero gradient moves nothing) leaves the weights bit-equal;
    with the value terms on, the same iteration moves them."""
    for coef, moves in ((0.0, False), (0.1, True)):
        trainer = make_trainer("sapo", critic_warmup=1, value_coef=coef, q_coef=coef, kl_coef=0.0)
        before = snapshot(trainer.policy.model)
        row = trainer.run_iteration()
        assert moved(before, trainer.policy.model) == moves
        assert math.isfinite(row["actor/policy_loss"]) and "actor/value_loss" in row  # reported, not trained on


@pytest.mark.parametrize("algo", ["sapo", "ppo"])
def test_group_by_length_orders_the_batch_longest_first_and_trains(algo, make_trainer):
    from trainers.profiling import PhaseTimer

    trainer = make_trainer(algo, group_by_length=True, micro_batch_size=3)
    _, exp = trainer.collect_batch(PhaseTimer(trainer.device))
    lengths = exp.attention_mask.sum(1).tolist()
    assert lengths == sorted(lengths, reverse=True) and len(set(lengths)) > 1
    row = trainer.run_iteration()
    assert math.isfinite(row["actor/loss"]) and row["rollout/turns"] >= 8


def test_machinery_stats_by_hand():
    """One trajectory of 3 turns, rewards 0, 0, 10 at γ = 0.5: Monte-Carlo returns 2.5, 5, 10; a V_old equal to them
    explains all of their variance, and nothing of constant GAE targets (0 by definition when they do not vary)."""
    from types import SimpleNamespace as NS

    from trainers.loop import Trainer

    exp = NS(
        advantages=torch.tensor([0.0, 1.0, -1.0]),
        rewards=torch.tensor([0.0, 0.0, 10.0]),
        traj_ids=torch.tensor([7, 7, 7]),
        turn_idx=torch.tensor([0, 1, 2]),
        group_ids=torch.tensor([0, 0, 0]),
        old_values=torch.tensor([2.5, 5.0, 10.0]),
        value_targets=torch.tensor([4.0, 4.0, 4.0]),
    )
    stats = Trainer.machinery_stats(NS(cfg=NS(gamma=0.5, rollouts_per_task=1)), exp)
    assert stats == {
        "advantage/nonzero_turns": pytest.approx(2 / 3),
        "value/explained_var": 0.0,
        "value/explained_var_mc": 1.0,
    }
    grouped = Trainer.machinery_stats(
        NS(cfg=NS(gamma=0.5, rollouts_per_task=2)), NS(**{**vars(exp), "old_values": None})
    )
    assert grouped == {"advantage/nonzero_turns": pytest.approx(2 / 3), "advantage/equal_return_groups": 1.0}
