#!/usr/bin/env bash
# A separate virtualenv with PrimeIntellect's verifiers (PyPI `verifiers==0.4.0`, the `verifiers` extra), for the
# verifiers adapter's test (tests/sapo_gym/integrations/test_verifiers.py) and for `vf-eval` runs on this checkout.
# It cannot share the project's .venv: verifiers 0.4.0 requires mcp==2.0.0 and the serve extra's fastmcp mcp<2.
# Idempotent; prints the venv's python on success (about a minute and 600 MB the first time, a second after):
#   PYTHONPATH=. "$(dirname "$(bash scripts/setup_verifiers.sh)")/vf-eval" sapo-gym-verifiers ...
#
#   VERIFIERS_VENV  where to build it (default ~/.cache/sapo_gym/verifiers-venv)
#   PYTHON          the interpreter to base it on (default python3; verifiers needs >= 3.11)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VERIFIERS_VENV:-$HOME/.cache/sapo_gym/verifiers-venv}"
PY="${PYTHON:-python3}"
STAMP="$VENV/.sapo_gym_verifiers_ok"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(sha256sum scripts/constraints-verifiers.txt | cut -d' ' -f1)" ] \
    && "$VENV/bin/python" -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ('verifiers', 'gymnasium', 'Stemmer')))"; then
  echo "$VENV/bin/python"; exit 0
fi
mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" >&2
# The project is NOT installed here (an editable install would pin this checkout's path): run with
# PYTHONPATH=<checkout>. Its own requirements (pyproject's dependencies) go in beside verifiers.
"$VENV/bin/pip" install -q --disable-pip-version-check -c scripts/constraints-verifiers.txt \
  "verifiers==0.4.0" "gymnasium>=1.0,<2" "numpy>=1.24" "PyStemmer==3.1.0" >&2
PYTHONPATH=. "$VENV/bin/python" -c "import sapo_gym_verifiers" >&2
sha256sum scripts/constraints-verifiers.txt | cut -d' ' -f1 > "$STAMP"
echo "$VENV/bin/python"
