"""PolicyModel: the value tokens and the prompt truncation rule."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agents.policy import VALUE_TOKENS, PolicyModel  # noqa: E402


def test_value_tokens_use_spare_embedding_rows(tiny_policy):
    n = len(tiny_policy.tokenizer)
    assert tiny_policy.value_token_ids == (n, n + 1)
    assert tiny_policy.model.get_input_embeddings().weight.shape[0] == n + 2


def test_value_tokens_are_added_when_no_row_is_spare(tmp_path):
    policy = PolicyModel.tiny(spare_rows=0)
    plus, minus = policy.value_token_ids
    assert policy.tokenizer.convert_ids_to_tokens([plus, minus]) == list(VALUE_TOKENS)
    assert policy.model.get_output_embeddings().weight.shape[0] == len(policy.tokenizer)
    ids = torch.tensor([[5, 6, 7]])
    z = policy.logits(ids, torch.ones_like(ids))
    # readout starts at 0: identical rows, the same 64-term dot product (GEMM tiles may order it apart: within
    # 2·γ_64·Σ|h·w|, inside allclose's float32 default for these O(1) logits)
    assert torch.allclose(z[..., plus], z[..., minus])
    with torch.no_grad():  # a trained value row must survive save → load (never re-initialized)
        policy.model.get_output_embeddings().weight[plus] += 1.0
    policy.save_pretrained(tmp_path)
    again = PolicyModel.from_pretrained(tmp_path)
    assert again.value_token_ids == (plus, minus)
    assert torch.equal(again.model.get_output_embeddings().weight, policy.model.get_output_embeddings().weight)


def test_short_prompts_match_the_chat_template(tiny_policy):
    tok = tiny_policy.tokenizer
    text = "You stand before a vault with 3 buttons."
    enc = tiny_policy.encode_prompts([text, ""])
    expected = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)
    assert enc.token_ids[0] == tok(expected, add_special_tokens=False)["input_ids"]
    assert enc.truncated == [False, False]


def test_long_prompts_are_cut_in_the_middle_of_the_content(tiny_policy):
    tok = tiny_policy.tokenizer
    head, tail = tiny_policy._framing
    text = "Your task is to: find the key. " + "history " * 300 + "Now choose an admissible action."
    budget = 64
    enc = tiny_policy.encode_prompts([text], max_tokens=budget)
    ids = enc.token_ids[0]
    assert enc.truncated == [True] and len(ids) == budget
    assert ids[: len(head)] == head and ids[-len(tail) :] == tail
    content = tok(text, add_special_tokens=False)["input_ids"]
    room = budget - len(head) - len(tail)
    kept = ids[len(head) : len(ids) - len(tail)]
    assert kept == content[: room // 3] + content[-(room - room // 3) :]
    assert tok.decode(kept).startswith("Your task is to: find the key.")
    assert tok.decode(kept).endswith("Now choose an admissible action.")


def test_prompt_budget_smaller_than_the_template_is_an_error(tiny_policy):
    with pytest.raises(ValueError, match="cannot hold the chat template"):
        tiny_policy.encode_prompts(["x"], max_tokens=5)


def test_a_saved_policy_reloads_with_the_same_tokenization(tmp_path):
    """Regression: AutoTokenizer reloaded the tiny Qwen2's tokenizer as Qwen2Tokenizer, whose pre-tokenizer
    splits digits ("cabinet 12" → "1", "2"): every compare run and resume acted on other token ids than
    the warm start was trained on."""
    import torch

    from agents.policy import PolicyModel

    policy = PolicyModel.tiny(seed=0)
    policy.save_pretrained(tmp_path / "p")
    again = PolicyModel.from_pretrained(tmp_path / "p")
    texts = [
        "You arrive at cabinet 12. On the cabinet 12, you see a mug 3, and a plate 10.\nActions: [go to shelf 1, take mug 3]"
    ]
    assert again.encode_prompts(texts).token_ids == policy.encode_prompts(texts).token_ids
    out = "<think>x</think><action>take mug 3 from cabinet 12</action>"
    assert (
        again.tokenizer(out, add_special_tokens=False)["input_ids"]
        == policy.tokenizer(out, add_special_tokens=False)["input_ids"]
    )
    ids = torch.tensor(policy.encode_prompts(texts).token_ids)
    torch.testing.assert_close(
        again.logits(ids, torch.ones_like(ids)), policy.logits(ids, torch.ones_like(ids)), rtol=0, atol=0
    )
    assert again.value_token_ids == policy.value_token_ids and again.eos_token_ids == policy.eos_token_ids
