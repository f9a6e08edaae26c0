"""LLMAgent on a real env, and the PPO critic."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agents.base import Agent  # noqa: E402
from agents.critic import CriticModel  # noqa: E402
from agents.generation.base import GenerationParams  # noqa: E402
from agents.llm import LLMAgent  # noqa: E402
from sapo_gym.evaluation import evaluate  # noqa: E402


def test_llm_agent_plays_vault_episodes(tiny_policy):
    agent = LLMAgent(tiny_policy, params=GenerationParams(max_new_tokens=8), seed=0)
    assert isinstance(agent, Agent)
    records = evaluate(
        agent,
        "sapo/Vault-v0",
        task_ids=["vault-train-000", "vault-train-001"],
        batch_size=2,
        env_kwargs={"max_episode_steps": 3},
        progress=False,
    )
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


def test_critic_reads_the_last_prompt_token_and_trains_everything(tiny_policy):
    critic = CriticModel.from_policy(tiny_policy, value_scale=10.0)
    assert all(p.data_ptr() != q.data_ptr() for p in critic.parameters() for q in tiny_policy.parameters())
    ids = torch.tensor([[5, 6, 7, 8, 0, 0], [5, 6, 9, 9, 9, 9]])
    mask = ids != 0
    prompt_lengths = torch.tensor([3, 2])
    v = critic.values(ids, mask, prompt_lengths)
    alone = torch.stack(
        [
            critic(ids[:1, :3], mask[:1, :3], torch.tensor([2]))[0],
            critic(ids[1:, :2], mask[1:, :2], torch.tensor([1]))[0],
        ]
    )
    # response tokens cannot change V(s): causal attention, the same prompt positions in a longer batch (other
    # shapes at every matmul: RECOMPUTE_ATOL's derivation in tests/support/float_bounds.py, 1e-4 + 1e-4·|V|)
    torch.testing.assert_close(v, alone, atol=1e-4, rtol=1e-4)
    v.pow(2).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in critic.parameters())
