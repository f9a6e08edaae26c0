"""trainers.sft: the behaviour-cloning step, whole or in micro-batches."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agents.policy import PolicyModel  # noqa: E402
from trainers.sft import Demonstration, _batch, clone_step  # noqa: E402


@pytest.mark.parametrize("by_length", [False, True])
def test_a_micro_batched_clone_step_is_the_minibatch_gradient(by_length):
    """Six turns whose prompts run from 1 to 6 words, cloned whole and in micro-batches of 4 and 2 rows (longest
    first when ``by_length``): each micro-batch's token mean, weighted by its share of the tokens, sums to the
    minibatch's token mean, so the loss and the gradient are the same up to the order of summation. The weights
    are float64, but the log-probs are float32 (u = 6e-8): regrouping a sum of n terms moves it by at most ~n·u
    relative, n the action tokens (the loss), and each gradient entry by ~n·u of the largest entry."""
    policy = PolicyModel.tiny(seed=0)
    policy.model.double()
    demos = [Demonstration("Task: " + "open the vault " * k, f"<think>try {k}</think><action>press red</action>")
             for k in range(1, 7)]
    batch = _batch(policy, demos)
    assert len(set(batch.attention_mask.sum(1).tolist())) == len(demos)  # lengths differ: the cuts differ

    def gradient(size: int, grouped: bool) -> tuple[float, torch.Tensor]:
        policy.model.zero_grad(set_to_none=True)
        loss = clone_step(policy, batch, size, by_length=grouped)
        return loss, torch.cat([p.grad.flatten() for p in policy.model.parameters() if p.grad is not None])

    whole_loss, whole = gradient(len(batch), False)
    bound = int(batch.action_mask.sum()) * torch.finfo(torch.float32).eps
    for size in (4, 2):
        loss, grad = gradient(size, by_length)
        assert loss == pytest.approx(whole_loss, rel=bound)
        torch.testing.assert_close(grad, whole, rtol=0, atol=bound * float(whole.abs().max()))
