"""trainers.experience: padding, positions, and row identity through select/shuffle/minibatch/cat."""

from __future__ import annotations

from dataclasses import fields

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

from tests.support.turns import turn  # noqa: E402
from trainers import core_algos as ca  # noqa: E402
from trainers.experience import READOUT, TOKEN, TOKEN_SET, TURN, Experience, TurnRecord, micro_batches  # noqa: E402

PAD = 0


def two_turns() -> list[TurnRecord]:
    return [
        turn([5, 6, 7], [8, 9], [-0.5, -1.5], reward=0.0, done=False, invalid=True, traj_id=3, turn_idx=0, group_id=1),
        turn([5, 6], [4], [-0.25], reward=1.0, done=True, invalid=False, traj_id=3, turn_idx=1, group_id=1),
    ]


def test_collate_hand_example():
    exp = Experience.collate(two_turns(), pad_id=PAD)
    assert exp.input_ids.tolist() == [[5, 6, 7, 8, 9], [5, 6, 4, 0, 0]]
    assert exp.attention_mask.tolist() == [[True] * 5, [True, True, True, False, False]]
    assert exp.action_mask.tolist() == [[False, False, False, True, True], [False, False, True, False, False]]
    assert exp.old_log_probs.tolist() == [[0, 0, 0, -0.5, -1.5], [0, 0, -0.25, 0, 0]]
    assert exp.prompt_lengths.tolist() == [3, 2] and exp.response_lengths.tolist() == [2, 1]
    assert exp.rewards.tolist() == [0.0, 1.0] and exp.dones.tolist() == [False, True]
    assert exp.invalid.tolist() == [True, False] and exp.group_ids.tolist() == [1, 1]
    assert exp.traj_ids.tolist() == [3, 3] and exp.turn_idx.tolist() == [0, 1]
    assert exp.num_action_tokens == 3 and len(exp) == 2
    # V is read at the last prompt token, Q at the last response token
    assert exp.state_positions.tolist() == [2, 1]
    assert exp.action_end_positions.tolist() == [4, 2]


def test_empty_response_reads_q_at_the_last_prompt_token():
    s = turn([1, 2], [], [], reward=0.0, done=False, invalid=True, traj_id=0, turn_idx=0)
    exp = Experience.collate([s], pad_id=PAD)
    assert exp.action_end_positions.tolist() == [1] == exp.state_positions.tolist()
    assert exp.num_action_tokens == 0


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError, match="log-probs"):
        turn([1], [2, 3], [-1.0])
    with pytest.raises(ValueError, match="prompt token"):
        turn([], [2], [-1.0])
    with pytest.raises(ValueError, match="allowed sets"):
        turn([1], [2, 3], [-1.0, -1.0], allowed_tokens=[(2,)])
    with pytest.raises(TypeError, match="no token ids"):  # a text agent's turn (a teacher's demonstration)
        Experience.collate([TurnRecord("obs", "<action>go</action>", 0.0, False, False, 0, 0)], PAD)
    exp = Experience.collate(two_turns(), PAD)
    with pytest.raises(ValueError, match="rewards"):
        Experience(**{**exp.__dict__, "rewards": torch.zeros(3)})
    with pytest.raises(ValueError):
        Experience.collate([], PAD)


def test_every_field_declares_its_shape_role():
    roles = {f.name: f.metadata["role"] for f in fields(Experience)}
    assert set(roles.values()) == {TOKEN, TOKEN_SET, TURN, READOUT}
    assert roles["input_ids"] == roles["old_log_probs"] == roles["ref_log_probs"] == TOKEN
    assert roles["allowed_tokens"] == TOKEN_SET and roles["value_logits"] == READOUT
    assert roles["rewards"] == roles["anchor_ids"] == roles["advantages"] == TURN


def test_token_fields_pad_with_their_own_value():
    a = Experience.collate(
        [turn([5, 6], [7], [-0.5], allowed_tokens=[(7, 8)], value_logits=((1.0, 2.0), (3.0, 4.0)))], PAD
    )
    b = Experience.collate(
        [
            turn(
                [5, 6, 7],
                [8, 9],
                [-0.5, -0.25],
                traj_id=1,
                allowed_tokens=[None, (9,)],
                value_logits=((0.0, 0.5), (0.0, 0.0)),
            )
        ],
        PAD,
    )
    both = Experience.cat([a, b], pad_id=3)
    assert both.input_ids.tolist() == [[5, 6, 7, 3, 3], [5, 6, 7, 8, 9]]  # the pad id
    assert both.attention_mask[0].tolist() == [True] * 3 + [False] * 2 and both.old_log_probs[0, 3:].tolist() == [0, 0]
    free = [-1, -1]
    assert both.allowed_tokens.tolist() == [[free, free, [7, 8], free, free], [free] * 4 + [[9, -1]]]  # -1: free
    assert both.value_logits.tolist() == [[[1, 2], [3, 4]], [[0, 0.5], [0, 0]]]
    assert a.select([0]).trim().allowed_tokens.shape == (1, 3, 2) and both.trim().allowed_tokens.shape == (2, 5, 2)


def test_trim_select_cat():
    exp = Experience.collate(two_turns(), PAD)
    short = exp.select([1])
    assert short.input_ids.shape == (1, 5)
    trimmed = short.trim()
    assert trimmed.input_ids.tolist() == [[5, 6, 4]] and trimmed.old_log_probs.shape == (1, 3)
    both = Experience.cat([trimmed, exp.select([0])], PAD)
    assert both.input_ids.tolist() == [[5, 6, 4, 0, 0], [5, 6, 7, 8, 9]]
    assert both.turn_idx.tolist() == [1, 0]
    exp.old_values = torch.tensor([0.1, 0.2])
    with pytest.raises(ValueError, match="old_values"):
        Experience.cat([exp, trimmed], PAD)
    moved = exp.to("cpu")
    assert moved.old_values.tolist() == pytest.approx([0.1, 0.2])  # float32(0.1) is within u = 6e-8 relative
    assert Experience.cat([exp.select([0]), exp.select([1])], PAD).turn_idx.tolist() == [0, 1]


def random_samples(seed: int, num_traj: int) -> list[TurnRecord]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for traj in range(num_traj):
        length = int(torch.randint(1, 5, (1,), generator=g))
        for t in range(length):
            p = int(torch.randint(1, 6, (1,), generator=g))
            r = int(torch.randint(0, 4, (1,), generator=g))
            # token ids encode (traj, turn) so a row can be recognised after any permutation
            prompt = [100 * traj + 10 * t + 1] * p
            response = [100 * traj + 10 * t + 2] * r
            out.append(
                turn(
                    prompt,
                    response,
                    [-0.1 * (k + 1) for k in range(r)],
                    reward=float(torch.rand(1, generator=g)),
                    done=t == length - 1 and traj % 2 == 0,
                    invalid=bool(torch.rand(1, generator=g) < 0.3),
                    traj_id=1000 + traj,
                    turn_idx=t,
                    group_id=traj // 2,
                )
            )
    return out


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), num_traj=st.integers(1, 6), size=st.integers(1, 7))
def test_rows_keep_their_identity_through_shuffled_minibatches(seed, num_traj, size):
    samples = random_samples(seed, num_traj)
    exp = Experience.collate(samples, PAD)
    exp.old_values = torch.randn(len(exp), generator=torch.Generator().manual_seed(seed))
    by_key = {(s.traj_id, s.turn_idx): s for s in samples}
    seen = []
    for mb in exp.minibatches(size, generator=torch.Generator().manual_seed(seed)):
        assert len(mb) <= size
        assert mb.input_ids.shape[1] == int(mb.attention_mask.sum(1).max())  # trimmed
        for i in range(len(mb)):
            key = (int(mb.traj_ids[i]), int(mb.turn_idx[i]))
            s = by_key[key]
            n = len(s.output.prompt_ids) + len(s.output.token_ids)
            assert mb.input_ids[i, :n].tolist() == s.output.prompt_ids + s.output.token_ids
            # Python floats stored as float32: within u = 6e-8 relative (approx's default 1e-6 is a margin)
            assert mb.old_log_probs[i][mb.action_mask[i]].tolist() == pytest.approx(s.output.log_probs)
            assert float(mb.rewards[i]) == pytest.approx(s.reward)
            assert int(mb.group_ids[i]) == s.group_id
            row = samples.index(s)
            assert float(mb.old_values[i]) == float(exp.old_values[row])
            seen.append(key)
    assert sorted(seen) == sorted(by_key)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), num_traj=st.integers(1, 6))
def test_targets_do_not_depend_on_row_order(seed, num_traj):
    exp = Experience.collate(random_samples(seed, num_traj), PAD)
    g = torch.Generator().manual_seed(seed)
    values, q = torch.randn(len(exp), generator=g), torch.randn(len(exp), generator=g)
    perm = torch.randperm(len(exp), generator=g)
    shuffled = exp.select(perm)
    a, yv, yq = ca.turn_targets(exp.rewards, values, exp.dones, exp.traj_ids, exp.turn_idx, 0.99, 0.95, q)
    a2, yv2, yq2 = ca.turn_targets(
        shuffled.rewards, values[perm], shuffled.dones, shuffled.traj_ids, shuffled.turn_idx, 0.99, 0.95, q[perm]
    )
    # each trajectory's recursion runs on the same numbers in the same order whatever the row order: the same
    # floats (allclose's float32 default is only a margin)
    assert torch.allclose(a[perm], a2) and torch.allclose(yv[perm], yv2) and torch.allclose(yq[perm], yq2)
    # GRPO per-turn rows (statistics across steps) are order-free too, up to the order of the group sums: the
    # mean and std of n values move by ~n·u·max|x| (relative ~2n·u for the std), so a = (x - mean)/(std + eps)
    # moves by at most ~2n·u·(max|x|/(std + eps) + |a|): computed per draw (hypothesis draws new ones each run)
    ret = ca.trajectory_returns(exp.rewards, exp.traj_ids)
    adv = ca.grpo_advantages(ret, exp.group_ids)
    n, eps = len(ret), 1e-6
    stds = [
        float(ret[exp.group_ids == gid].std())
        for gid in exp.group_ids.unique()
        if int((exp.group_ids == gid).sum()) > 1
    ]
    scale = float(ret.abs().max()) / (min(stds, default=0.0) + eps) if stds else 0.0
    bound = 4 * n * torch.finfo(torch.float32).eps * (scale + adv.abs().max())
    assert torch.allclose(
        adv[perm], ca.grpo_advantages(ret[perm], exp.group_ids[perm]), rtol=0, atol=float(bound) + 1e-30
    )


def test_micro_batches_keep_the_batch_order_the_last_one_holding_the_rest():
    exp = Experience.collate(random_samples(0, 4), PAD)
    parts = list(micro_batches(exp, 3))
    assert [len(p) for p in parts] == [3] * (len(exp) // 3) + ([len(exp) % 3] if len(exp) % 3 else [])
    assert torch.cat([p.turn_idx for p in parts]).tolist() == exp.turn_idx.tolist()
    assert torch.cat([p.traj_ids for p in parts]).tolist() == exp.traj_ids.tolist()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), num_traj=st.integers(1, 6), size=st.integers(1, 7))
def test_micro_batches_by_length_hold_every_row_once_longest_first(seed, num_traj, size):
    """Each row once, longest first. When the chunks are all ``size`` rows, sorted consecutive chunks pad the least
    any cut into such chunks can (the k-th largest chunk maximum is at least the ((k-1)·size + 1)-th largest
    length), so no more than the batch's own order does. (A short last chunk is where that cut can beat it.)"""
    exp = Experience.collate(random_samples(seed, num_traj), PAD)
    exp.old_values = torch.arange(len(exp), dtype=torch.float32)  # the row's index travels with it
    micros = list(micro_batches(exp, size, by_length=True))
    rows = [int(r) for m in micros for r in m.old_values]
    lengths = exp.attention_mask.sum(1)
    assert sorted(rows) == list(range(len(exp))) and all(len(m) <= size for m in micros)
    assert lengths[rows].tolist() == sorted(lengths.tolist(), reverse=True)
    padded = lambda parts: sum(m.input_ids.numel() for m in parts)  # noqa: E731 (each chunk is trimmed)
    if len(exp) % size == 0:
        assert padded(micros) <= padded(micro_batches(exp, size))
