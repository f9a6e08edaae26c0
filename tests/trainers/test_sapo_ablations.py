"""Each SAPO ablation changes the one term it claims, and nothing else, on a hand-computed batch.

The batch: two trajectories, γ = λ = 0.5 and c_inv = 0.1 so the GAE is exact in binary floating point.
Trajectory 0 (3 turns, terminated): r = (0, 0, 10), V_old = (1, 2, 4), Q_old = (2, 3, 8), the second action
invalid. Trajectory 1 (2 turns, truncated at the horizon): r = (0, 0), V_old = (1, 1), Q_old = (1, 2). By hand:

* δ = (0 + ½·2 − 1, 0 + ½·4 − 2, 10 − 4) = (0, 0, 6) and (0 + ½·1 − 1, 0 + 0 − 1) = (−½, −1);
  A = (⅜, 3/2, 6) and (−¾, −1) (A_t = δ_t + ¼·A_{t+1}); y^V = V_old + A = (11/8, 7/2, 10) and (¼, 0);
* SARSA y^Q = r + ½·Q_old,next = (3/2, 4, 10) and (1, 0);
* the penalized advantage Ã = A − 0.1·m_inv = (⅜, 3/2 − 0.1, 6) and (−¾, −1).
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from trainers.config import TrainConfig
from trainers.experience import Experience
from trainers.forward import PositionLogits
from trainers.method_registry import METHODS, TAU_ABLATIONS
from trainers.methods import make_method

EPS = torch.finfo(torch.float32).eps
W_PLUS, W_MINUS, VOCAB, HIDDEN = 6, 7, 8, 2
GAE = torch.tensor([0.375, 1.5, 6.0, -0.75, -1.0])
Y_V = torch.tensor([1.375, 3.5, 10.0, 0.25, 0.0])
Y_Q = torch.tensor([1.5, 4.0, 10.0, 1.0, 0.0])
INVALID = torch.tensor([False, True, False, False, False])


class _TinyModel(nn.Module):
    """What a method reads of a policy model: its config's hidden size and its parameters' device and dtype."""

    def __init__(self) -> None:
        super().__init__()
        self.config = SimpleNamespace(hidden_size=HIDDEN)
        self.weight = nn.Parameter(torch.zeros(1))


def _method(algo: str) -> object:
    cfg = TrainConfig(algo=algo, gamma=0.5, lam=0.5, c_inv=0.1)
    return make_method(cfg, SimpleNamespace(value_token_ids=(W_PLUS, W_MINUS), model=_TinyModel()))


def _batch() -> Experience:
    """The module docstring's five turns: prompt (2 tokens) ⊕ response (2 tokens) each."""
    b, t = 5, 4
    action = torch.tensor([[False, False, True, True]] * b)
    return Experience(
        input_ids=torch.arange(b * t).reshape(b, t) % 5,
        attention_mask=torch.ones(b, t, dtype=torch.bool),
        action_mask=action,
        prompt_lengths=torch.full((b,), 2),
        response_lengths=torch.full((b,), 2),
        old_log_probs=torch.where(action, torch.full((b, t), -1.0), torch.zeros(b, t)),
        rewards=torch.tensor([0.0, 0.0, 10.0, 0.0, 0.0]),
        dones=torch.tensor([False, False, True, False, False]),
        invalid=INVALID,
        traj_ids=torch.tensor([0, 0, 0, 1, 1]),
        turn_idx=torch.tensor([0, 1, 2, 0, 1]),
        group_ids=torch.tensor([0, 0, 0, 1, 1]),
        old_values=torch.tensor([1.0, 2.0, 4.0, 1.0, 1.0]),
        old_q=torch.tensor([2.0, 3.0, 8.0, 1.0, 2.0]),
    )


def _normalized(x: torch.Tensor) -> torch.Tensor:
    """Eq. 7 written out: (x − mean)/(Bessel std + 1e-6) over the five turns."""
    return (x - x.mean()) / (x.std(unbiased=True) + 1e-6)


# The normalized advantages come from a mean and a std over 5 entries of magnitude <= 6: each is within a few
# float32 roundings of the formula; 64·eps·max|x| (max|x| = 6, so about 5e-5 of a quantity of order 1) bounds that
# with a wide margin and is still far below any change a wrong term would make (>= 0.1 here).
ATOL = 64 * EPS * 6


def test_sapo_on_the_hand_batch():
    exp = _method("sapo").compute_advantages(_batch())
    assert torch.equal(exp.value_targets, Y_V) and torch.equal(exp.q_targets, Y_Q)
    torch.testing.assert_close(exp.advantages, _normalized(GAE - 0.1 * INVALID.float()), atol=ATOL, rtol=0)


def test_no_norm_drops_only_the_batch_normalization():
    exp = _method("sapo-nonorm").compute_advantages(_batch())
    assert torch.equal(exp.advantages, GAE - 0.1 * INVALID.float())  # the penalized GAE, exactly
    assert torch.equal(exp.value_targets, Y_V) and torch.equal(exp.q_targets, Y_Q)


def test_q_minus_v_replaces_only_the_advantage():
    exp = _method("sapo-qv").compute_advantages(_batch())
    q_minus_v = torch.tensor([1.0, 1.0, 4.0, 0.0, 1.0])
    torch.testing.assert_close(exp.advantages, _normalized(q_minus_v - 0.1 * INVALID.float()), atol=ATOL, rtol=0)
    assert torch.equal(exp.value_targets, Y_V) and torch.equal(exp.q_targets, Y_Q)  # targets: SAPO's


@pytest.mark.parametrize(
    ("algo", "field", "value"), [("sapo-noq", "q_coef", 0.0), *((f"sapo-tau{t:g}", "tau_v", t) for t in TAU_ABLATIONS)]
)
def test_a_setting_variant_changes_its_constant_only(algo, field, value):
    mine, sapo = TrainConfig(algo=algo), TrainConfig()
    changed = {f.name for f in dataclasses.fields(TrainConfig) if getattr(mine, f.name) != getattr(sapo, f.name)}
    assert changed == {"algo", field} and getattr(mine, field) == value
    assert type(make_method(mine, SimpleNamespace(value_token_ids=(W_PLUS, W_MINUS)))) is METHODS["sapo"].load()
    with pytest.raises(ValueError, match=f"sets {field}"):
        TrainConfig(algo=algo, **{field: 0.5})  # another explicit value is refused, not overridden
    assert getattr(TrainConfig(algo=algo, **{field: value}), field) == value


def _logits(gap_state: list[float], gap_end: list[float], features: torch.Tensor | None = None) -> PositionLogits:
    """Position logits whose w⁺ − w⁻ gaps are given (the other entries arbitrary)."""
    state, end = torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(1)), torch.zeros(3, VOCAB)
    state[:, W_PLUS], state[:, W_MINUS] = torch.tensor(gap_state) + 0.5, 0.5
    end[:, W_PLUS] = torch.tensor(gap_end)
    return PositionLogits(torch.zeros(6, VOCAB), state, end, features)


@pytest.mark.parametrize(
    ("algo", "v", "q"),
    [
        ("sapo", [0.5, -0.2, 5.0], [0.05, -0.02, 0.5]),
        ("sapo-tau0.1", [5.0, -2.0, 10.0], [0.5, -0.2, 5.0]),
        ("sapo-tau0.3", [5 / 3, -2 / 3, 10.0], [1 / 6, -1 / 15, 5 / 3]),
        ("sapo-tau3", [1 / 6, -1 / 15, 5 / 3], [1 / 60, -1 / 150, 1 / 6]),
    ],
)
def test_the_readout_temperature_scales_v_and_q(algo, v, q):
    """V = 10·clip(gap/τ, −1, 1) at gaps (0.05, −0.02, 0.5); Q the same at the end position's gaps (0.005, −0.002, 0.05)."""
    values, qs = _method(algo).read_values(_logits([0.05, -0.02, 0.5], [0.005, -0.002, 0.05]))
    # one float32 subtraction, a division and a product: a few ulps of |V| <= 10
    torch.testing.assert_close(values, torch.tensor(v), atol=8 * EPS * 10, rtol=0)
    torch.testing.assert_close(qs, torch.tensor(q), atol=8 * EPS * 10, rtol=0)


def test_the_head_reads_the_hidden_states_not_the_vocabulary():
    method = _method("sapo-head")
    with torch.no_grad():
        method.head.weight.copy_(torch.tensor([[1.0, -2.0]]))
        method.head.bias.fill_(0.5)
    features = torch.tensor([[[0.1, 0.2], [0.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [[0.0, -0.5], [0.3, 0.0]]])
    # w·h + b = (0.1 − 0.4 + 0.5, 0.5), (1.5, −1.5), (1.5, 0.8): V = 10·clip(·, −1, 1)
    v, q = method.read_values(_logits([0.05, -0.02, 0.5], [0.0, 0.0, 0.0], features))
    torch.testing.assert_close(v, torch.tensor([2.0, 10.0, 10.0]), atol=8 * EPS * 10, rtol=0)
    torch.testing.assert_close(q, torch.tensor([5.0, -10.0, 8.0]), atol=8 * EPS * 10, rtol=0)
    v2, q2 = method.read_values(_logits([9.0, 9.0, 9.0], [-9.0, 0.0, 9.0], features))  # other w± logits: same V, Q
    assert torch.equal(v, v2) and torch.equal(q, q2)
    assert [n for n, _ in method.policy.model.named_parameters()] == [
        "weight",
        "sapo_value_head.weight",
        "sapo_value_head.bias",
    ]  # the actor trains it
    with pytest.raises(ValueError, match="lm_head"):
        method.read_values(_logits([0.0] * 3, [0.0] * 3))


def test_no_q_drops_exactly_the_q_term_of_the_loss():
    """The same micro-batch and logits through SAPO and sapo-noq: the losses differ by c_Q·L_Q, nothing else."""
    exp = _method("sapo").compute_advantages(_batch())
    gen = torch.Generator().manual_seed(0)
    logits = PositionLogits(
        torch.randn(10, VOCAB, generator=gen),
        torch.randn(5, VOCAB, generator=gen),
        torch.randn(5, VOCAB, generator=gen),
    )
    sapo, stats = _method("sapo").actor_loss(exp, logits)
    noq, stats_noq = _method("sapo-noq").actor_loss(exp, logits)
    assert stats["q_loss"] > 0.01  # a Q term that would show
    for key in ("policy_loss", "value_loss", "entropy"):
        assert torch.equal(stats[key], stats_noq[key])
    # two float32 sums of four terms of magnitude <= |loss|: a few ulps of it
    torch.testing.assert_close(sapo - noq, 0.1 * stats["q_loss"], atol=16 * EPS * float(sapo.abs()), rtol=0)
