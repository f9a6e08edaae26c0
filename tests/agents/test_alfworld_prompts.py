"""The LLM agent on real ALFWorld prompts: the truncation rule keeps the task and the instruction."""

from __future__ import annotations

import gymnasium as gym
import pytest

import sapo_gym  # noqa: F401  (registers the env ids)

torch = pytest.importorskip("torch")

from agents.generation.base import GenerationParams  # noqa: E402
from agents.llm import LLMAgent  # noqa: E402
from agents.policy import PolicyModel  # noqa: E402

pytestmark = pytest.mark.needs_data


def test_real_alfworld_prompts_are_cut_in_the_middle(alfworld_data, monkeypatch):
    monkeypatch.setenv("ALFWORLD_DATA", str(alfworld_data))
    env = gym.make("sapo/ALFWorld-v0", split="eval_in_distribution")
    obs, info = env.reset(options={"task_index": 0})
    obs, *_ = env.step(f"<think>go</think><action>{info['expert_action']}</action>")
    env.close()
    policy = PolicyModel.tiny(max_prompt_tokens=200)
    agent = LLMAgent(policy, params=GenerationParams(max_new_tokens=8), seed=0)
    full = policy.encode_prompts([obs], max_tokens=10_000).token_ids[0]
    turn = agent.act_detailed([obs], [info])[0]
    assert len(full) > 400 and turn.prompt_truncated and len(turn.prompt_ids) == 200
    text = policy.tokenizer.decode(turn.prompt_ids)
    assert "Your task is to: look at alarmclock under the desklamp." in text
    assert text.endswith("present it within <action> </action> tags.\n<|im_end|>\n<|im_start|>assistant\n")
    assert "Looking quickly around you" not in text  # the old history's observation is what goes
