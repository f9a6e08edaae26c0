"""Speculative sampling with drafts from earlier responses: the draws' distribution, greedy equality, constraints."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from agents.constraint import ConstraintBuilder  # noqa: E402
from agents.generation.base import GenerationParams  # noqa: E402
from agents.generation.hf import HFGenerator  # noqa: E402
from agents.generation.speculative import DraftMemory, accept_draft  # noqa: E402

PROMPTS = [
    "You stand before a vault with 3 buttons. The panel glows red.",
    "look",
    "Your task is to: put a mug in fridge 1.",
]


def test_draft_memory_proposes_the_newest_continuation_of_the_prefix_then_of_its_last_tokens():
    memory = DraftMemory(size=3, ngram=2)
    memory.remember([1, 2, 3, 4])
    memory.remember([1, 2, 9])
    assert memory.propose([1, 2], 5) == [9]  # the newest response starting with the prefix
    assert memory.propose([1, 2, 3], 5) == [4] and memory.propose([], 2) == [1, 2]
    assert memory.propose([7, 7, 2, 3], 5) == [4]  # no response starts so: the newest holding its last 2 tokens
    assert memory.propose([7, 7, 8, 2], 5) == [9]  # nor with (8, 2): the newest holding its last token
    assert memory.propose([7], 3) == [] and memory.propose([1, 2], 0) == []
    memory.remember([1, 2, 9])  # already known: nothing changes
    memory.remember([5, 6])
    memory.remember([1, 2, 7])  # a fourth distinct response: past the size, not indexed
    assert memory.propose([1, 2], 5) == [9] and memory.propose([5], 2) == [6]
    memory.clear()
    assert memory.propose([], 3) == [] and memory.propose([1, 2], 3) == []


def _counts(draws: list[int], size: int) -> list[int]:
    return [draws.count(k) for k in range(size)]


def _within_binomial_bound(counts: list[int], probs: list[float]) -> None:
    # each count is Binomial(n, p): |count − n·p| <= 6·sqrt(n·p·(1 − p)) + 1 fails with probability < 1e-8 per cell
    n = sum(counts)
    for c, p in zip(counts, probs):
        assert abs(c - n * p) <= 6 * math.sqrt(n * p * (1 - p)) + 1, (counts, probs)


def test_accepted_and_resampled_tokens_are_distributed_as_plain_sampling():
    """Token 1: P(d)·1[x = d] + (1 − P(d))·P(x)/(1 − P(d))·1[x ≠ d] = P(x); token 2 given token 1 = d: P₁."""
    p0 = torch.tensor([0.1, 0.4, 0.2, 0.25, 0.05])
    p1 = torch.tensor([0.3, 0.3, 0.1, 0.1, 0.2])
    logits = torch.stack([p0.log(), p1.log(), p1.log()])
    params, rng = GenerationParams(temperature=1.0), torch.Generator().manual_seed(0)
    first, second = [], []
    for _ in range(20000):
        tokens, log_probs = accept_draft(logits, [1, 3], [None, None, None], (), params, rng)
        assert 1 <= len(tokens) <= 3
        for t, lp, p in zip(tokens, log_probs, (p0, p1, p1)):
            assert math.isclose(lp, math.log(float(p[t])), rel_tol=1e-5)  # float32 log-softmax of exact logs
        first.append(tokens[0])
        if tokens[0] == 1:
            second.append(tokens[1])
    _within_binomial_bound(_counts(first, 5), p0.tolist())
    _within_binomial_bound(_counts(second, 5), p1.tolist())


def test_greedy_keeps_exactly_the_draft_tokens_that_are_the_argmax():
    logits = torch.tensor([[0.0, 5.0, 1.0], [3.0, 0.0, 1.0], [0.0, 0.0, 9.0]])
    rng = torch.Generator().manual_seed(0)
    assert accept_draft(logits, [1, 0], [None] * 3, (), GenerationParams(temperature=0), rng)[0] == [1, 0, 2]
    assert accept_draft(logits, [1, 2], [None] * 3, (), GenerationParams(temperature=0), rng)[0] == [1, 0]
    assert accept_draft(logits, [2], [None] * 2, (), GenerationParams(temperature=0), rng)[0] == [1]


@pytest.mark.parametrize("value_logits", [False, True])
def test_greedy_decoding_with_drafts_writes_what_it_writes_without(tiny_policy, value_logits):
    prompts = tiny_policy.encode_prompts(PROMPTS).token_ids
    plain = HFGenerator(tiny_policy).generate(
        prompts, GenerationParams(max_new_tokens=20, temperature=0, value_logits=value_logits)
    )
    gen = HFGenerator(tiny_policy)
    for out in plain:  # drafts that agree, disagree after a few tokens, and run past the budget
        gen.drafts.remember(out.token_ids[:3] + [out.token_ids[0]] * 30)
        gen.drafts.remember(out.token_ids)
    spec = gen.generate(
        prompts, GenerationParams(max_new_tokens=20, temperature=0, value_logits=value_logits, draft_tokens=8)
    )
    for a, b in zip(plain, spec):
        assert a.token_ids == b.token_ids and a.truncated == b.truncated
        # the same logits from blocks of other shapes: rounding only (RECOMPUTE_ATOL, tests/support/float_bounds.py)
        torch.testing.assert_close(torch.tensor(b.log_probs), torch.tensor(a.log_probs), atol=1e-4, rtol=1e-4)
        if value_logits:
            torch.testing.assert_close(torch.tensor(b.value_logits), torch.tensor(a.value_logits), atol=1e-4, rtol=1e-4)
        else:
            assert b.value_logits is None


def test_drafts_never_leave_the_admissible_actions(tiny_policy):
    builder = ConstraintBuilder(tiny_policy.tokenizer)
    admissible = ["go to fridge 1", "go to drawer 2", "open fridge 1"]
    tok = tiny_policy.tokenizer
    lead = tok("<think>ok</think><action>", add_special_tokens=False)["input_ids"]
    outside = tok("take the moon</action>", add_special_tokens=False)["input_ids"]
    gen = HFGenerator(tiny_policy)
    gen.drafts.remember(lead + outside)  # a draft that leaves the trie right after the tag
    prompts = tiny_policy.encode_prompts(PROMPTS * 4).token_ids
    params = GenerationParams(max_new_tokens=24, temperature=1.0, seed=3, draft_tokens=8)
    outs = gen.generate(prompts, params, [builder.build(admissible) for _ in prompts])
    for out in outs:
        replay = builder.build(admissible)
        for token, allowed in zip(out.token_ids, out.allowed_tokens):
            assert allowed == replay.allowed() and (allowed is None or token in allowed)
            replay.advance(token)


def test_reset_forgets_the_batchs_responses(tiny_policy):
    gen = HFGenerator(tiny_policy)
    gen.generate(tiny_policy.encode_prompts(PROMPTS).token_ids, GenerationParams(max_new_tokens=4, temperature=0))
    assert gen.drafts.propose([], 2)
    gen.reset()
    assert gen.drafts.propose([], 2) == []
