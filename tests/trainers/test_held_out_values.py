"""Held-out value scores: explained variance and calibration on hand numbers; a scoring leaves the RNG as it was."""

from __future__ import annotations

import pytest
import torch

from trainers.held_out_values import held_out_values, value_scores


def test_value_scores_on_hand_numbers():
    returns = torch.tensor([0.0, 2.0, 4.0, 6.0])  # variance 5 (population)
    v = torch.tensor([1.0, 2.0, 3.0, 6.0])  # residuals (−1, 0, 1, 0): variance 0.5 → explained 0.9; mean |·| 0.5
    scores = value_scores(v, None, returns)
    assert set(scores) == {"v_explained_var", "v_abs_error"}
    # float32 sums of 4 small integers' squares and a division: exact but for the last division's rounding
    assert scores["v_explained_var"] == pytest.approx(0.9, abs=4 * torch.finfo(torch.float32).eps)
    assert scores["v_abs_error"] == 0.5
    both = value_scores(returns, returns, returns)
    assert both["v_explained_var"] == both["q_explained_var"] == 1.0 and both["q_abs_error"] == 0.0


@pytest.mark.parametrize("algo", ["sapo", "grpo"])
def test_scoring_plays_the_split_and_restores_the_rng(make_trainer, algo):
    trainer = make_trainer(algo)
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    first = held_out_values(trainer, "test", 4, reference=trainer.frozen_copy())
    assert torch.equal(torch.rand(3), expected)  # the training stream is untouched
    assert first["episodes"] == 4 and first["turns"] >= 4 and 0 <= first["success"] <= 1
    assert ("v_explained_var" in first) == (algo == "sapo") and ("q_explained_var" in first) == (algo == "sapo")
    # the reference is a copy of the policy (float32, the same kernels and shapes as the old log-prob pass): the
    # same log-probs, so k3 is exactly 0
    assert first["kl_reference"] == 0.0
    assert held_out_values(trainer, "test", 4) == {k: v for k, v in first.items() if k != "kl_reference"}  # seeded
