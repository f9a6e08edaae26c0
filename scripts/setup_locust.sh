#!/usr/bin/env bash
# A separate virtualenv with the load generator locust (pinned), for benchmarks/leaderboard_load.py. It stays out of
# the project's .venv: locust pins and pulls flask, gevent, werkzeug and requests of its own, which could move the
# versions scripts/constraints.txt holds. Idempotent; prints the venv's locust on success:
#   "$(bash scripts/setup_locust.sh)" --version
# Measured on the 2-core dev machine: ~12 s, 85 MB.
#
#   LOCUST_VENV  where to build it (default ~/.cache/sapo_gym/locust-venv)
#   PYTHON       the interpreter to base it on (default python3)
set -euo pipefail
VENV="${LOCUST_VENV:-$HOME/.cache/sapo_gym/locust-venv}"
PY="${PYTHON:-python3}"
VERSION=2.47.0
STAMP="$VENV/.sapo_gym_locust_$VERSION"
if [ -f "$STAMP" ] && "$VENV/bin/locust" --version >/dev/null 2>&1; then
  echo "$VENV/bin/locust"; exit 0
fi
mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" >&2
"$VENV/bin/pip" install -q --disable-pip-version-check "locust==$VERSION" >&2
"$VENV/bin/locust" --version >&2
touch "$STAMP"
echo "$VENV/bin/locust"
