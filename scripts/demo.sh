#!/usr/bin/env bash
# The main job on an embedded default: installs dvtool (runtime dependencies and deltalake
# for the sample, nothing else) into a virtual environment, writes a
# small sample Delta table to ./sample-table on local disk, enables deletion vectors on it,
# deletes rows by writing DVs, inspects and verifies the result, purges the DVs by rewriting
# the files, and vacuums the files no longer needed.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${DVTOOL_VENV:-.venv}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
# Only the runtime and deltalake (which writes the sample table): no test tools, no Spark.
started=$SECONDS
echo "== installing dvtool and deltalake into $venv (18 packages; about 10-20 s on a fresh machine)"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -e ".[demo]"
echo "   installed in $((SECONDS - started)) s"
table="${1:-sample-table}"
"$venv/bin/python" scripts/make_sample_table.py "$table"
dvtool="$venv/bin/dvtool"
echo "== dvtool inspect $table"
"$dvtool" inspect "$table"
echo "== dvtool enable $table"
"$dvtool" enable "$table"
echo "== dvtool delete $table --where \"id % 10 = 3\" --dry-run"
"$dvtool" delete "$table" --where "id % 10 = 3" --dry-run
echo "== dvtool delete $table --where \"id % 10 = 3\""
"$dvtool" delete "$table" --where "id % 10 = 3"
echo "== dvtool delete $table --where \"region = 'apac' AND amount > 1000\""
"$dvtool" delete "$table" --where "region = 'apac' AND amount > 1000"
echo "== dvtool inspect $table --files --verify   (before the purge)"
"$dvtool" inspect "$table" --files --verify
echo "== dvtool optimize $table --purge"
"$dvtool" optimize "$table" --purge
echo "== dvtool inspect $table --verify   (after the purge: no DVs left)"
"$dvtool" inspect "$table" --verify
echo "== dvtool vacuum $table --retain 0h --force --dry-run   (a demo table: no readers to protect)"
"$dvtool" vacuum "$table" --retain 0h --force --dry-run
echo "== dvtool vacuum $table --retain 0h --force"
"$dvtool" vacuum "$table" --retain 0h --force
echo "== dvtool inspect $table --history"
"$dvtool" inspect "$table" --history
