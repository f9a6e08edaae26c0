"""What the machine computes fast: CPU features and native bfloat16, for dtype choices and benchmark tables.

bfloat16 only saves time where the hardware has it: CUDA GPUs from compute capability 8.0, and CPUs
with AVX-512 BF16 or AMX-BF16 (oneDNN's bf16 kernels). On an AVX2-only CPU torch emulates bf16 by
converting to float32 and back, so a bf16 KL reference there is slower than a float32 one (measured:
37.3 s per iteration against 25.3 s for the fp32 actor update). ``reference_dtype='auto'`` picks
bfloat16 exactly where :func:`native_bf16` says so.
"""

from __future__ import annotations

import os
import platform
import sys
from functools import lru_cache
from pathlib import Path

__all__ = ["cpu_features", "native_bf16", "describe", "resolve_dtype", "run_environment"]

_PACKAGES = ("torch", "transformers", "tokenizers", "numpy", "gymnasium", "textworld", "alfworld", "sapo-gym")

_SHOWN = (
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx512_bf16",
    "amx_bf16",
    "amx_tile",
    "asimd",
    "bf16",
    "sve",
)


@lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, str]:
    """The first processor's ``/proc/cpuinfo`` fields (empty where unreadable)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_features() -> frozenset[str]:
    """The CPU's feature flags (``/proc/cpuinfo`` flags on x86, Features on ARM); empty where unreadable."""
    info = _cpuinfo()
    return frozenset((info.get("flags") or info.get("Features") or "").split())


def native_bf16(device: str = "cpu") -> bool:
    """Whether ``device`` computes bfloat16 natively (CUDA ≥ 8.0; CPU with AVX-512 BF16, AMX-BF16 or ARM BF16)."""
    if str(device).startswith("cuda"):
        import torch

        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return bool(cpu_features() & {"avx512_bf16", "amx_bf16", "bf16"})


def resolve_dtype(name: str, device: str = "cpu") -> str:
    """``'auto'`` → ``'bfloat16'`` where :func:`native_bf16`, else ``'float32'``; other names unchanged."""
    if name != "auto":
        return name
    return "bfloat16" if native_bf16(device) else "float32"


def describe() -> str:
    """One line for benchmark tables: CPU model, cores, the features that change kernels, native bf16."""
    model = _cpuinfo().get("model name") or platform.processor() or platform.machine()
    shown = [f for f in _SHOWN if f in cpu_features()]
    return (
        f"CPU: {model}; {os.cpu_count()} cores; features: {' '.join(shown) or 'none of ' + '/'.join(_SHOWN[:4])}; "
        f"native bf16: {'yes' if native_bf16('cpu') else 'no'}"
    )


def run_environment() -> dict[str, object]:
    """What a measured run depends on beyond its config: package versions, thread settings, the CPU.

    CPU runs are bit-reproducible on one machine; across machines the kernels torch picks (AVX2 vs
    AVX-512, oneDNN's choices) round differently, sampled tokens can then differ, and a different token
    changes the episode. Results record all of this so two runs can be compared knowingly.
    """
    from importlib import metadata

    import torch

    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    threads = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "ATEN_CPU_CAPABILITY")}
    return {
        "python": sys.version.split()[0],
        "packages": versions,
        "torch_threads": torch.get_num_threads(),
        "env": threads,
        "cpu": describe(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }
