"""LoRA through peft: the policy's adapters, SAPO's trainable w⁺/w⁻ rows, the adapter-free reference, merged weights.

:func:`apply_lora` wraps ``policy.model`` in a ``peft.PeftModel`` (``cfg.lora_rank`` > 0): LoRA adapters
on ``cfg.lora_targets`` (B = 0 at init, so the wrapped model computes exactly what the base did) and
every base weight frozen. The trainer, not the model, does this: the policy stays an HF causal LM
that knows nothing of training, and LoRA is one more way of choosing which of its weights train.

**The w⁺/w⁻ rows.** SAPO reads V and Q from the LM-head logits of its two reserved tokens; with the
head frozen those rows could never move, and the readout would be fixed by whatever the base had
there: a value that cannot learn, silently. peft's ``trainable_token_indices`` makes exactly those two
rows trainable (a ``(2, hidden)`` delta, ``TrainableTokensWrapper``); on a model with tied embeddings
(the tiny Qwen2, Qwen2.5 ≤ 3B) it targets the input embedding and peft ties the LM head to the same
delta, so a merged export keeps the tie (the two tokens are never inputs: their input rows are
unused); on an untied model (Qwen2.5-7B) it targets the LM head itself. Its forward builds the head
matrix with the two rows replaced (``index_copy``), one V×hidden temporary per head call: the
price of using peft's own, saved-and-merged mechanism instead of a hand-written logit offset.

**The reference** is the same module under ``disable_adapter()`` (:func:`adapters_disabled`): the base
weights and the base rows, no second copy. Its log-probs mask w⁺/w⁻, so the rows do not matter there.

**Checkpoints** hold :func:`trainable_state` (adapters + rows; for PPO's critic also its head), and
:func:`load_trainable_state` restores them over a base rebuilt from the config. :func:`merged_state_dict`
gives the weights as one plain HF model (base + scale·B·A, the two rows replaced), computed out of
place, for the vLLM weight push and the HF export.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor, nn

__all__ = [
    "apply_lora",
    "is_lora",
    "adapters_disabled",
    "trainable_state",
    "load_trainable_state",
    "merged_state_dict",
    "base_model",
]

_ADAPTER = "default"


def is_lora(module: Any) -> bool:
    """Whether ``module`` is a peft model (peft is imported only by :func:`apply_lora`)."""
    if "peft" not in sys.modules:
        return False
    from peft import PeftModel

    return isinstance(module, PeftModel)


def _targets(spec: str) -> str | list[str]:
    if spec.strip() == "all-linear":
        return "all-linear"
    names = [t.strip() for t in spec.split(",") if t.strip()]
    if not names:
        raise ValueError("lora_targets names no module")
    return names


def _value_rows(model: nn.Module, value_token_ids: tuple[int, int]) -> list[int] | dict[str, list[int]]:
    """peft's ``trainable_token_indices`` for the two rows: the input embedding when tied (peft ties the
    head to it), else the LM head's own module name."""
    ids = [int(i) for i in value_token_ids]
    if getattr(model.config, "tie_word_embeddings", False):
        return ids
    head = model.get_output_embeddings()
    return {next(n for n, m in model.named_modules() if m is head): ids}


def apply_lora(policy: Any, cfg: Any, critic: nn.Module | None = None) -> bool:
    """When ``cfg.lora_rank`` > 0, wrap ``policy.model`` in LoRA adapters (plus the w⁺/w⁻ rows) and give a
    critic's ``backbone`` its own adapters (its head stays fully trainable); in place. Whether it did."""
    if cfg.lora_rank <= 0:
        return False
    from peft import LoraConfig, get_peft_model, inject_adapter_in_model

    model = policy.model
    common = dict(
        r=cfg.lora_rank,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=0.0,
        bias="none",
        target_modules=_targets(cfg.lora_targets),
    )
    was_training = model.training
    policy.model = get_peft_model(
        model, LoraConfig(**common, trainable_token_indices=_value_rows(model, policy.value_token_ids))
    ).train(was_training)
    if critic is not None:
        inject_adapter_in_model(LoraConfig(**common), critic.backbone)  # freezes the backbone's base weights
    return True


@contextlib.contextmanager
def adapters_disabled(model: Any) -> Iterator[nn.Module]:
    """``model`` computing as its frozen base (adapters and the row deltas off) inside the block."""
    with model.disable_adapter():
        yield model


def base_model(model: Any) -> nn.Module:
    """The HF model under the peft wrapper (its modules hold the adapter layers)."""
    return model.get_base_model() if is_lora(model) else model


def trainable_state(module: nn.Module) -> dict[str, Tensor]:
    """The parameters that train (LoRA: adapters, rows, a critic's head), detached, by state-dict name."""
    return {name: p.detach() for name, p in module.named_parameters() if p.requires_grad}


def load_trainable_state(module: nn.Module, state: dict[str, Tensor]) -> None:
    """Restore :func:`trainable_state` over ``module``; the names must be exactly its trainable ones."""
    expected = set(trainable_state(module))
    if set(state) != expected:
        raise ValueError(
            f"checkpoint's trainable tensors differ: missing {sorted(expected - set(state))[:4]}, "
            f"unexpected {sorted(set(state) - expected)[:4]}"
        )
    params = dict(module.named_parameters())
    with torch.no_grad():
        for name, value in state.items():
            params[name].copy_(value)


@torch.no_grad()
def merged_state_dict(model: Any) -> dict[str, Tensor]:
    """The weights as one plain HF model, on CPU: base + delta for each adapted layer, the rows replaced.

    Out of place (``merge_adapter`` + ``unmerge_adapter`` would round the trained weights); keys are
    the base model's own, so ``save_pretrained(state_dict=...)`` and vLLM's loader take them as is."""
    from peft.tuners.lora import LoraLayer
    from peft.utils.other import TrainableTokensWrapper

    base = base_model(model)
    merged: dict[str, Tensor] = {}
    for name, module in base.named_modules():
        prefix = f"{name}." if name else ""
        if isinstance(module, LoraLayer):
            layer = module.get_base_layer()
            merged[prefix + "weight"] = layer.weight + module.get_delta_weight(_ADAPTER).to(layer.weight.dtype)
            if getattr(layer, "bias", None) is not None:
                merged[prefix + "bias"] = layer.bias
        elif isinstance(module, TrainableTokensWrapper):
            merged[prefix + "weight"] = module.token_adapter.get_merged_weights([_ADAPTER])
    out = {}
    for key, value in base.state_dict().items():
        plain = key.replace(".base_layer.", ".").replace(".token_adapter.", ".").replace(".original_module.", ".")
        if "lora_" in key or "trainable_tokens_" in key or plain in out:
            continue
        out[plain] = merged.get(plain, value).detach().cpu().clone()
    return out
