"""HFGenerator: value tokens never sampled, exact log-probs, batching invariance, budgets."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agents.generation.base import GenerationParams  # noqa: E402
from agents.generation.hf import HFGenerator  # noqa: E402
from agents.logits import mask_value_tokens  # noqa: E402
from agents.policy import PolicyModel  # noqa: E402

PROMPTS = [
    "You stand before a vault with 3 buttons. The panel glows red.",
    "look",
    "Your task is to: put a mug in fridge 1.",
]


def _recompute(policy: PolicyModel, prompt: list[int], response: list[int], temperature: float) -> torch.Tensor:
    ids = torch.tensor([prompt + response])
    z = policy.logits(ids, torch.ones_like(ids))[0, len(prompt) - 1 : -1]
    z = mask_value_tokens(z, policy.value_token_ids) / (temperature or 1.0)
    return torch.log_softmax(z, dim=-1).gather(-1, torch.tensor(response)[:, None]).squeeze(-1)


def test_value_tokens_are_never_sampled_even_when_they_dominate(tiny_policy, steer):
    plus, minus = tiny_policy.value_token_ids

    def favour_value_tokens(logits, positions):
        logits[..., plus] += 1e4
        logits[..., minus] += 1e4

    prompts = tiny_policy.encode_prompts(PROMPTS).token_ids
    with steer(tiny_policy, favour_value_tokens):
        z = tiny_policy.logits(torch.tensor([prompts[1]]), torch.ones(1, len(prompts[1])))
        assert z[0, -1].argmax().item() in (plus, minus)  # the raw model would pick them
        for params in (GenerationParams(max_new_tokens=16, seed=0), GenerationParams(max_new_tokens=16, temperature=0)):
            for out in HFGenerator(tiny_policy).generate(prompts, params):
                assert plus not in out.token_ids and minus not in out.token_ids
                assert all(lp > -50 for lp in out.log_probs)


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
def test_log_probs_match_a_forward_pass(tiny_policy, temperature):
    prompts = tiny_policy.encode_prompts(PROMPTS).token_ids
    outs = HFGenerator(tiny_policy).generate(
        prompts, GenerationParams(max_new_tokens=12, temperature=temperature, seed=1)
    )
    for prompt, out in zip(prompts, outs):
        assert len(out.token_ids) == len(out.log_probs) > 0
        expected = _recompute(tiny_policy, prompt, out.token_ids, temperature)
        # KV-cached decoding against a full forward: RECOMPUTE_ATOL's derivation (tests/support/float_bounds.py),
        # ~20 reductions of <= 128 terms on the path to a logit, a random walk of rounding errors: <= 1e-4
        torch.testing.assert_close(torch.tensor(out.log_probs), expected, atol=1e-4, rtol=1e-4)


def test_batched_equals_one_by_one_under_greedy_with_rows_stopping_early(tiny_policy, steer):
    eos = tiny_policy.tokenizer.eos_token_id

    def stop_at_position_40(logits, positions):  # rows reach position 40 at different steps
        logits[positions[:, -1] == 40, -1, eos] += 1e4

    prompts = tiny_policy.encode_prompts(PROMPTS).token_ids
    gen, params = HFGenerator(tiny_policy), GenerationParams(max_new_tokens=40, temperature=0)
    with steer(tiny_policy, stop_at_position_40):
        batched = gen.generate(prompts, params)
        single = [gen.generate([p], params)[0] for p in prompts]
    # logits at position 40 choose the token at position 41: the response's (42 - prompt length)-th
    assert [len(o.token_ids) for o in batched] == [42 - len(p) for p in prompts]
    assert len({len(o.token_ids) for o in batched}) == len(prompts)
    for b, s in zip(batched, single):
        assert b.token_ids == s.token_ids and b.token_ids[-1] == eos and not b.truncated
        # the same cached decode on a batch vs one row: other shapes at every matmul, the same derivation as
        # against a full forward above (RECOMPUTE_ATOL in tests/support/float_bounds.py): 1e-4
        torch.testing.assert_close(torch.tensor(b.log_probs), torch.tensor(s.log_probs), atol=1e-4, rtol=1e-4)


def test_empty_generation(tiny_policy, steer):
    eos = tiny_policy.tokenizer.eos_token_id

    def stop_now(logits, positions):
        logits[..., eos] += 1e4

    with steer(tiny_policy, stop_now):
        out = HFGenerator(tiny_policy).generate([[5, 6, 7]], GenerationParams(max_new_tokens=8, seed=0))[0]
    assert out.token_ids == [eos] and out.text == "" and not out.truncated
    assert out.log_probs[0] == pytest.approx(0.0, abs=1e-4)  # logit + 1e4 vs the rest: log p = -Σ e^-1e4 ≈ 0 exactly


def test_budgets_and_context_limit_truncate(steer):
    policy = PolicyModel.tiny(max_position_embeddings=32, max_prompt_tokens=24)
    gen = HFGenerator(policy)
    never_stop = GenerationParams(max_new_tokens=10, temperature=0)

    def no_end_token(logits, positions):  # the budget, not an end token, ends generation
        logits[..., list(policy.eos_token_ids)] = float("-inf")

    with steer(policy, no_end_token):
        outs = gen.generate([[5] * 4, [5] * 29, [5] * 32], never_stop)
    assert [len(o.token_ids) for o in outs] == [10, 3, 0]
    assert all(o.truncated for o in outs)
    assert gen.generate([[5]], GenerationParams(max_new_tokens=0))[0].token_ids == []
    with pytest.raises(ValueError, match="empty prompt"):
        gen.generate([[]], never_stop)
    with pytest.raises(ValueError, match="1 constraints for 2 prompts"):
        gen.generate([[5], [5]], never_stop, constraints=[None])


def test_seeds_reproduce_and_top_p_narrows_to_greedy(tiny_policy):
    gen = HFGenerator(tiny_policy)
    prompts = tiny_policy.encode_prompts(PROMPTS).token_ids
    a = gen.generate(prompts, GenerationParams(max_new_tokens=10, seed=7))
    b = gen.generate(prompts, GenerationParams(max_new_tokens=10, seed=7))
    c = gen.generate(prompts, GenerationParams(max_new_tokens=10, seed=8))
    assert [o.token_ids for o in a] == [o.token_ids for o in b] != [o.token_ids for o in c]
    nucleus = gen.generate(prompts, GenerationParams(max_new_tokens=10, top_p=1e-6, seed=3))
    greedy = gen.generate(prompts, GenerationParams(max_new_tokens=10, temperature=0))
    assert [o.token_ids for o in nucleus] == [o.token_ids for o in greedy]


def test_push_weights_loads_another_models_weights():
    target, source = PolicyModel.tiny(seed=0), PolicyModel.tiny(seed=1)
    gen = HFGenerator(target)
    gen.push_weights(source)
    assert torch.equal(target.model.get_input_embeddings().weight, source.model.get_input_embeddings().weight)
    gen.push_weights(target)  # its own module: nothing to copy


def test_sample_next_draws_from_the_masked_tempered_nucleus():
    from agents.generation.hf import sample_next

    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, 9.0, 8.0]).repeat(40_000, 1)  # ids 4, 5 play w+/w-
    params = GenerationParams(temperature=0.5, top_p=0.9)
    tokens, log_probs = sample_next(logits, (4, 5), params, torch.Generator().manual_seed(0))
    tempered = torch.softmax(torch.tensor([2.0, 1.0, 0.5, 0.0]) / 0.5, dim=0)  # [0.84, 0.11, 0.04, 0.02]
    nucleus = torch.tensor([tempered[0], tempered[1], 0.0, 0.0])  # 0.84 < 0.9 ≤ 0.84 + 0.11
    freq = torch.bincount(tokens, minlength=6).float() / len(tokens)
    # 40,000 seeded draws: a frequency's binomial std is at most sqrt(0.25 / 40,000) = 2.5e-3, 0.01 is 4 of them
    # (and the draws are seeded: the same on every run)
    torch.testing.assert_close(freq[:4], nucleus / nucleus.sum(), atol=0.01, rtol=0)
    assert freq[4] == freq[5] == 0
    # log-probs ignore top_p; log_softmax vs log(softmax) of 4 logits: a few ulps, inside float32's default
    torch.testing.assert_close(log_probs, tempered.log()[tokens])


def test_value_logits_are_read_where_a_forward_pass_reads_them_and_change_no_draw(tiny_policy, steer):
    """V's w⁺/w⁻ logits at the last prompt token, Q's at the last response token, for rows that stop at
    different steps and one that runs out of budget; asking for them leaves tokens and log-probs alone."""
    from dataclasses import replace

    eos = tiny_policy.tokenizer.eos_token_id
    plus, minus = tiny_policy.value_token_ids

    def stop_at_position_40(logits, positions):
        logits[positions[:, -1] == 40, -1, eos] += 1e4

    prompts = tiny_policy.encode_prompts(PROMPTS).token_ids
    budget = sorted(42 - len(p) for p in prompts)[1]  # the longest response hits the budget instead
    params, gen = GenerationParams(max_new_tokens=budget, seed=5), HFGenerator(tiny_policy)
    with steer(tiny_policy, stop_at_position_40):
        plain = gen.generate(prompts, params)
        read = gen.generate(prompts, replace(params, value_logits=True))
        assert [len(o.token_ids) for o in read] == [min(42 - len(p), budget) for p in prompts]
        assert [o.truncated for o in read].count(True) == 1  # two rows stop at different steps, one is cut
        for prompt, a, b in zip(prompts, plain, read):
            assert a.value_logits is None and a.token_ids == b.token_ids
            # a finished row stays in the batch one more pass to read Q: the other rows decode at other shapes, so
            # their log-probs may differ by rounding (1 ulp seen with AMX kernels): RECOMPUTE_ATOL's derivation, 1e-4
            torch.testing.assert_close(torch.tensor(b.log_probs), torch.tensor(a.log_probs), atol=1e-4, rtol=1e-4)
            ids = torch.tensor([prompt + b.token_ids])
            z = tiny_policy.logits(ids, torch.ones_like(ids))[0][:, [plus, minus]]
            # raw logits from the cached decode vs a full forward: as for the log-probs above, 1e-4 (+ 1e-4·|z|)
            torch.testing.assert_close(torch.tensor(b.value_logits), z[[len(prompt) - 1, -1]], atol=1e-4, rtol=1e-4)
