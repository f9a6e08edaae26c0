"""The project tokenizer and the tiny Qwen2: shipped, deterministic, covering the envs' language."""

from __future__ import annotations

import gymnasium as gym
import pytest

torch = pytest.importorskip("torch")

from agents.offline_models import TOKENIZER_FILE, project_tokenizer, tiny_qwen2, tiny_qwen2_config, train_tokenizer  # noqa: E402


def test_shipped_tokenizer_is_small_and_rebuilds_bit_for_bit():
    assert TOKENIZER_FILE.stat().st_size < 300 * 1024
    assert train_tokenizer().to_str() == TOKENIZER_FILE.read_text()


def test_chat_template_is_chatml_and_tags_are_single_tokens():
    tok = project_tokenizer()
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    answer = "<think>the panel glows red</think><action>press red</action>"
    ids = tok(answer, add_special_tokens=False)["input_ids"]
    pieces = tok.convert_ids_to_tokens(ids)
    assert pieces[0] == "<think>" and pieces[-1] == "</action>" and "<action>" in pieces
    assert tok.decode(ids + [tok.eos_token_id], skip_special_tokens=True) == answer


def test_tokenizer_round_trips_env_prompts_compactly():
    tok = project_tokenizer()
    env = gym.make("sapo/Vault-v0", num_buttons=5)
    prompt, _ = env.reset(seed=0)
    env.close()
    alfworld = (
        "You arrive at countertop 1. On the countertop 1, you see a butterknife 2, a mug 1, and a "
        "peppershaker 3.\n Your admissible actions are: ['take mug 1 from countertop 1', 'go to fridge 1']"
    )
    for text in (prompt, alfworld, "click[buy now] search[red hoodie] ünïcode ✓"):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
    # Env words are whole tokens: far fewer tokens than characters.
    assert len(tok(alfworld)["input_ids"]) < len(alfworld) / 3.5


def test_tiny_qwen2_has_spare_rows_and_is_seeded():
    model, tok = tiny_qwen2(seed=3)
    assert model.config.vocab_size == len(tok) + 2
    assert model.config.hidden_size // model.config.num_attention_heads in (32, 64)
    same, _ = tiny_qwen2(seed=3)
    other, _ = tiny_qwen2(seed=4)
    w = model.get_input_embeddings().weight
    assert torch.equal(w, same.get_input_embeddings().weight)
    assert not torch.equal(w, other.get_input_embeddings().weight)


def test_tiny_config_rejects_head_dims_vllm_cannot_serve():
    with pytest.raises(ValueError, match="head_dim"):
        tiny_qwen2_config(100, hidden_size=48, num_attention_heads=3)


def test_the_tiny_models_value_rows_start_equal_so_v_and_q_read_zero():
    """SAPO's w⁺/w⁻ (the two spare rows) start as the mean output row: V = Q = 0 exactly at init."""
    import torch

    from agents.logits import value_readout
    from agents.policy import PolicyModel

    policy = PolicyModel.tiny(seed=3)
    w_plus, w_minus = policy.value_token_ids
    head = policy.model.get_output_embeddings().weight
    assert torch.equal(head[w_plus], head[w_minus])
    ids = torch.tensor(policy.encode_prompts(["Task: open the vault.\nActions: [press red]"]).token_ids)
    logits = policy.logits(ids, torch.ones_like(ids))
    assert torch.all(value_readout(logits[0], w_plus, w_minus, tau_v=1.0, r_max=10.0) == 0)
