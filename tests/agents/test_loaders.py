"""Agent specs for model-backed agents, and the torch-free import surface."""

from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from agents.llm import LLMAgent  # noqa: E402
from agents.policy import PolicyModel  # noqa: E402
from agents.registry import load_agent  # noqa: E402


def test_hf_directory_spec_builds_an_llm_agent(tmp_path):
    PolicyModel.tiny(seed=2).save_pretrained(tmp_path)
    agent = load_agent(str(tmp_path), seed=1)
    assert isinstance(agent, LLMAgent) and agent.params.temperature == 0.4 and agent.seed == 1
    assert agent.policy.value_token_ids == (2048, 2049)
    assert len(agent.act(["The panel glows red."], [{}])) == 1


def test_tiny_spec_and_unknown_hub_ids():
    assert isinstance(load_agent("tiny"), LLMAgent)
    with pytest.raises(ValueError, match="local Hugging Face cache"):
        load_agent("no-such-org/no-such-model-xyz")
    with pytest.raises(ValueError, match="unknown agent spec"):
        load_agent("not a spec")


def test_importing_agents_and_the_registry_stays_torch_free():
    code = (
        "import sys, sapo_gym, agents, agents.registry, agents.generation, agents.loaders; "
        "heavy = [m for m in ('torch', 'transformers', 'requests') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
