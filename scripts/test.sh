#!/usr/bin/env bash
# Runs the whole test suite from a fresh clone: creates the virtual environment (.venv, or
# $DVTOOL_VENV), installs dvtool with its test extras, then runs ruff, mypy and pytest.
# Extra arguments go to pytest (e.g. `scripts/test.sh -k inspect`).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${DVTOOL_VENV:-.venv}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -e ".[test]"
echo "== ruff"
"$venv/bin/ruff" check dvtool tests scripts
"$venv/bin/ruff" format --check dvtool tests scripts
echo "== mypy"
"$venv/bin/mypy"
echo "== pytest"
"$venv/bin/python" -m pytest -q -n 2 --dist loadgroup "$@"
