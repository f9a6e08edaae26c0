"""Hand-computed and property tests of trainers.core_algos (every number derived in a comment)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

from agents.logits import mask_value_tokens  # noqa: E402
from tests.support import core_algos_reference as ref  # noqa: E402
from trainers import core_algos as ca  # noqa: E402

T, F = True, False
NAN = float("nan")


U = torch.finfo(torch.float32).eps / 2  # float32 unit roundoff


def close(a, b, tol=1e-6):
    """Hand-computed expectations: values of magnitude <= 2 (or small integers, exact in float32), each from at
    most ~8 correctly rounded float32 operations (exp/log: within a few ulps on every ATen CPU kernel):
    within ~8·u·2 ≈ 1e-6 of exact. Callers with longer reductions pass their own ``tol``."""
    return torch.allclose(torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32), atol=tol)


# ---------------------------------------------------------------------------------- reductions
def test_masked_mean_ignores_nan_at_masked_positions():
    x = torch.tensor([[1.0, 2.0, NAN], [4.0, NAN, NAN]])
    m = torch.tensor([[T, T, F], [T, F, F]])
    assert close(ca.masked_mean(x, m), (1 + 2 + 4) / 3)
    assert close(ca.masked_mean(x, m, dim=1), [1.5, 4.0])
    assert close(ca.masked_mean(x, torch.zeros_like(m)), 0.0)  # nothing selected -> 0, not nan


def test_masked_var_bessel():
    x = torch.tensor([1.0, 2.0, 3.0, 100.0])
    m = torch.tensor([T, T, T, F])
    # mean 2, squared deviations 1, 0, 1: unbiased 2/2 = 1, biased 2/3
    assert close(ca.masked_var(x, m), 1.0)
    assert close(ca.masked_var(x, m, unbiased=False), 2 / 3)


# ---------------------------------------------------------------------------------- scatter / gather
def test_scatter_gather_hand_example():
    traj = torch.tensor([7, 3, 7, 3, 7])
    turn = torch.tensor([0, 1, 1, 0, 2])
    x = torch.tensor([10.0, 20.0, 11.0, 19.0, 12.0])
    grid, mask, row_of = ca.scatter_turns(x, traj, turn)
    # trajectories renumbered in sorted order: 3 -> 0, 7 -> 1
    assert grid.tolist() == [[19.0, 20.0, 0.0], [10.0, 11.0, 12.0]]
    assert mask.tolist() == [[T, T, F], [T, T, T]]
    assert row_of.tolist() == [[3, 1, -1], [0, 2, 4]]
    assert ca.gather_turns(grid, traj, turn).tolist() == x.tolist()


def test_scatter_rejects_duplicates_and_gaps():
    with pytest.raises(ValueError, match="duplicate"):
        ca.scatter_turns(torch.zeros(2), torch.tensor([1, 1]), torch.tensor([0, 0]))
    with pytest.raises(ValueError, match="gap"):
        ca.scatter_turns(torch.zeros(2), torch.tensor([1, 1]), torch.tensor([0, 2]))


# ---------------------------------------------------------------------------------- GAE / SARSA
# Trajectory 0: 3 turns, terminated with reward 1. Trajectory 1: 2 turns, truncated (no done).
# Padding cells hold garbage (99 / nan) that must not matter.
REWARDS = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 99.0]])
VALUES = torch.tensor([[0.5, 0.6, 0.8], [0.2, 0.4, NAN]])
QS = torch.tensor([[0.3, 0.7, 0.9], [0.5, 0.4, NAN]])
DONES = torch.tensor([[F, F, T], [F, F, T]])
MASK = torch.tensor([[T, T, T], [T, T, F]])


def test_turn_gae_hand_computed():
    # gamma 0.9, lambda 0.5 -> gamma*lambda 0.45
    # traj 0: d2 = 1 + 0 - 0.8 = 0.2            A2 = 0.2
    #         d1 = 0 + 0.9*0.8 - 0.6 = 0.12      A1 = 0.12 + 0.45*0.2 = 0.21
    #         d0 = 0 + 0.9*0.6 - 0.5 = 0.04      A0 = 0.04 + 0.45*0.21 = 0.1345
    # traj 1 (truncated, V past the end is 0): d1 = 0 + 0.9*0 - 0.4 = -0.4   A1 = -0.4
    #         d0 = 0 + 0.9*0.4 - 0.2 = 0.16      A0 = 0.16 + 0.45*(-0.4) = -0.02
    adv = ca.turn_gae(REWARDS, VALUES, DONES, MASK, gamma=0.9, lam=0.5)
    assert close(adv, [[0.1345, 0.21, 0.2], [-0.02, -0.4, 0.0]])
    assert close(ref.turn_gae_loop(REWARDS, VALUES, DONES, MASK, 0.9, 0.5), adv)


def test_gae_done_stops_bootstrap_and_lambda_one_is_monte_carlo():
    # lambda = 1, gamma = 1: A_t = G_t - V_t (Monte-Carlo). Traj 0: G = [1, 1, 1] -> A = [0.5, 0.4, 0.2].
    adv = ca.turn_gae(REWARDS, VALUES, DONES, MASK, gamma=1.0, lam=1.0)
    assert close(adv[0], [0.5, 0.4, 0.2])
    # A done mid-trajectory cuts both the value bootstrap and the advantage trace:
    # r = [1, 0], V = [0.5, 0.7], d = [T, F]: A0 = 1 - 0.5 = 0.5 regardless of turn 1; A1 = -0.7.
    adv = ca.turn_gae(
        torch.tensor([[1.0, 0.0]]),
        torch.tensor([[0.5, 0.7]]),
        torch.tensor([[T, F]]),
        torch.tensor([[T, T]]),
        gamma=0.9,
        lam=0.95,
    )
    assert close(adv, [[0.5, -0.7]])


def test_sarsa_targets_hand_computed():
    # gamma 0.9. traj 0: y2 = 1 (done), y1 = 0 + 0.9*0.9 = 0.81, y0 = 0 + 0.9*0.7 = 0.63
    # traj 1 (truncated): y1 = 0 + 0.9*0 = 0, y0 = 0.9*0.4 = 0.36
    y = ca.sarsa_targets(REWARDS, QS, DONES, MASK, gamma=0.9)
    assert close(y, [[0.63, 0.81, 1.0], [0.36, 0.0, 0.0]])
    assert close(ref.sarsa_targets_loop(REWARDS, QS, DONES, MASK, 0.9), y)


def _random_grid(seed: int, n: int, h: int):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, h + 1, (n,), generator=g)
    mask = torch.arange(h)[None, :] < lengths[:, None]
    rewards = torch.randn(n, h, generator=g)
    values = torch.randn(n, h, generator=g)
    dones = torch.rand(n, h, generator=g) < 0.3
    return rewards, values, dones, mask


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 6),
    h=st.integers(1, 8),
    gamma=st.floats(0.0, 1.0),
    lam=st.floats(0.0, 1.0),
)
def test_gae_and_sarsa_loop_equals_vectorized(seed, n, h, gamma, lam):
    rewards, values, dones, mask = _random_grid(seed, n, h)
    # The loop runs in float64 (Python floats) and rounds each result once; the vectorized recursion runs in
    # float32: delta (3 roundings) then A_t = delta_t + gamma·lam·A_{t+1} (2 per turn, h turns), every
    # partial result bounded by sum_k |delta_k| <= sum_k (|r_k| + 2|v_k|) (gamma, lam <= 1). So they agree to
    # (4 + 2h)·u·max over rows of that sum; SARSA's r + gamma·q' is 3 roundings plus one: 4·u·(|r| + |q'|).
    # (hypothesis draws new grids each run: the bound is per grid, not a constant that held on the ones seen)
    scale = float((rewards.abs() + 2 * values.abs()).sum(1).max())
    assert torch.allclose(
        ca.turn_gae(rewards, values, dones, mask, gamma, lam),
        ref.turn_gae_loop(rewards, values, dones, mask, gamma, lam),
        rtol=0,
        atol=(4 + 2 * h) * U * scale,
    )
    assert torch.allclose(
        ca.sarsa_targets(rewards, values, dones, mask, gamma),
        ref.sarsa_targets_loop(rewards, values, dones, mask, gamma),
        rtol=0,
        atol=4 * U * float(rewards.abs().max() + values.abs().max()),
    )


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_gae_and_sarsa_invariant_to_padding_cells(seed):
    rewards, values, dones, mask = _random_grid(seed, 5, 7)
    garbage = torch.full_like(values, NAN)
    r2, v2 = torch.where(mask, rewards, garbage), torch.where(mask, values, garbage)
    d2 = torch.where(mask, dones, ~dones)
    a1 = ca.turn_gae(rewards, values, dones, mask, 0.95, 0.9)
    a2 = ca.turn_gae(r2, v2, d2, mask, 0.95, 0.9)
    assert torch.equal(a1, a2) and bool((a2[~mask] == 0).all())
    assert torch.equal(ca.sarsa_targets(rewards, values, dones, mask, 0.95), ca.sarsa_targets(r2, v2, d2, mask, 0.95))


def test_turn_targets_on_shuffled_rows():
    # Rows of the hand example above, shuffled, with arbitrary trajectory ids (40 = traj 0, 12 = traj 1)
    # -> sorted order puts 12 first; the result must follow the rows, not the grid.
    rows = [
        (40, 2, 1.0, 0.8, 0.9, T),
        (12, 0, 0.0, 0.2, 0.5, F),
        (40, 0, 0.0, 0.5, 0.3, F),
        (12, 1, 0.0, 0.4, 0.4, F),
        (40, 1, 0.0, 0.6, 0.7, F),
    ]
    traj, turn, r, v, q, d = (torch.tensor(c) for c in zip(*rows))
    adv, y_v, y_q = ca.turn_targets(r.float(), v.float(), d, traj, turn, 0.9, 0.5, old_q=q.float())
    assert close(adv, [0.2, -0.02, 0.1345, -0.4, 0.21])
    assert close(y_v, [1.0, 0.18, 0.6345, 0.0, 0.81])  # y^V = V_old + A
    assert close(y_q, [1.0, 0.36, 0.63, 0.0, 0.81])
    assert ca.turn_targets(r.float(), v.float(), d, traj, turn, 0.9, 0.5)[2] is None


def test_normalize_turn_advantages_hand_computed():
    # A = [1, 2, 3.1], last turn invalid, c_inv 0.1 -> [1, 2, 3]; mean 2, unbiased std 1 -> [-1, 0, 1].
    # A fourth, padded row (nan) is excluded by the mask and comes back 0.
    adv = torch.tensor([1.0, 2.0, 3.1, NAN])
    invalid = torch.tensor([F, F, T, F])
    out = ca.normalize_turn_advantages(adv, invalid, c_inv=0.1, eps=0.0, mask=torch.tensor([T, T, T, F]))
    assert close(out, [-1.0, 0.0, 1.0, 0.0], tol=1e-5)
    # without the penalty: [1, 2, 3.1] mean 2.0333, the invalid turn now ranks higher than with it
    plain = ca.normalize_turn_advantages(adv[:3], invalid[:3], c_inv=0.0, eps=0.0)
    assert plain[2] > out[2]


# ---------------------------------------------------------------------------------- GRPO
def test_trajectory_returns():
    # traj 1: 0 + 1 = 1; traj 2: 0 + 0.5 + 0.25 = 0.75
    r = torch.tensor([0.0, 1.0, 0.0, 0.5, 0.25])
    assert close(ca.trajectory_returns(r, torch.tensor([1, 1, 2, 2, 2])), [1, 1, 0.75, 0.75, 0.75])


def test_equal_return_groups_hand_computed():
    # rows in any order; trajectories 1, 2 in group 0 (returns 1 and 0: informative), 3, 4 in group 7 (returns 0.5 and
    # 0.25 + 0.25 = 0.5: equal), 5 alone in group 9 (one trajectory: equal) -> 2 of 3 groups
    rewards = torch.tensor([0.0, 0.25, 1.0, 0.5, 0.0, 0.25, 0.0, 0.3])
    traj = torch.tensor([1, 4, 1, 3, 2, 4, 4, 5])
    group = torch.tensor([0, 7, 0, 7, 0, 7, 7, 9])
    # a float32 mean: 2/3 rounded to float32 is within 2^-24 of it, relatively
    assert math.isclose(float(ca.equal_return_groups(rewards, traj, group)), 2 / 3, rel_tol=2**-24)
    everyone_fails = torch.zeros(4)
    assert float(ca.equal_return_groups(everyone_fails, torch.tensor([0, 1, 2, 3]), torch.tensor([0, 0, 1, 1]))) == 1.0


def test_grpo_advantages_hand_computed():
    # group 0: R = [1, 0], mean 0.5, unbiased std sqrt(0.5) -> +-1/sqrt(2); group 1: equal returns -> 0
    adv = ca.grpo_advantages(torch.tensor([1.0, 0.0, 1.0, 1.0]), torch.tensor([0, 0, 5, 5]), eps=0.0)
    assert close(adv[:2], [1 / math.sqrt(2), -1 / math.sqrt(2)])
    adv = ca.grpo_advantages(torch.tensor([1.0, 0.0, 1.0, 1.0]), torch.tensor([0, 0, 5, 5]), eps=1e-6)
    assert close(adv[2:], [0.0, 0.0])
    # singleton group: verl's mean 0, std 1 -> the raw return
    assert close(ca.grpo_advantages(torch.tensor([0.3]), torch.tensor([9]), eps=0.0), [0.3])
    # mean only (Dr. GRPO / mean_norm)
    assert close(ca.grpo_advantages(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), scale_by_std=False), [0.5, -0.5])


def test_grpo_statistics_across_steps():
    # traj A (1 turn, R=1) and traj B (3 turns, R=0) in one group; across steps the entries are [1, 0, 0, 0]:
    # mean 0.25, unbiased var (0.75^2 + 3*0.25^2)/3 = 0.25, std 0.5 -> A: 0.75/0.5 = 1.5, B: -0.25/0.5 = -0.5
    adv = ca.grpo_advantages(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), eps=0.0, weights=torch.tensor([1, 3]))
    assert close(adv, [1.5, -0.5])
    # the same as calling it on the turn rows directly
    per_turn = ca.grpo_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), torch.zeros(4, dtype=torch.long), eps=0.0)
    assert close(per_turn, [1.5, -0.5, -0.5, -0.5])


# ---------------------------------------------------------------------------------- RLOO and GiGPO
def test_rloo_advantages_hand_computed():
    # group 0: R = [1, 0, 1] -> 1 - (0+1)/2 = 0.5, 0 - (1+1)/2 = -1, 0.5
    # group 1: R = [2, 0.5, 0.5, 1] -> 2 - 2/3 = 4/3, 0.5 - 3.5/3 = -2/3 (twice), 1 - 3/3 = 0
    # group 2: a single trajectory keeps its raw return (baseline 0, verl's convention)
    returns = torch.tensor([1.0, 0.0, 1.0, 2.0, 0.5, 0.5, 1.0, 0.3])
    groups = torch.tensor([0, 0, 0, 7, 7, 7, 7, 9])
    want = [0.5, -1.0, 0.5, 4 / 3, -2 / 3, -2 / 3, 0.0, 0.3]
    assert close(ca.rloo_advantages(returns, groups), want)
    assert close(ref.rloo_advantages_loop(returns, groups), want)
    # leave-one-out = G/(G-1) times the mean-centred return: [1, 0, 1] centred [1/3, -2/3, 1/3] * 3/2
    assert close(
        ca.rloo_advantages(returns[:3], groups[:3]),
        ca.grpo_advantages(returns[:3], groups[:3], scale_by_std=False) * 1.5,
    )


# A small grid with repeated states. Anchors (raw observations): s0 = 0, s1 = 1, s2 = 2, s3 = 3.
#   group 0:  A: s0 -> s1 -> s2, r = [0, 0, 1] (R = 1);  B: s0 -> s0 -> s3, r = [0, 0, 0] (R = 0, s0 repeats
#             inside B);  C: s0 -> s1, r = [0, 1] (R = 1)
#   group 1:  D: s0, r = [1] (R = 1);  E: s0 -> s0, r = [0, 0] (R = 0)  -- the same text s0, another task
# Rows (traj, turn, group, anchor, reward), deliberately not in trajectory order.
GRID = [
    (0, 0, 0, 0, 0.0),
    (1, 0, 0, 0, 0.0),
    (2, 1, 0, 1, 1.0),
    (0, 1, 0, 1, 0.0),
    (1, 1, 0, 0, 0.0),
    (0, 2, 0, 2, 1.0),
    (1, 2, 0, 3, 0.0),
    (2, 0, 0, 0, 0.0),
    (3, 0, 1, 0, 1.0),
    (4, 0, 1, 0, 0.0),
    (4, 1, 1, 0, 0.0),
]


def _grid():
    traj, turn, group, anchor, r = (torch.tensor(c) for c in zip(*GRID))
    return r.float(), traj, turn, group, anchor


def test_gigpo_step_returns_hand_computed():
    # gamma 0.5: A: [0 + 0.5·(0 + 0.5·1), 0 + 0.5·1, 1] = [0.25, 0.5, 1]; B: [0, 0, 0]; C: [0.5, 1]; D: [1]; E: [0, 0]
    r, traj, turn, _, _ = _grid()
    want = [0.25, 0.0, 1.0, 0.5, 0.0, 1.0, 0.0, 0.5, 1.0, 0.0, 0.0]  # row order of GRID
    assert close(ca.discounted_returns(r, traj, turn, 0.5), want)
    assert close(ref.discounted_returns_loop(r, traj, turn, 0.5), want)


def test_gigpo_advantages_hand_computed_mean_norm():
    # Episode term (mean only): group 0 R = [1, 0, 1], mean 2/3 -> A 1/3, B -2/3, C 1/3; group 1 R = [1, 0], mean 1/2
    # -> D 1/2, E -1/2. Step term on the returns above, per (group, anchor):
    #   group 0 s0: A0 0.25, B0 0, B1 0, C0 0.5, mean 0.1875 -> 0.0625, -0.1875, -0.1875, 0.3125
    #   group 0 s1: A1 0.5, C1 1, mean 0.75 -> -0.25, 0.25;  s2 (A2) and s3 (B2) alone -> 0
    #   group 1 s0: D0 1, E0 0, E1 0, mean 1/3 -> 2/3, -1/3, -1/3 (not mixed with group 0's s0)
    # A = episode + 1.0 · step:
    #   A0 1/3 + 0.0625 = 0.395833, A1 1/3 - 0.25 = 0.083333, A2 1/3; B0 = B1 = -2/3 - 0.1875 = -0.854167, B2 -2/3;
    #   C0 1/3 + 0.3125 = 0.645833, C1 1/3 + 0.25 = 0.583333; D0 1/2 + 2/3 = 1.166667; E0 = E1 = -1/2 - 1/3 = -0.833333
    args = _grid()
    want = [0.395833, -0.854167, 0.583333, 0.083333, -0.854167, 1 / 3, -2 / 3, 0.645833, 7 / 6, -5 / 6, -5 / 6]
    for fn in (ca.gigpo_advantages, ref.gigpo_advantages_loop):
        assert close(
            fn(*args, gamma=0.5, step_weight=1.0, scale_by_std=False, stats_across_steps=False), want, tol=1e-5
        )
    # omega = 0 is GRPO's mean-only advantage broadcast to the turns
    episode = [1 / 3, -2 / 3, 1 / 3, 1 / 3, -2 / 3, 1 / 3, -2 / 3, 1 / 3, 0.5, -0.5, -0.5]
    assert close(ca.gigpo_advantages(*args, gamma=0.5, step_weight=0.0, stats_across_steps=False), episode)


def test_gigpo_advantages_hand_computed_mean_std_norm():
    # Episode term: group 0 unbiased std sqrt(((1/3)² + (2/3)² + (1/3)²)/2) = 1/sqrt(3) -> A, C 0.577350, B -1.154701;
    # group 1 std sqrt(0.5) -> D 0.707107, E -0.707107.
    # Step term: group 0 s0: sum of squares 0.0625² + 2·0.1875² + 0.3125² = 0.171875, /3, sqrt -> std 0.239357:
    #   A0 0.261116, B0 = B1 -0.783349, C0 1.305582; s1: std sqrt(2·0.25²/1) = 0.353553 -> -/+0.707107;
    #   alone -> 0; group 1 s0: std sqrt((4/9 + 1/9 + 1/9)/2) = 1/sqrt(3) -> D0 1.154701, E0 = E1 -0.577350.
    # A = episode + step:
    #   A0 0.838467, A1 -0.129757, A2 0.577350; B0 = B1 -1.938050, B2 -1.154701; C0 1.882933, C1 1.284457;
    #   D0 1.861807; E0 = E1 -1.284457
    args = _grid()
    want = [
        0.838467,
        -1.938050,
        1.284457,
        -0.129757,
        -1.938050,
        0.577350,
        -1.154701,
        1.882933,
        1.861807,
        -1.284457,
        -1.284457,
    ]
    for fn in (ca.gigpo_advantages, ref.gigpo_advantages_loop):
        assert close(
            fn(*args, gamma=0.5, step_weight=1.0, scale_by_std=True, eps=0.0, stats_across_steps=False), want, tol=1e-5
        )
    # omega scales the step term only: A0 with omega 0.5 = 0.577350 + 0.5·0.261116
    assert close(
        ca.gigpo_advantages(*args, gamma=0.5, step_weight=0.5, scale_by_std=True, eps=0.0, stats_across_steps=False)[0],
        0.707908,
        tol=1e-5,
    )


def test_gigpo_episode_statistics_across_steps():
    # group 0 across steps: entries [1, 1, 1 (A's 3 turns), 0, 0, 0 (B), 1, 1 (C)]: mean 5/8 -> A, C 3/8, B -5/8;
    # group 1: [1 (D), 0, 0 (E)]: mean 1/3 -> D 2/3, E -1/3. omega 0 leaves the episode term alone.
    args = _grid()
    want = [3 / 8, -5 / 8, 3 / 8, 3 / 8, -5 / 8, 3 / 8, -5 / 8, 3 / 8, 2 / 3, -1 / 3, -1 / 3]
    for fn in (ca.gigpo_advantages, ref.gigpo_advantages_loop):
        assert close(fn(*args, step_weight=0.0, stats_across_steps=True), want)


# Two groups; c_inv 0.3 on the invalid turns. Rows (traj, turn, group, reward, invalid):
#   group 0: traj 0 (R = 10): turn 0 valid, turn 1 valid (r 10); traj 1 (R = 0): turn 0 INVALID, turn 1 valid
#   group 1: traj 2 (R = 10, one turn), traj 3 (R = 0, one turn, INVALID)
PENALTY_ROWS = [
    (0, 0, 0, 0.0, False),
    (0, 1, 0, 10.0, False),
    (1, 0, 0, 0.0, True),
    (1, 1, 0, 0.0, False),
    (2, 0, 1, 10.0, False),
    (3, 0, 1, 0.0, True),
]


def _penalty_rows():
    traj, turn, group, r, inv = (torch.tensor(c) for c in zip(*PENALTY_ROWS))
    return r.double(), traj, turn, group, 0.3 * inv.double()


def test_turn_scores_and_group_entries():
    r, traj, turn, group, pen = _penalty_rows()
    # the trajectory's return on each row, minus c_inv on the invalid rows (verl-agent's apply_invalid_action_penalty)
    assert close(ca.turn_scores(r, traj, pen), [10.0, 10.0, -0.3, 0.0, 10.0, -0.3])
    assert close(ca.group_entries(traj, turn, across_steps=True), [1, 1, 1, 1, 1, 1])
    assert close(ca.group_entries(traj, turn, across_steps=False), [1, 0, 1, 0, 1, 1])  # each trajectory's first turn
    perm = torch.tensor([3, 5, 0, 2, 4, 1])  # the first turn is the smallest turn index, in any row order
    assert close(ca.group_entries(traj[perm], turn[perm], across_steps=False), [0, 1, 1, 1, 1, 0])


def test_group_terms_see_the_penalty_before_their_statistics():
    r, traj, turn, group, pen = _penalty_rows()
    scores = ca.turn_scores(r, traj, pen)
    # RLOO across steps: group 0 scores [10, 10, -0.3, 0], n 4, mean 19.7/4 = 4.925 -> 4/3·(s - 4.925)
    #   = [6.766667, 6.766667, -6.966667, -6.566667]; group 1 [10, -0.3]: mean 4.85, n 2 -> 2·(s - 4.85) = [10.3, -10.3]
    want = [6.766667, 6.766667, -6.966667, -6.566667, 10.3, -10.3]
    entries = ca.group_entries(traj, turn, True)
    for fn in (ca.rloo_advantages, ref.rloo_advantages_loop):
        assert close(fn(scores, group, weights=entries), want, tol=1e-5)
    # per trajectory: group 0 entries are the first turns [10, -0.3]: mean 4.85, n 2 -> 2·(s - 4.85) on every row
    want = [10.3, 10.3, -10.3, -9.7, 10.3, -10.3]
    for fn in (ca.rloo_advantages, ref.rloo_advantages_loop):
        assert close(fn(scores, group, weights=ca.group_entries(traj, turn, False)), want, tol=1e-5)
    # GRPO across steps, group 0: deviations [5.075, 5.075, -5.225, -4.925], squares sum 103.0675, /3 -> std 5.861385
    adv = ca.grpo_advantages(scores, group, eps=0.0, weights=entries)
    assert close(adv[:4], [5.075 / 5.861385, 5.075 / 5.861385, -5.225 / 5.861385, -4.925 / 5.861385], tol=1e-5)
    # GiGPO, mean_norm, ω 1, γ 0.5, every row its own anchor except traj 0 and 1's first turns (one state):
    #   episode (across steps) = s - mean: group 0 [5.075, 5.075, -5.225, -4.925], group 1 [5.15, -5.15];
    #   step returns minus the penalty: traj 0 [0 + 0.5·10, 10] = [5, 10], traj 1 [-0.3, 0], traj 2 [10], traj 3 [-0.3];
    #   anchor {traj 0 turn 0, traj 1 turn 0}: [5, -0.3], mean 2.35 -> [2.65, -2.65]; singletons -> 0
    anchor = torch.tensor([0, 1, 0, 2, 0, 0]) + torch.tensor([0, 0, 0, 0, 10, 20])
    want = [5.075 + 2.65, 5.075, -5.225 - 2.65, -4.925, 5.15, -5.15]
    for fn in (ca.gigpo_advantages, ref.gigpo_advantages_loop):
        assert close(fn(r, traj, turn, group, anchor, gamma=0.5, penalty=pen), want, tol=1e-5)


def test_anchor_advantages_singletons_and_equal_values_are_zero():
    values = torch.tensor([3.0, 2.0, 2.0, 2.0])
    out = ca.anchor_advantages(values, torch.zeros(4, dtype=torch.long), torch.tensor([5, 6, 6, 6]), scale_by_std=True)
    assert torch.equal(out, torch.zeros(4))  # 3.0 alone: its own mean; [2, 2, 2]: std 0, 0/(0 + eps) = 0


def _random_rows(seed: int, n: int, groups: int, anchors: int):
    """Random trajectories (lengths 1..5) in random row order, ``n`` per batch over ``groups`` groups."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 6, (n,), generator=g)
    traj = torch.repeat_interleave(torch.arange(n), lengths)
    turn = torch.cat([torch.arange(int(k)) for k in lengths])
    group = torch.randint(0, groups, (n,), generator=g)[traj]
    anchor = torch.randint(0, anchors, (len(traj),), generator=g)
    reward = torch.where(
        torch.rand(len(traj), generator=g) < 0.3, torch.randn(len(traj), generator=g), torch.zeros(len(traj))
    )
    order = torch.randperm(len(traj), generator=g)
    return reward[order], traj[order], turn[order], group[order], anchor[order]


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 12),
    groups=st.integers(1, 4),
    anchors=st.integers(1, 4),
    gamma=st.floats(0.0, 1.0),
    omega=st.floats(0.0, 2.0),
    std=st.booleans(),
    across=st.booleans(),
)
def test_gigpo_and_rloo_loop_equals_vectorized(seed, n, groups, anchors, gamma, omega, std, across):
    r, traj, turn, group, anchor = _random_rows(seed, n, groups, anchors)
    r = r.double()  # the loop computes in Python floats: compare like with like (the functions keep the dtype)
    # Same formulas in the same precision, summed in other orders: with B <= 60 rows and S = 1 + sum|r| bounding
    # every return, mean and deviation (gamma <= 1), each sum is within B·u·S of the other's (u = 2^-53), so the
    # mean-only terms agree to ~4·B·u·S·(1 + omega). The std mode divides deviations (error ~B·u·S, magnitude
    # <= sqrt(B)·std) by std + 1e-6 whose own error is ~B·u·S: at most ~B·u·S·(1 + sqrt(B))/1e-6 per term. (A
    # group of equal returns is exactly 0 in the package, group_stats; the loop's float64 residue is ~1e-16·S over
    # the 1e-6 floor.)
    penalty = 0.1 * (torch.rand(len(r), generator=torch.Generator().manual_seed(seed)) < 0.3).double()  # c_inv·m_t
    # the penalty enters scores and step returns: S = 1 + sum|r| + sum(penalty) still bounds every one of them
    b, s = len(r), 1.0 + float(r.abs().sum()) + float(penalty.sum())
    u64 = torch.finfo(torch.float64).eps / 2
    tol = 4 * b * u64 * s * (1 + omega) * ((1 + math.sqrt(b)) / 1e-6 if std else 1.0)
    kwargs = dict(gamma=gamma, step_weight=omega, scale_by_std=std, stats_across_steps=across, penalty=penalty)
    vec = ca.gigpo_advantages(r, traj, turn, group, anchor, **kwargs)
    want = ref.gigpo_advantages_loop(r, traj, turn, group, anchor, **kwargs)
    assert vec.dtype == torch.float64 and torch.allclose(vec, want, rtol=0, atol=tol), (vec - want).abs().max()
    scores, entries = ca.turn_scores(r, traj, penalty), ca.group_entries(traj, turn, across)
    # n/(n-1) <= 2 scales the centred score: twice the mean-only bound
    assert torch.allclose(
        ca.rloo_advantages(scores, group, weights=entries),
        ref.rloo_advantages_loop(scores, group, weights=entries),
        rtol=0,
        atol=8 * b * u64 * s,
    )


def test_gigpo_advantages_invariant_to_row_order():
    args = _grid()
    perm = torch.tensor([10, 3, 7, 0, 5, 1, 9, 2, 8, 6, 4])
    full = ca.gigpo_advantages(*args, gamma=0.5, scale_by_std=True)
    assert torch.allclose(
        ca.gigpo_advantages(*(a[perm] for a in args), gamma=0.5, scale_by_std=True), full[perm], atol=1e-6
    )


# ---------------------------------------------------------------------------------- logits
def test_token_log_probs_hand_computed():
    # logits [0, ln 3] -> probs [1/4, 3/4]
    logits = torch.tensor([[[0.0, math.log(3.0)], [0.0, math.log(3.0)]]])
    lp = ca.token_log_probs(logits, torch.tensor([[1, 0]]))
    assert close(lp, [[math.log(0.75), math.log(0.25)]])


def test_entropy_hand_computed_and_safe_with_banned_tokens():
    assert close(ca.entropy_from_logits(torch.zeros(4)), math.log(4))
    logits = torch.zeros(1, 4, requires_grad=True)
    h = ca.entropy_from_logits(mask_value_tokens(logits, [0, 1]))  # uniform over 2 -> ln 2
    assert close(h, [math.log(2)])
    (h * 100.0).sum().backward()  # a large upstream gradient must not produce nan
    assert torch.isfinite(logits.grad).all()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.1, 50.0))
def test_action_distribution_never_puts_mass_on_value_tokens(seed, scale):
    g = torch.Generator().manual_seed(seed)
    vocab, ids = 11, (9, 10)
    logits = torch.randn(2, 3, vocab, generator=g) * scale
    logits[..., 9] += 1e4  # w+ would dominate an unmasked softmax
    masked = mask_value_tokens(logits, ids)
    probs = torch.softmax(masked, -1)
    assert bool((probs[..., list(ids)] == 0).all())
    # a softmax over 11 logits: each probability within a few ulps (exp, one division), their sum 10 more
    # roundings: |sum - 1| <= ~16·u ≈ 1e-6 (and the same for exp of the log-probs below); 1e-5 leaves 10x
    assert torch.allclose(probs.sum(-1), torch.ones(2, 3), atol=1e-5)
    # token_log_probs over every label sums (in prob space) to 1 and is -inf on w+/w-
    labels = torch.arange(vocab).expand(6, vocab).reshape(2, 3 * vocab)
    lp = ca.token_log_probs(masked.repeat_interleave(vocab, dim=1), labels).reshape(2, 3, vocab)
    assert torch.allclose(lp.exp().sum(-1), torch.ones(2, 3), atol=1e-5)
    assert bool(torch.isneginf(lp[..., list(ids)]).all())
    samples = torch.multinomial(probs.reshape(-1, vocab), 200, replacement=True, generator=g)
    assert not bool(torch.isin(samples, torch.tensor(ids)).any())


# ---------------------------------------------------------------------------------- losses
def test_aggregate_loss_modes():
    loss = torch.tensor([[1.0, 2.0, NAN], [3.0, 0.0, 0.0], [5.0, 5.0, 5.0]])
    mask = torch.tensor([[T, T, F], [T, F, F], [F, F, F]])
    assert close(ca.aggregate_loss(loss, mask, "token-mean"), 2.0)  # (1+2+3)/3
    assert close(ca.aggregate_loss(loss, mask, "seq-mean-token-sum"), 3.0)  # (3 + 3)/2, empty row skipped
    assert close(ca.aggregate_loss(loss, mask, "seq-mean-token-mean"), 2.25)  # (1.5 + 3)/2
    with pytest.raises(ValueError):
        ca.aggregate_loss(loss, mask, "sum")  # type: ignore[arg-type]


def test_clipped_policy_loss_hand_computed():
    # eps 0.2, A = +1. token 0: ratio 1.5 -> max(-1.5, -1.2) = -1.2 (clipped);
    # token 1: ratio 0.5 -> max(-0.5, -0.8) = -0.5; token 2 masked (garbage log-prob).
    old = torch.zeros(1, 3)
    lp = torch.tensor([[math.log(1.5), math.log(0.5), 999.0]], requires_grad=True)
    mask = torch.tensor([[T, T, F]])
    loss, stats = ca.clipped_policy_loss(lp, old, torch.tensor([1.0]), mask, clip_eps=0.2)
    assert close(loss, -0.85)  # (-1.2 - 0.5)/2
    assert close(stats["clipfrac"], 0.5)
    assert close(stats["approx_kl"], (-math.log(1.5) - math.log(0.5)) / 2)
    loss.backward()
    # clipped token: no gradient; token 1: d/dlp of -ratio/2 = -0.5*0.5 = -0.25; masked token: 0
    assert close(lp.grad, [[0.0, -0.25, 0.0]])
    # A = -1: token 0 max(1.5, 1.2) = 1.5; token 1 max(0.5, 0.8) = 0.8 -> mean 1.15
    loss, _ = ca.clipped_policy_loss(lp.detach(), old, torch.tensor([[-1.0, -1.0, NAN]]), mask, 0.2)
    assert close(loss, 1.15)
    # asymmetric clip: eps_high 0.6 lets ratio 1.5 through -> (-1.5 - 0.5)/2 = -1.0
    loss, _ = ca.clipped_policy_loss(lp.detach(), old, torch.tensor([1.0]), mask, 0.2, clip_eps_high=0.6)
    assert close(loss, -1.0)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_policy_loss_invariant_to_masked_tokens(seed):
    g = torch.Generator().manual_seed(seed)
    lp, old, adv = (torch.randn(3, 6, generator=g) for _ in range(3))
    mask = torch.rand(3, 6, generator=g) < 0.6
    mask[0, 0] = True
    noise = torch.randn(3, 6, generator=g) * 1e3
    lp2 = torch.where(mask, lp, noise).requires_grad_(True)
    l1, s1 = ca.clipped_policy_loss(lp, old, adv, mask, 0.2)
    l2, s2 = ca.clipped_policy_loss(lp2, torch.where(mask, old, -noise), torch.where(mask, adv, NAN), mask, 0.2)
    # the same unmasked entries in the same order: the same floats (allclose's float32 default is a margin)
    assert torch.allclose(l1, l2) and torch.allclose(s1["clipfrac"], s2["clipfrac"])
    l2.backward()
    assert torch.isfinite(lp2.grad).all() and bool((lp2.grad[~mask] == 0).all())


def test_clipped_value_loss_hand_computed():
    # scale 10, eps 0.05.
    # turn 0: p .6, o .5, y .8: unclipped (.6-.8)^2 = .04; clipped p .55 -> (.55-.8)^2 = .0625 -> .0625
    # turn 1: p .4, o .5, y .42: unclipped .0004; clipped .45 -> .0009 -> .0009
    # turn 2: masked (nan). Mean (.0625 + .0009)/2 = .0317
    pred = torch.tensor([6.0, 4.0, NAN])
    old = torch.tensor([5.0, 5.0, NAN])
    target = torch.tensor([8.0, 4.2, NAN])
    loss = ca.clipped_value_loss(pred, old, target, 0.05, mask=torch.tensor([T, T, F]), scale=10.0)
    assert close(loss, 0.0317)
    # inside the clip region the loss is the plain normalized squared error: p .52, o .5, y .6 -> .0064
    assert close(
        ca.clipped_value_loss(torch.tensor([5.2]), torch.tensor([5.0]), torch.tensor([6.0]), 0.05, scale=10.0), 0.0064
    )


def test_kl_penalty_hand_computed():
    lp, ref = torch.zeros(1, 2), torch.tensor([[math.log(2.0), 0.0]])
    # k3: exp(ln 2) - ln 2 - 1 = 0.306853; identical distributions -> 0
    assert close(ca.kl_penalty(lp, ref), [[2 - math.log(2) - 1, 0.0]])
    assert close(ca.kl_penalty(lp, ref, "k1"), [[-math.log(2), 0.0]])
    assert close(ca.kl_penalty(lp, ref, "k2"), [[0.5 * math.log(2) ** 2, 0.0]])
    assert float(ca.kl_penalty(torch.tensor([[-50.0]]), torch.tensor([[0.0]]))) == 10.0  # clamped like verl
    with pytest.raises(ValueError):
        ca.kl_penalty(lp, ref, "k9")  # type: ignore[arg-type]


def test_explained_variance_by_hand():
    from trainers.core_algos import explained_variance

    t = torch.tensor([0.0, 2.0, 4.0])
    # Var(t) = 8/3; residual [0, 0, 2] has Var 8/9; EV = 1 - (8/9)/(8/3) = 2/3. In float32 the two variances
    # and the ratio take ~10 roundings of <= 2^-24 relative each, so rel=1e-6 bounds them with room
    assert float(explained_variance(torch.tensor([0.0, 2.0, 2.0]), t)) == pytest.approx(2 / 3, rel=1e-6)
    assert float(explained_variance(t, t)) == 1.0
    assert float(explained_variance(torch.full((3,), 2.0), t)) == pytest.approx(
        0.0, abs=1e-6
    )  # the mean: no better than a constant
    assert float(explained_variance(t, torch.ones(3))) == 0.0  # constant targets: defined as 0


# ---------------------------------------------------------------------------------------------- equal groups
# A group whose entries are all equal (all success, all fail) carries no signal: its advantage must be exactly 0,
# whatever the value and the number of rows. In float32, Σx/n of n equal x need not give x back (64 × 9.8 does not),
# and the residue over std + 1e-6, itself rounding noise, is of order 1 (0.864 for 64 × 9.8 under plain GRPO).
# group_stats detects such groups (per-group amax == amin) and makes their mean exact and their std 0.
EQUAL_SIZES = range(1, 130)  # 1 is a singleton: each estimator's own convention (below); 64 is the example above
EQUAL_VALUES = [9.8, 9.9, 0.0, 1.0, -3.3, 1e6, 1e-7]
DTYPES = [torch.float32, torch.bfloat16]


def _zero(x: torch.Tensor) -> bool:
    return bool((x == 0).all())  # exactly 0, not approximately


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("value", EQUAL_VALUES)
def test_group_stats_of_equal_entries_are_exact(value, dtype):
    for n in EQUAL_SIZES:
        x = torch.full((n,), value, dtype=dtype)
        for groups in (torch.zeros(n, dtype=torch.long), None):
            stats = ca.group_stats(x, groups)
            assert bool(stats.equal.all()) and torch.equal(stats.mean, x), (n, groups)
            assert torch.equal(stats.std, torch.full_like(x, 1.0 if n == 1 else 0.0)), (n, groups)  # one entry: std 1
            assert torch.equal(stats.count, torch.full_like(x, n))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("value", EQUAL_VALUES)
def test_grpo_and_rloo_of_equal_groups_are_exactly_zero(value, dtype):
    for n in EQUAL_SIZES:
        x, groups = torch.full((n,), value, dtype=dtype), torch.zeros(n, dtype=torch.long)
        entries = (torch.arange(n) % 3 == 0).to(dtype)  # every third row an entry (per-trajectory statistics)
        counts = (torch.arange(n) % 4 + 1).to(dtype)  # multiplicities (statistics across steps, per trajectory)
        for w in (None, entries, counts):
            for std in (True, False):
                out = ca.grpo_advantages(x, groups, weights=w, scale_by_std=std)
                if (n if w is None else float(w.float().sum())) > 1:
                    assert _zero(out), (n, w, std, out.abs().max())
                else:  # a group resting on one entry: verl's mean 0, std 1 -> the raw score (not an equal group)
                    assert torch.equal(out, x / (1 + 1e-6) if std else x)
            out = ca.rloo_advantages(x, groups, weights=w)
            if (n if w is None else int((w > 0).sum())) > 1:
                assert _zero(out), (n, w, out.abs().max())
            else:  # one entry: baseline 0, the raw score
                assert torch.equal(out, x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("value", EQUAL_VALUES)
def test_gigpo_of_equal_groups_is_exactly_zero(value, dtype):
    # One batch holding a task group of every size k in EQUAL_SIZES (k trajectories of 3 turns each, group id k),
    # reward `value` on the last turn: every score is `value` (episode term over equal entries, across steps or per
    # trajectory); the step returns γ²v, γv, v are equal within each anchor group (anchor = turn index: the same
    # state at the same step, per task group): both terms must be exactly 0, in both modes.
    sizes = torch.tensor(list(EQUAL_SIZES))
    group = torch.repeat_interleave(sizes, sizes).repeat_interleave(3)
    traj = torch.arange(int(sizes.sum())).repeat_interleave(3)
    turn = torch.arange(3).repeat(int(sizes.sum()))
    reward = torch.where(turn == 2, torch.tensor(value, dtype=dtype), torch.tensor(0.0, dtype=dtype))
    step_returns = ca.discounted_returns(reward, traj, turn, 0.95)
    alone = group == 1  # the task with one trajectory
    for std in (True, False):
        assert _zero(ca.anchor_advantages(step_returns, group, turn, scale_by_std=std)), std
        for across in (True, False):
            for pen in (None, torch.full_like(reward, 0.1)):  # a penalty on every row keeps the groups equal
                out = ca.gigpo_advantages(
                    reward, traj, turn, group, turn, scale_by_std=std, stats_across_steps=across, penalty=pen
                )
                if across:  # the lone trajectory's 3 rows are 3 equal entries
                    assert _zero(out), (std, across, out.abs().max())
                else:  # per trajectory, it is one entry: the episode term keeps the raw score (mean 0, std 1)
                    assert _zero(out[~alone]), (std, across, out[~alone].abs().max())
                    score = torch.full_like(reward[alone], value) - (0 if pen is None else pen[alone])
                    assert torch.equal(out[alone], score / (1 + 1e-6) if std else score)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("value", EQUAL_VALUES)
def test_sapo_normalization_of_an_equal_batch_is_exactly_zero(value, dtype):
    # SAPO eq. 7: (Ã − μ_B)/(σ_B + ε) over the batch; a batch of equal Ã (after the penalty) has no signal.
    for n in EQUAL_SIZES:
        adv = torch.full((n,), value, dtype=dtype)
        none = torch.zeros(n, dtype=torch.bool)
        assert _zero(ca.normalize_turn_advantages(adv, none, c_inv=0.1)), n
        assert _zero(ca.normalize_turn_advantages(adv, ~none, c_inv=0.1)), n  # every turn invalid: still all equal
        mask = torch.arange(n) % 2 == 0
        padded = torch.where(mask, adv, torch.tensor(float("nan"), dtype=dtype))  # padding never counts
        assert _zero(ca.normalize_turn_advantages(padded, none, c_inv=0.1, mask=mask)), n


def test_the_issue_examples():
    zeros = torch.zeros(64, dtype=torch.long)
    assert _zero(ca.grpo_advantages(torch.full((64,), 9.8), zeros))  # was 0.864
    assert _zero(ca.grpo_advantages(torch.full((8,), 9.9), zeros[:8]))  # was -0.472


def test_a_penalized_turn_outside_an_equal_group_keeps_its_offset_unscaled():
    """Per-trajectory statistics (entries: each trajectory's first turn) of a group whose two trajectories both
    succeeded (score 1): the entries' std is exactly 0. A later turn of one of them carries the invalid-action
    penalty (score 1 − 0.1). Dividing its offset by std + ε would give −0.1/10⁻⁶ = −10⁵; there is no spread to
    scale by, so it keeps its offset, −0.1, and the entries 0."""
    scores = torch.tensor([1.0, 0.9, 1.0])  # traj 0 turn 0, traj 0 turn 1 (penalized), traj 1 turn 0
    groups, entries = torch.zeros(3, dtype=torch.long), torch.tensor([1.0, 0.0, 1.0])
    adv = ca.grpo_advantages(scores, groups, weights=entries)
    assert adv[0].item() == 0.0 and adv[2].item() == 0.0
    assert adv[1].item() == torch.tensor(0.9).item() - 1.0  # 0.9 − 1 in float32, exactly: no division happened
    # a group with spread still scales: entries [1, 0], mean 0.5, Bessel-corrected std √0.5, ε = 1e-6
    spread = ca.grpo_advantages(torch.tensor([1.0, 0.9, 0.0]), groups, weights=entries)
    assert (
        abs(spread[1].item() - (0.9 - 0.5) / (math.sqrt(0.5) + 1e-6)) < 1e-6
    )  # a few float32 roundings (2⁻²⁴ relative each) of a value below 1


def test_mixed_batch_equal_group_zero_other_group_unchanged():
    # Group 3: 64 × 9.8 (all success); group 1: eight mixed scores. Interleaved rows.
    other = torch.tensor([9.9, 0.0, 9.9, 9.9, 0.0, 0.0, 9.9, 1.0])
    x = torch.cat([torch.full((64,), 9.8), other])
    groups = torch.cat([torch.full((64,), 3), torch.ones(8, dtype=torch.long)])
    order = torch.randperm(72, generator=torch.Generator().manual_seed(0))
    x, groups = x[order], groups[order]
    eq, mixed = groups == 3, groups == 1
    n, s = 8, float(other.abs().max())
    sigma = float(other.double().std())
    for std in (True, False):
        adv = ca.grpo_advantages(x, groups, scale_by_std=std)
        assert _zero(adv[eq])
        # The mixed group's statistics never see the other group: bit for bit what it gets alone (same rows, same
        # order; index_add_ sums each group's rows in row order).
        assert torch.equal(adv[mixed], ca.grpo_advantages(x[mixed], groups[mixed], scale_by_std=std))
        want = ref.grpo_advantages_loop(x[mixed].double(), groups[mixed], scale_by_std=std)
        # Against float64 (first order, u = 2^-24, S = max|x|): the float32 mean errs by <= n·u·S (recursive summation
        # of n terms, Σ|x|/n <= S, then one division), each deviation d by δ = (n+3)·u·S (|d| <= 2S); the variance
        # relatively by 2√2·δ/σ + (n+1)·u, the std by half that plus u; A = d/σ then errs by <= δ/σ + |A|·(√2·δ/σ
        # + (n+5)·u/2) <= (n+3)·u·(S/σ + 1)·(1 + 2|A|). Twice that as margin; without the std, |A| <= 2S: 2·δ.
        bound = 2 * (n + 3) * U * ((s / sigma + 1) * (1 + 2 * float(want.abs().max())) if std else s)
        assert torch.allclose(adv[mixed].double(), want, rtol=0, atol=bound), ((adv[mixed] - want).abs().max(), bound)
    rloo = ca.rloo_advantages(x, groups)
    assert _zero(rloo[eq]) and torch.equal(rloo[mixed], ca.rloo_advantages(x[mixed], groups[mixed]))
    # n/(n-1) <= 8/7 times a deviation that errs by <= δ, plus two roundings: 2·δ bounds it with margin
    want = ref.rloo_advantages_loop(x[mixed].double(), groups[mixed])
    assert torch.allclose(rloo[mixed].double(), want, rtol=0, atol=2 * (n + 3) * U * s)
    for std in (True, False):  # the anchor term: the same two groups as anchors of one task
        step = ca.anchor_advantages(x, torch.zeros_like(groups), groups, scale_by_std=std)
        assert _zero(step[eq])
        assert torch.equal(
            step[mixed],
            ca.anchor_advantages(x[mixed], torch.zeros(8, dtype=torch.long), groups[mixed], scale_by_std=std),
        )
        want = ref.anchor_advantages_loop(
            x[mixed].double(), torch.zeros(8, dtype=torch.long), groups[mixed], scale_by_std=std
        )
        bound = 2 * (n + 3) * U * ((s / sigma + 1) * (1 + 2 * float(want.abs().max())) if std else s)  # as GRPO's
        assert torch.allclose(step[mixed].double(), want, rtol=0, atol=bound)


def test_group_stats_hand_computed_and_masked_entries():
    # group 7: entries 1, 3 (weight 1 each; the nan row has weight 0): mean 2, var (1 + 1)/1 = 2; group 2: a single
    # entry 5 counted twice (weights as multiplicities): all entries equal -> mean 5 exactly, std 0.
    x = torch.tensor([1.0, NAN, 3.0, 5.0])
    stats = ca.group_stats(x, torch.tensor([7, 7, 7, 2]), torch.tensor([1.0, 0.0, 1.0, 2.0]))
    assert stats.mean.tolist() == [2.0, 2.0, 2.0, 5.0] and stats.count.tolist() == [2.0, 2.0, 2.0, 2.0]
    assert close(stats.std, [math.sqrt(2)] * 3 + [0.0]) and stats.equal.tolist() == [F, F, F, T]
    # a group with no entry: count 0, std 1, not "equal"
    stats = ca.group_stats(torch.tensor([4.0, 6.0]), torch.tensor([0, 1]), torch.tensor([1.0, 0.0]))
    assert stats.count.tolist() == [1.0, 0.0] and stats.std.tolist() == [1.0, 1.0] and stats.equal.tolist() == [T, F]
    # (B, K) keys: one group per distinct row of keys
    stats = ca.group_stats(torch.tensor([1.0, 2.0, 4.0]), torch.tensor([[0, 1], [0, 2], [0, 1]]))
    assert stats.mean.tolist() == [2.5, 2.0, 2.5]
    with pytest.raises(ValueError, match="bool mask"):
        ca.group_stats(x, None, torch.ones(4))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 40), groups=st.integers(1, 5), std=st.booleans())
def test_grpo_and_normalization_loop_equals_vectorized(seed, n, groups, std):
    g = torch.Generator().manual_seed(seed)
    x = torch.where(torch.rand(n, generator=g) < 0.5, torch.randn(n, generator=g), torch.zeros(n)).double()
    gid = torch.randint(0, groups, (n,), generator=g)
    w = torch.randint(0, 3, (n,), generator=g).double()
    # float64 both sides, sums in other orders: as in test_gigpo_and_rloo_loop_equals_vectorized
    s, u64 = 1.0 + float(x.abs().sum()), torch.finfo(torch.float64).eps / 2
    tol = 4 * n * u64 * s * ((1 + math.sqrt(n)) / 1e-6 if std else 1.0)
    for weights in (None, w):
        assert torch.allclose(
            ca.grpo_advantages(x, gid, weights=weights, scale_by_std=std),
            ref.grpo_advantages_loop(x, gid, weights=weights, scale_by_std=std),
            rtol=0,
            atol=tol,
        )
    inv, mask = torch.rand(n, generator=g) < 0.3, torch.rand(n, generator=g) < 0.8
    assert torch.allclose(
        ca.normalize_turn_advantages(x, inv, 0.1, mask=mask),
        ref.normalize_turn_advantages_loop(x, inv, 0.1, mask=mask),
        rtol=0,
        atol=4 * n * u64 * (s + 0.1 * n) * (1 + math.sqrt(n)) / 1e-6,
    )
