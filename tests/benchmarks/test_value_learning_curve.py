"""The value learning curve's estimators on data whose answers are known in closed form."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.value_learning_curve import (
    BIGRAM_BUCKETS,
    COUNT_CLIP,
    VOCAB_BUCKETS,
    explained,
    per_group,
    prompt_ceiling,
    prompt_features,
    ridge_predictions,
    turn_index_baseline,
)


def test_prompt_ceiling_is_the_between_prompt_share_of_the_variance() -> None:
    # Two prompts, each twice: returns {0, 2} and {10, 12}. Pooled variance (population) of [0, 2, 10, 12] is 26;
    # within-prompt variance with Bessel's correction is ((1 + 1) + (1 + 1)) / (1 + 1) = 2; ceiling 1 - 2/26.
    ids = np.array([[5, 6, 0], [5, 6, 0], [7, 8, 9], [7, 8, 9], [1, 1, 1]])
    lengths = np.array([2, 2, 3, 3, 3])
    returns = np.array([0.0, 2.0, 10.0, 12.0, 99.0])  # the last prompt occurs once: left out
    ceiling, prompts, turns = prompt_ceiling(ids, lengths, returns)
    assert (prompts, turns) == (2, 4)
    assert ceiling == pytest.approx(1 - 2 / 26, rel=1e-12)  # float sums of a few small integers: exact up to ulps


def test_prompt_ceiling_reads_only_the_prompt() -> None:
    # The same prompt followed by different responses is one prompt: all the variance is within it.
    ids = np.array([[5, 6, 1], [5, 6, 2]])
    ceiling, prompts, _ = prompt_ceiling(ids, np.array([2, 2]), np.array([0.0, 4.0]))
    assert prompts == 1 and ceiling == pytest.approx(1 - 8 / 4)  # within 8 (Bessel), pooled 4: below 0 is allowed


def test_prompt_features_count_tokens_and_bigrams_clipped() -> None:
    ids = np.array([[3, 3, 3, 3, 4, 99]])
    x = prompt_features(ids, np.array([5]))  # the 99 lies past the prompt
    assert x.shape == (1, VOCAB_BUCKETS + BIGRAM_BUCKETS)
    assert x[0, 3] == COUNT_CLIP and x[0, 4] == 1 and x[0, 99] == 0
    assert x[0, VOCAB_BUCKETS + (3 * 7919 + 3) % BIGRAM_BUCKETS] == 3  # the bigram (3, 3) three times
    assert x[0, VOCAB_BUCKETS + (3 * 7919 + 4) % BIGRAM_BUCKETS] == 1
    assert x.sum() == COUNT_CLIP + 1 + 3 + 1


@pytest.mark.parametrize("rows", [40, 4])  # more rows than features (primal) and fewer (dual)
def test_ridge_matches_the_closed_form(rows: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, 6)) + 3.0
    y = x @ np.array([1.0, -2.0, 0.5, 0.0, 3.0, 1.0]) + 7.0
    test = rng.normal(size=(5, 6))
    for lam, pred in ridge_predictions(x, y, test, [0.1, 10.0]):
        mu, y0 = x.mean(0), y.mean()
        w = np.linalg.solve((x - mu).T @ (x - mu) + lam * np.eye(6), (x - mu).T @ (y - y0))
        # the two solves agree up to the conditioning of a 6 x 6 (or 4 x 4) system of O(100) entries: 1e-8 is
        # many orders above float64 rounding there and far below any difference of formula
        np.testing.assert_allclose(pred, (test - mu) @ w + y0, rtol=1e-8, atol=1e-8)


def test_explained_and_per_group() -> None:
    target = np.array([0.0, 2.0, 0.0, 2.0, 5.0, 5.0])
    pred = np.array([0.0, 2.0, 1.0, 1.0, 5.0, 5.0])
    assert explained(pred, target) == pytest.approx(1 - np.var(target - pred) / np.var(target))
    assert np.isnan(explained(pred[4:], target[4:]))  # a constant target: nothing to explain
    episode = np.array([0, 0, 1, 1, 2, 2])
    # groups of one episode: EV 1 (exact), EV 1 - 1/1 = 0 (residuals -1, 1 against targets 0, 2), and a constant group
    # left out of the mean
    assert per_group(pred, target, episode, size=1) == pytest.approx(0.5)


def test_turn_index_baseline_is_each_bins_mean() -> None:
    fit_turns = np.array([0, 1, 5, 6, 7])
    fit_returns = np.array([2.0, 4.0, 1.0, 1.0, 4.0])
    # bins of 5 turns: [0, 5) has mean 3, [5, 10) mean 2; turn 12's bin was never fitted: the overall mean 2.4
    pred = turn_index_baseline(fit_turns, fit_returns, np.array([3, 9, 12]))
    np.testing.assert_allclose(pred, [3.0, 2.0, 2.4], rtol=1e-12)  # means of a few small floats: exact up to ulps


def test_the_turns_cache_round_trips_as_plain_tensors(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from benchmarks.value_learning_curve import load_turns, save_turns
    from trainers.experience import Experience

    ids = torch.tensor([[1, 2, 3], [4, 5, 0]])
    turn = torch.tensor([0, 1])
    data = Experience(
        input_ids=ids,
        attention_mask=ids > 0,
        action_mask=torch.zeros_like(ids, dtype=torch.bool),
        prompt_lengths=torch.tensor([2, 1]),
        response_lengths=torch.tensor([1, 1]),
        old_log_probs=torch.zeros(2, 3),
        rewards=torch.tensor([0.0, 1.0]),
        dones=torch.tensor([False, True]),
        invalid=torch.tensor([False, False]),
        traj_ids=torch.zeros(2, dtype=torch.long),
        turn_idx=turn,
        group_ids=torch.zeros(2, dtype=torch.long),
    )
    save_turns(tmp_path / "turns.pt", data, torch.tensor([1.0, 0.0]))
    back, returns = load_turns(tmp_path / "turns.pt")
    assert torch.equal(back.input_ids, ids) and torch.equal(back.turn_idx, turn) and back.old_values is None
    assert torch.equal(returns, torch.tensor([1.0, 0.0]))
    assert not list(tmp_path.glob("*.tmp"))  # written through a temporary file, then renamed
    torch.save({"fields": {"input_ids": object()}, "returns": returns}, tmp_path / "bad.pt")
    with pytest.raises(Exception, match="(?i)weights only|unsupported|global"):  # a pickled object is refused
        load_turns(tmp_path / "bad.pt")
