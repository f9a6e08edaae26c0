#!/usr/bin/env bash
# A separate Python 3.12 virtualenv with NeMo-Gym (PyPI `nemo-gym`, pinned), for the NeMo-Gym integration
# (sapo_gym/integrations/nemo_gym.py, docs/integrations.md#nemo-gym) and its test. nemo-gym needs Python >= 3.12,
# the project's .venv is 3.11. Idempotent; prints the venv's python on success:
#   "$(bash scripts/setup_nemo_gym.sh)" -c "import nemo_gym"
# sapo-gym goes in editable from this checkout (its light install: no torch); the test also puts the checkout
# first on PYTHONPATH, so a venv built from another clone still runs this one's code.
#
#   NEMO_GYM_VENV  where to build it (default ~/.cache/sapo_gym/nemo-gym-venv)
#   PYTHON312      the interpreter to base it on (default: the first Python 3.12 found, see below)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${NEMO_GYM_VENV:-$HOME/.cache/sapo_gym/nemo-gym-venv}"
VERSION=0.4.0
STAMP="$VENV/.sapo_gym_nemo_gym_$VERSION"
if [ -f "$STAMP" ] && "$VENV/bin/python" -c "import nemo_gym, resources_servers.gymnasium, sapo_gym" >/dev/null 2>&1; then
  echo "$VENV/bin/python"; exit 0
fi

is_312() { [ -x "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1; }
find_312() {
  local root candidate
  [ -n "${PYTHON312:-}" ] && { is_312 "$PYTHON312" && echo "$PYTHON312"; return; }
  root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
  for candidate in "$root"/versions/3.12*/bin/python "$HOME"/.pyenv/versions/3.12*/bin/python \
                   "$(command -v python3.12 2>/dev/null || true)"; do
    is_312 "$candidate" && { echo "$candidate"; return; }
  done
  return 1
}
PY="$(find_312)" || { echo "[setup_nemo_gym] no Python 3.12 found (pyenv install 3.12, or PYTHON312=...)" >&2; exit 1; }

mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" >&2
"$VENV/bin/pip" install -q --disable-pip-version-check "nemo-gym==$VERSION" -e ".[nemo-gym]" >&2
"$VENV/bin/python" -c "import nemo_gym, resources_servers.gymnasium, responses_api_agents.gymnasium_agent.app, sapo_gym" >&2
touch "$STAMP"
echo "$VENV/bin/python"
