"""LLMAgent on a real env, the SAPO readout positions, and the PPO critic."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agents.base import Agent  # noqa: E402
from agents.critic import CriticModel  # noqa: E402
from agents.generation.base import GenerationParams  # noqa: E402
from agents.llm import LLMAgent  # noqa: E402
from agents.value import readout_positions, sapo_readout  # noqa: E402
from sapo_gym.evaluation import evaluate  # noqa: E402


def test_llm_agent_plays_vault_episodes(tiny_policy):
    agent = LLMAgent(tiny_policy, params=GenerationParams(max_new_tokens=8), seed=0)
    assert isinstance(agent, Agent)
    records = evaluate(agent, "sapo/Vault-v0", task_ids=["vault-train-000", "vault-train-001"], batch_size=2,
                       env_kwargs={"max_episode_steps": 3}, progress=False)
    assert [r.steps for r in records] == [3, 3]  # random text: invalid no-ops until the horizon
    assert all(isinstance(t.output, str) and not t.valid for r in records for t in r.turns)


def test_act_detailed_is_consistent_and_seeded(tiny_policy):
    params = GenerationParams(max_new_tokens=6)
    agent = LLMAgent(tiny_policy, params=params, seed=5)
    obs = ["The panel glows red.", "x " * 5000]
    turns = agent.act_detailed(obs, [{}, {}])
    assert [t.prompt_truncated for t in turns] == [False, True]
    assert len(turns[1].prompt_ids) == agent.prompt_budget
    for t, ids in zip(turns, tiny_policy.encode_prompts(obs, max_tokens=agent.prompt_budget).token_ids):
        assert t.prompt_ids == ids and len(t.token_ids) == len(t.log_probs) <= 6
        assert t.text == tiny_policy.decode(t.token_ids)
    again = LLMAgent(tiny_policy, params=params, seed=5).act_detailed(obs)
    assert [t.token_ids for t in again] == [t.token_ids for t in turns]
    state = agent.state_dict()
    later = agent.act_detailed(obs)  # the next call draws fresh samples
    assert [t.token_ids for t in later] != [t.token_ids for t in turns]
    resumed = LLMAgent(tiny_policy, params=params, seed=5)
    resumed.load_state_dict(state)
    assert [t.token_ids for t in resumed.act_detailed(obs)] == [t.token_ids for t in later]
    assert agent.act_detailed([], []) == []


def test_readout_positions_hand_computed():
    v, q = readout_positions(torch.tensor([3, 5, 4]), torch.tensor([2, 0, 1]))
    assert v.tolist() == [2, 4, 3] and q.tolist() == [4, 4, 4]


def test_readout_positions_agree_with_the_trainers_batch(tiny_policy):
    from trainers.experience import Experience, TurnRecord

    turns = LLMAgent(tiny_policy, params=GenerationParams(max_new_tokens=5), seed=0).act_detailed(["a", "bb bb", "c c c c"])
    turns[1].token_ids, turns[1].log_probs = [], []  # an empty generation
    exp = Experience.collate([TurnRecord("", t, 0.0, False, False, i, 0) for i, t in enumerate(turns)], tiny_policy.pad_token_id)
    v_pos, q_pos = readout_positions(exp.prompt_lengths, exp.response_lengths)
    assert torch.equal(v_pos, exp.state_positions) and torch.equal(q_pos, exp.action_end_positions)
    assert q_pos[1] == v_pos[1]


def test_sapo_readout_reads_the_right_logits():
    logits = torch.zeros(2, 6, 10)
    w_plus, w_minus = 8, 9
    logits[0, 1, w_plus] = 0.5  # row 0: prompt 2 tokens, response 3 → V at 1, Q at 4
    logits[0, 4, w_minus] = 3.0
    logits[1, 2, w_plus] = 0.25  # row 1: prompt 3, response 0 → V and Q at 2
    logits[1, 5, w_plus] = 9.0  # padding: never read
    values, q = sapo_readout(logits, torch.tensor([2, 3]), torch.tensor([3, 0]), (w_plus, w_minus), tau_v=1.0, r_max=10.0)
    torch.testing.assert_close(values, torch.tensor([5.0, 2.5]))
    torch.testing.assert_close(q, torch.tensor([-10.0, 2.5]))  # clipped at -R_max


def test_critic_reads_the_last_prompt_token_and_trains_everything(tiny_policy):
    critic = CriticModel.from_policy(tiny_policy, value_scale=10.0)
    assert all(p.data_ptr() != q.data_ptr() for p in critic.parameters() for q in tiny_policy.parameters())
    ids = torch.tensor([[5, 6, 7, 8, 0, 0], [5, 6, 9, 9, 9, 9]])
    mask = ids != 0
    prompt_lengths = torch.tensor([3, 2])
    v = critic.values(ids, mask, prompt_lengths)
    alone = torch.stack([critic(ids[:1, :3], mask[:1, :3], torch.tensor([2]))[0], critic(ids[1:, :2], mask[1:, :2], torch.tensor([1]))[0]])
    # response tokens cannot change V(s): causal attention, the same prompt positions in a longer batch (other
    # shapes at every matmul: RECOMPUTE_ATOL's derivation in tests/support/float_bounds.py, 1e-4 + 1e-4·|V|)
    torch.testing.assert_close(v, alone, atol=1e-4, rtol=1e-4)
    v.pow(2).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in critic.parameters())
