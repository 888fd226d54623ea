#!/usr/bin/env bash
# The main job on an embedded default: installs dvtool into a virtual environment, writes a
# small sample Delta table to ./sample-table on local disk, and inspects it with dvtool.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${DVTOOL_VENV:-.venv}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -e ".[test]"
table="${1:-sample-table}"
"$venv/bin/python" scripts/make_sample_table.py "$table"
echo "== dvtool inspect $table"
"$venv/bin/dvtool" inspect "$table"
echo "== dvtool inspect $table --files --verify"
"$venv/bin/dvtool" inspect "$table" --files --verify
echo "== dvtool inspect $table --history --json | head"
"$venv/bin/dvtool" inspect "$table" --history --json | head -n 20
