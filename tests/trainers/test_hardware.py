"""trainers/hardware.py: CPU features, native bfloat16 and the 'auto' reference dtype."""

from __future__ import annotations

import pytest

from trainers import hardware


@pytest.mark.parametrize(
    "flags, native",
    [
        ({"avx2", "fma"}, False),
        ({"avx2", "avx512f", "avx512_bf16"}, True),
        ({"avx2", "amx_bf16", "amx_tile"}, True),
        ({"asimd", "bf16"}, True),
        (set(), False),
    ],
)
def test_native_bf16_and_auto_follow_the_cpu_flags(monkeypatch, flags, native):
    monkeypatch.setattr(hardware, "cpu_features", lambda: frozenset(flags))
    assert hardware.native_bf16("cpu") is native
    assert hardware.resolve_dtype("auto", "cpu") == ("bfloat16" if native else "float32")
    assert hardware.resolve_dtype("float32", "cpu") == "float32"  # explicit choices are kept
    line = hardware.describe()
    assert line.startswith("CPU: ") and f"native bf16: {'yes' if native else 'no'}" in line


def test_the_trainer_builds_an_auto_reference_in_the_resolved_dtype(monkeypatch, tmp_path):
    import torch

    from trainers.config import TrainConfig
    from trainers.loop import Trainer

    monkeypatch.setattr(hardware, "cpu_features", lambda: frozenset({"avx2"}))  # an AVX2-only CPU
    cfg = TrainConfig(
        env="sapo/Vault-v0",
        iterations=1,
        episodes_per_iteration=2,
        max_response_tokens=4,
        prompt="plain",
        history_length=0,
        kl_coef=0.01,
        reference_dtype="auto",
        out_dir=str(tmp_path),
        progress=False,
    )
    trainer = Trainer(cfg)
    trainer.start_reinforcement()
    assert next(trainer.reference.parameters()).dtype == torch.float32
