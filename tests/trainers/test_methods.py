"""Each method on a tiny model: one update gives a finite loss and changes every trainable parameter."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tests.support.float_bounds import RECOMPUTE_ATOL
from tests.support.params import snapshot, unchanged
from trainers.config import ALGOS  # every registered method (trainers/method_registry.py)
from trainers.profiling import PHASES, PhaseTimer

U = torch.finfo(torch.float32).eps / 2  # float32 unit roundoff


@pytest.mark.parametrize("algo", ALGOS)
def test_one_update_is_finite_and_moves_every_parameter(make_trainer, algo):
    trainer = make_trainer(algo)
    policy_before = snapshot(trainer.policy.model)
    critic_before = snapshot(trainer.method.critic) if trainer.method.critic is not None else {}
    row = trainer.run_iteration()
    assert math.isfinite(row["actor/loss"]) and math.isfinite(row["actor/policy_loss"])
    assert row["rollout/invalid_rate"] < 1.0, "the warm start should give some valid actions"
    assert unchanged(policy_before, trainer.policy.model) == []
    if algo == "ppo":
        assert math.isfinite(row["critic/value_loss"]) and unchanged(critic_before, trainer.method.critic) == []
    if trainer.method.readout:  # SAPO and its ablations
        assert math.isfinite(row["actor/value_loss"]) and math.isfinite(row["actor/q_loss"])
    assert trainer.iteration == 1


class _CountingTimer(PhaseTimer):
    """A PhaseTimer that also counts the torch operations each phase dispatches (``ops``): whether a phase
    did any work, without reading a wall clock (a no-op phase can take milliseconds on a loaded machine)."""

    ops: dict[str, int] = {}

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        counter = _OpCounter()
        with super().__call__(phase), counter:
            yield
        _CountingTimer.ops[phase] = _CountingTimer.ops.get(phase, 0) + counter.n


class _OpCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("algo", ALGOS)
def test_methods_differ_only_where_they_should(make_trainer, algo, monkeypatch):
    trainer = make_trainer(algo)
    monkeypatch.setattr("trainers.loop.PhaseTimer", _CountingTimer)
    monkeypatch.setattr(_CountingTimer, "ops", {})
    row = trainer.run_iteration()
    assert {f"time/{p}" for p in PHASES} <= set(row)
    assert ("critic/value_loss" in row) == (algo == "ppo")
    assert ("actor/value_loss" in row) == trainer.method.readout  # SAPO and its ablations
    assert (trainer.method.critic is None) == (algo != "ppo")
    ops = _CountingTimer.ops
    assert ops["actor_update"] > 0 and ops["old_log_prob"] > 0  # the counter sees the work that is done
    assert (ops["critic_update"] > 0) == (algo == "ppo")  # only PPO trains a critic
    assert (ops["value"] > 0) == (algo == "ppo")  # SAPO reads V from the old forward, the group methods have none


def test_grpo_groups_share_tasks_and_advantages_are_group_relative(make_trainer):
    from trainers.experience import Experience
    from trainers.rollout import collect

    trainer = make_trainer("grpo", episodes_per_iteration=8, group_size=4, grpo_stats_across_steps=False, c_inv=0.0)
    rollout = collect(trainer.vec, trainer.agent.act_detailed, episode=0)
    assert [e.group_id for e in rollout.episodes] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert len({e.task_id for e in rollout.episodes[:4]}) == 1
    exp = Experience.collate(rollout.turns, trainer.policy.pad_token_id)
    adv = trainer.method.compute_advantages(exp).advantages
    first_turns = exp.turn_idx == 0
    traj_adv = adv[first_turns]
    for g in (0, 1):
        members = traj_adv[exp.group_ids[first_turns] == g]
        returns = torch.tensor([e.episode_return for e in rollout.episodes if e.group_id == g])
        if returns.std() > 0:  # standardized returns of 4 members, |x| <= 1: the numerator's float32 error is
            # ~(n + 1)·u·max|x| = 5u, over std; std's own relative error ~(2n + 3)·u on |a| <= sqrt(n - 1):
            # within ~3e-7/std + 1e-6 of this recomputation; 1e-4 holds for any spread std >= 0.003
            assert torch.allclose(members, (returns - returns.mean()) / (returns.std() + 1e-6), atol=1e-4)
        else:
            assert torch.allclose(members, torch.zeros_like(members))
    # verl-agent's default: every turn row's score (R - c_inv on an invalid turn) enters its group's mean and std
    trainer.cfg.grpo_stats_across_steps, trainer.cfg.c_inv = True, 0.1
    adv = trainer.method.compute_advantages(exp).advantages
    ret: dict[int, float] = {}
    for t in rollout.turns:  # each trajectory's undiscounted return, summed from the recorded turns
        ret[t.traj_id] = ret.get(t.traj_id, 0.0) + t.reward
    scores = torch.tensor([ret[int(t)] for t in exp.traj_ids]) - 0.1 * exp.invalid.float()
    for g in (0, 1):
        rows = exp.group_ids == g
        x = scores[rows]
        if x.std() > 0:  # scores differ by >= 0.1 (a penalty) or by a reward: std >= ~0.1/sqrt(n) > 0.003, so the
            # bound above (1e-4 for std >= 0.003) holds here too
            assert torch.allclose(adv[rows], (x - x.mean()) / (x.std() + 1e-6), atol=1e-4)
        else:
            assert torch.equal(adv[rows], torch.zeros_like(x))


def test_rollout_records_raw_observations_as_gigpo_anchors(make_trainer):
    from trainers.experience import Experience, anchor_id
    from trainers.rollout import collect

    trainer = make_trainer("gigpo", episodes_per_iteration=8, group_size=4)
    rollout = collect(trainer.vec, trainer.agent.act_detailed, episode=0)
    turns = rollout.turns
    assert all(t.anchor is not None and t.anchor != t.prompt for t in turns)  # the env's text, not the rendered prompt
    exp = Experience.collate(rollout.turns, trainer.policy.pad_token_id)
    assert exp.anchor_ids is not None and exp.anchor_ids.tolist() == [anchor_id(t.group_id, t.anchor) for t in turns]
    first = exp.turn_idx == 0  # the 4 members of a group reset to the same task: one anchor state at turn 0
    for g in (0, 1):
        assert len(set(exp.anchor_ids[first & (exp.group_ids == g)].tolist())) == 1
    assert anchor_id(0, "x") == anchor_id(0, "x") != anchor_id(1, "x")  # equal text of another task: another anchor


@pytest.mark.parametrize("algo", ["grpo", "gigpo", "rloo"])
@pytest.mark.parametrize("across", [True, False])
def test_group_methods_take_c_inv_off_the_scores_before_their_group_terms(make_trainer, algo, across):
    from tests.support.turns import turn
    from trainers.core_algos import gigpo_advantages, group_entries, grpo_advantages, rloo_advantages, turn_scores
    from trainers.experience import Experience

    # two groups of two one- or two-turn trajectories; traj 1's first turn is invalid
    rows = [
        (0, 0, 0, "a", 0.0, False),
        (0, 1, 0, "b", 10.0, False),
        (1, 0, 0, "a", 0.0, True),
        (1, 1, 0, "a", 0.0, False),
        (2, 0, 1, "a", 10.0, False),
        (3, 0, 1, "a", 0.0, False),
    ]
    samples = [
        turn([1, 2], [3], [-0.5], reward=r, done=False, invalid=inv, traj_id=tr, turn_idx=k, group_id=g, anchor=a)
        for tr, k, g, a, r, inv in rows
    ]
    trainer = make_trainer(algo, c_inv=0.3, gigpo_mode="mean_std_norm", grpo_stats_across_steps=across)
    exp = trainer.method.compute_advantages(Experience.collate(samples, pad_id=0))
    penalty = 0.3 * exp.invalid.float()
    scores = turn_scores(exp.rewards, exp.traj_ids, penalty)
    assert torch.allclose(scores, torch.tensor([10.0, 10.0, -0.3, 0.0, 10.0, 0.0]))  # R - c_inv on the invalid turn
    entries = group_entries(exp.traj_ids, exp.turn_idx, across)
    if algo == "rloo":
        want = rloo_advantages(scores, exp.group_ids, weights=entries)
        if not across:  # group 0's entries are the first turns [10, -0.3]: 2·(s − 4.85); group 1 [10, 0]: 2·(s − 5)
            assert torch.allclose(want, torch.tensor([10.3, 10.3, -10.3, -9.7, 10.0, -10.0]))
    elif algo == "grpo":
        want = grpo_advantages(scores, exp.group_ids, weights=entries)
    else:
        want = gigpo_advantages(
            exp.rewards,
            exp.traj_ids,
            exp.turn_idx,
            exp.group_ids,
            exp.anchor_ids,
            gamma=0.95,
            scale_by_std=True,
            stats_across_steps=across,
            penalty=penalty,
        )
    assert torch.equal(exp.advantages, want)
    samples = [turn([1], [], [])]  # no recorded observation: GiGPO says what it needs
    if algo == "gigpo":
        with pytest.raises(ValueError, match="raw env observation"):
            trainer.method.compute_advantages(Experience.collate(samples, pad_id=0))


def test_forward_positions_matches_the_full_forward(make_trainer):
    from trainers.experience import Experience
    from trainers.forward import action_log_probs, forward_positions
    from trainers.rollout import collect

    trainer = make_trainer("sapo")
    rollout = collect(trainer.vec, trainer.agent.act_detailed, episode=0)
    exp = Experience.collate(rollout.turns, trainer.policy.pad_token_id)
    with torch.no_grad():
        full = trainer.policy.logits(exp.input_ids, exp.attention_mask)
        some = forward_positions(trainer.policy.model, exp, readout=True)
        lp = action_log_probs(some, exp, trainer.method.value_token_ids, 1.0)
        hidden = trainer.policy.model.get_decoder()(
            input_ids=exp.input_ids, attention_mask=exp.attention_mask, use_cache=False
        ).last_hidden_state
    head = trainer.policy.model.get_output_embeddings().weight
    rows = torch.arange(len(exp))
    # Both run the same decoder call (same hidden states); the LM head then multiplies other row sets, which
    # GEMM kernels may block differently: each logit is a dot product of d = 64 terms, and two float32
    # evaluations of it, each within γ_d·Σ|h·w| of exact (γ_d ≈ d·u), agree to twice that, computed per logit.
    d = hidden.shape[-1]
    for got, want, h in (
        (some.action, full[:, :-1][exp.action_mask[:, 1:]], hidden[:, :-1][exp.action_mask[:, 1:]]),
        (some.state, full[rows, exp.state_positions], hidden[rows, exp.state_positions]),
        (some.end, full[rows, exp.action_end_positions], hidden[rows, exp.action_end_positions]),
    ):
        assert bool(((got - want).abs() <= 2 * (d + 1) * U * (h.abs() @ head.abs().T)).all())
    # the generator's log-probs (sampling time) are what the loop recomputes as old log-probs
    assert torch.allclose(lp, exp.old_log_probs, rtol=0, atol=RECOMPUTE_ATOL)
    assert bool((lp[~exp.action_mask] == 0).all())


@pytest.mark.parametrize("algo", ALGOS)
def test_rollout_old_log_probs_equal_the_recomputed_ones(make_trainer, algo):
    """``old_log_probs='rollout'`` keeps the sampler's log π_old (and SAPO's V_old, Q_old from its w⁺/w⁻
    logits) instead of a forward pass: equal to the recomputed values up to float32 rounding."""
    import copy

    from trainers.config import TrainConfig
    from trainers.profiling import PhaseTimer

    trainer = make_trainer(algo, old_log_probs="rollout")
    _, exp = trainer.collect_batch(PhaseTimer())
    assert (exp.value_logits is not None) == trainer.method.readout  # only SAPO (and its ablations) ask for them
    kept = trainer.method.old_forward(copy.deepcopy(exp))
    trainer.method.cfg = TrainConfig(**{**trainer.cfg.__dict__, "old_log_probs": "recompute"})
    recomputed = trainer.method.old_forward(copy.deepcopy(exp))
    torch.testing.assert_close(kept.old_log_probs, recomputed.old_log_probs, atol=RECOMPUTE_ATOL, rtol=0)
    assert not torch.equal(kept.old_log_probs, recomputed.old_log_probs)  # it really skipped the forward pass
    for key in ("old_values", "old_q") if trainer.method.readout else ():
        torch.testing.assert_close(getattr(kept, key), getattr(recomputed, key), atol=RECOMPUTE_ATOL, rtol=0)
    if trainer.method.readout:  # without the sampler's logits SAPO falls back to the forward pass
        exp.value_logits = None
        trainer.method.cfg = trainer.cfg
        fallback = trainer.method.old_forward(copy.deepcopy(exp))
        assert torch.equal(fallback.old_values, recomputed.old_values)
    assert math.isfinite(trainer.run_iteration()["actor/loss"])


def test_rollout_old_log_probs_need_the_hf_sampler():
    from trainers.config import TrainConfig

    with pytest.raises(ValueError, match="needs generator 'hf'"):
        TrainConfig(generator="vllm", old_log_probs="rollout")
    with pytest.raises(ValueError, match="unknown old_log_probs"):
        TrainConfig(old_log_probs="sampler")
