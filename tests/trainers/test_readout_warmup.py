"""trainers.readout_warmup: SAPO's readout fitted to the returns of the policy's own rollouts before RL."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from agents.policy import PolicyModel  # noqa: E402
from trainers.config import TrainConfig  # noqa: E402
from trainers.forward import action_log_probs, forward_positions  # noqa: E402
from trainers.readout_warmup import collect_returns, explained, fit_readout, readout_loss, readout_step  # noqa: E402
from trainers.sft import Demonstration, _batch  # noqa: E402


def own_log_probs(policy: PolicyModel, batch) -> torch.Tensor:
    """``(B, T)`` the policy's own log-probs of the batch's action tokens (temperature 1), 0 elsewhere."""
    with torch.no_grad():
        logits = forward_positions(policy.model, batch)
        return action_log_probs(logits, batch, tuple(policy.value_token_ids), 1.0).to(batch.old_log_probs.dtype)


def test_readout_loss_by_hand():
    """R_max = 10: V = 5, Q = 2 against G = 4 → (1/10)² + (2/10)² = 0.05; exact targets cost 0."""
    loss = readout_loss(torch.tensor([5.0, 4.0]), torch.tensor([2.0, 4.0]), torch.tensor([4.0, 4.0]), 10.0)
    torch.testing.assert_close(loss, torch.tensor([0.05, 0.0]))


@pytest.mark.parametrize("by_length", [False, True])
def test_a_micro_batched_readout_step_is_the_minibatch_gradient(by_length):
    """Six turns of different lengths, fitted whole and in micro-batches of 4 and 2 (longest first when ``by_length``):
    row sums over the minibatch's rows and KL token sums over its tokens add up to the minibatch's loss, so the loss
    and gradient agree up to the order of summation. The model is float64 but the readout and the log-probs are
    float32 (u = 6e-8): regrouping n terms (n: the action tokens, more than the rows) moves the loss by at most ~n·u
    relative and each gradient entry by ~n·u of the largest entry."""
    policy = PolicyModel.tiny(seed=0)
    policy.model.double()
    with torch.no_grad():  # w⁺/w⁻ start equal (V ≡ 0); part them so that V and Q vary across the rows
        policy.model.get_output_embeddings().weight[policy.value_token_ids[0]] += 0.05
    demos = [
        Demonstration("Task: " + "open the vault " * k, f"<think>try {k}</think><action>press red</action>")
        for k in range(1, 7)
    ]
    batch = _batch(policy, demos)
    batch.value_targets = torch.tensor([0.0, 10.0, 0.0, 9.0, 8.1, 0.0])
    batch.old_log_probs = own_log_probs(policy, batch) - 0.5 * batch.action_mask  # sampled elsewhere: the KL is not 0

    def gradient(size: int, grouped: bool, kl: float = 1.0) -> tuple[float, torch.Tensor]:
        policy.model.zero_grad(set_to_none=True)
        cfg = TrainConfig(micro_batch_size=size, group_by_length=grouped, readout_warmup_kl=kl)
        loss = readout_step(policy, batch, cfg)
        return loss, torch.cat([p.grad.flatten() for p in policy.model.parameters() if p.grad is not None])

    whole_loss, whole = gradient(len(batch), False)
    assert not torch.equal(gradient(len(batch), False, kl=0.0)[1], whole)  # the KL term is in the gradient
    bound = int(batch.action_mask.sum()) * torch.finfo(torch.float32).eps
    for size in (4, 2):
        loss, grad = gradient(size, by_length)
        assert loss == pytest.approx(whole_loss, rel=bound)
        torch.testing.assert_close(grad, whole, rtol=0, atol=bound * float(whole.abs().max()))


def test_the_kl_term_holds_the_actions_where_they_were_sampled():
    """With targets V already meets (V ≡ 0 = G) the readout term is 0, and at the sampler's own log-probs the KL is 0
    too. With the log-probs recorded 1 lower than the policy's, the KL term alone is e^(−1) and has a gradient."""
    policy = PolicyModel.tiny(seed=0)
    demos = [Demonstration("Task: open the vault", "<think>try</think><action>press red</action>")]
    batch = _batch(policy, demos)
    batch.value_targets = torch.zeros(1)
    batch.old_log_probs = own_log_probs(policy, batch)
    assert readout_step(policy, batch, TrainConfig()) == pytest.approx(0.0, abs=1e-6)
    batch.old_log_probs = batch.old_log_probs - 1.0 * batch.action_mask
    policy.model.zero_grad(set_to_none=True)
    # each token's k3 is e^(−1) − (−1) − 1 = e^(−1), so is their mean; float32 (u = 6e-8) over ~20 tokens: 1e-5 relative
    assert readout_step(policy, batch, TrainConfig()) == pytest.approx(math.exp(-1.0), rel=1e-5)
    assert any(p.grad is not None and p.grad.abs().max() > 0 for p in policy.model.parameters())


def test_collected_returns_are_each_turns_discounted_return(make_trainer):
    """Vault pays R_max = 10 on the winning turn only: every turn's target is 10·γ^(turns left), or 0 in a lost episode."""
    trainer = make_trainer("sapo", episodes_per_iteration=8)
    played: list[int] = []
    data, returns = collect_returns(trainer, 12, on_batch=played.append)  # whole batches: 16 episodes
    assert played == [8, 16]  # the hook hears the episodes played so far after each batch
    assert len(set(zip(*(t.tolist() for t in (data.traj_ids, data.turn_idx))))) == len(data)
    assert data.traj_ids.unique().numel() <= 16 and len(returns) == len(data)
    for traj in data.traj_ids.unique():
        rows = (data.traj_ids == traj).nonzero().flatten()
        last = rows[data.turn_idx[rows].argmax()]
        won = float(data.rewards[last]) > 0
        for r in rows:
            left = int(data.turn_idx[last] - data.turn_idx[r])
            assert float(returns[r]) == pytest.approx(float(data.rewards[last]) * 0.99**left if won else 0.0, rel=1e-6)


def test_fit_readout_learns_the_returns_it_is_shown():
    """Six turns and their returns, fitted for 100 steps at lr 1e-3 from V ≡ 0 (explained variance 0): V explains most
    of them. (The threshold is far from what it reaches; the readout's generalization to unseen episodes is
    measured in docs/results-log.md, not here.)"""
    policy = PolicyModel.tiny(seed=0)
    demos = [
        Demonstration("Task: " + "open the vault " * k, f"<think>try {k}</think><action>press red</action>")
        for k in range(1, 7)
    ]
    batch = _batch(policy, demos)
    returns = torch.tensor([0.0, 10.0, 0.0, 9.0, 8.1, 0.0])
    cfg = TrainConfig(
        readout_warmup_epochs=100, readout_warmup_lr=1e-3, readout_warmup_kl=0.0
    )  # the readout term alone
    assert explained(policy, batch, returns, cfg) == 0.0
    loss = fit_readout(policy, batch, returns, cfg)
    assert loss[-1] < 0.1 * loss[0] and explained(policy, batch, returns, cfg) > 0.5


def test_train_fits_the_readout_once_before_the_first_iteration(make_trainer, monkeypatch):
    import trainers.readout_warmup as module

    calls = []
    fit = module.readout_warm_start
    monkeypatch.setattr(module, "readout_warm_start", lambda trainer: calls.append(trainer.iteration) or fit(trainer))
    trainer = make_trainer("sapo", readout_warmup_episodes=8, iterations=2, checkpoint_every=0)
    rows = trainer.train()
    assert calls == [0] and len(rows) == 2 and all(math.isfinite(r["value/explained_var"]) for r in rows)


def test_a_method_without_a_readout_says_it_skips_the_readout_warm_start(make_trainer):
    trainer = make_trainer("ppo", readout_warmup_episodes=8, iterations=1, checkpoint_every=0)
    with pytest.warns(UserWarning, match="ppo has none"):
        assert not trainer.fits_readout


@pytest.mark.parametrize("field", ["readout_warmup_episodes", "readout_warmup_kl"])
def test_a_negative_readout_warm_start_setting_is_refused(field):
    with pytest.raises(ValueError, match=f"{field} must be >= 0"):
        TrainConfig(**{field: -1})
