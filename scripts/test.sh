#!/usr/bin/env bash
# Runs the whole test suite from a fresh clone: creates the virtual environment (.venv, or
# $DVTOOL_VENV), installs dvtool with its test extras, then runs ruff, mypy, fetches the
# reference engines' jars (Delta Spark, Iceberg Spark, Paimon) and installs pypaimon's own
# environment beside them (once per machine), and runs pytest.
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
echo "== reference engines (jars and pypaimon installed once into ~/.cache/dvtool-tests/jvm)"
"$venv/bin/python" -m tests.engines.jvm_engines fetch
echo "== pytest"
# --max-worker-restart=0: a crashed worker ends the run with the test it crashed on; replacing
# it can deadlock --dist loadgroup at the end of the run (pytest-xdist#1378), holding CI to its
# time limit with nothing reported.
"$venv/bin/python" -m pytest -q -n 2 --dist loadgroup --max-worker-restart=0 "$@"
