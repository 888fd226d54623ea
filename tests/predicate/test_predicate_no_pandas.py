"""Evaluating `--where` predicates never imports pandas (issue 12).

pyarrow imports pandas, when installed, the first time it converts a Python object (a Python
value given to `pa.scalar`, `pa.array` or a compute function, the as_py of a timestamp with a
time zone) and when `pyarrow.acero` or `pyarrow.dataset` is imported. This test process has
imported pandas long ago, so the check runs in a fresh interpreter: it evaluates every case of
tests/predicate/test_predicate.py there (rows selected, file skipping on partition values and
on Delta and parquet statistics), compares the results with the expected ones, and reports whether
pandas was imported. The data goes over as an Arrow IPC file and a parquet file, the cases as
a pickle, so the child converts nothing itself.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dvtool.delta.protocol.schema import StructField, StructType
from dvtool.predicate import Predicate
from tests.predicate import test_predicate as cases

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import json, pickle, sys
import pyarrow as pa
import pyarrow.parquet as pq
from dvtool.data_files import row_group_stats
from dvtool.predicate import Match, Predicate

with open(sys.argv[1], "rb") as f:
    spec = pickle.load(f)
with pa.memory_map(spec["ipc"]) as source:
    table = pa.ipc.open_file(source).read_all()
groups = row_group_stats(None, spec["parquet"], pq.ParquetFile(spec["parquet"]))

def parse(sql):
    return Predicate.parse(sql, spec["schema"], spec["partitions"], "none")

wrong = []
for sql, expected in spec["rows"]:
    predicate = parse(sql)
    got = predicate.filter(table)["id"].to_pylist()
    if got != expected:
        wrong.append(["rows", sql, got, expected])
    for g in groups:  # row group statistics: ALL and NONE must hold for the group's rows
        verdict = predicate.stats_match(g.num_rows, g.min, g.max, g.null_count)
        ids = spec["ids"][g.first_row : g.first_row + g.num_rows]
        hits = [i for i in ids if i in expected]
        if (verdict is Match.ALL and hits != ids) or (verdict is Match.NONE and hits):
            wrong.append(["row group", sql, g.index, verdict.name, expected])
for sql, values, file_stats, expected in spec["files"]:
    got = parse(sql).file_match(values, file_stats)
    if got is not expected:
        wrong.append(["file", sql, got.name, expected.name])
print(json.dumps({"wrong": wrong, "pandas": "pandas" in sys.modules, "cases": len(spec["rows"])}))
"""


def _params(test: Any) -> list[tuple[Any, ...]]:
    """The argument tuples of a test's `pytest.mark.parametrize`."""
    (mark,) = [m for m in test.pytestmark if m.name == "parametrize"]
    return [tuple(p) for p in mark.args[1]]


def test_every_predicate_case_is_evaluated_without_pandas(tmp_path: Path) -> None:
    ipc, parquet = tmp_path / "rows.arrow", tmp_path / "rows.parquet"
    with pa.OSFile(str(ipc), "wb") as sink, pa.ipc.new_file(sink, cases.TABLE.schema) as writer:
        writer.write_table(cases.TABLE)
    pq.write_table(cases.TABLE, parquet, row_group_size=2)  # three row groups of two rows
    partition_cases = [
        (sql, values, cases.STATS_1_TO_10, expected)
        for sql, values, expected in _params(cases.test_partition_values)
    ]
    statistics_cases = [
        (sql, {}, file_stats, expected)
        for sql, file_stats, expected in _params(cases.test_statistics)
    ]
    spec = {
        "ipc": str(ipc),
        "parquet": str(parquet),
        "schema": cases.SCHEMA,
        "partitions": cases.PARTITIONS,
        "ids": cases.EVERYONE,
        "rows": cases.CASES,
        "files": partition_cases + statistics_cases,
    }
    spec_file = tmp_path / "spec.pickle"
    spec_file.write_bytes(pickle.dumps(spec))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(spec_file)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["cases"] == len(cases.CASES) > 100
    assert report["wrong"] == []
    assert report["pandas"] is False


def test_wide_decimal_literals_keep_every_digit() -> None:
    """Literals are built by dvtool.arrays.arrow_values now: a 38-digit one keeps its digits
    (the decimal module's default context holds 28)."""
    schema = StructType((StructField("d", "decimal(38,0)"),))
    wide = 12345678901234567890123456789012345678
    values = [Decimal(wide), Decimal(wide + 1), Decimal(wide - 10**10), None]
    table = pa.table({"d": pa.array(values, pa.decimal128(38, 0))})
    for sql, expected in [(f"d = {wide}", [wide]), (f"d IN ({wide}, 1)", [wide])]:
        predicate = Predicate.parse(sql, schema, (), "none")
        assert predicate.filter(table)["d"].to_pylist() == [Decimal(v) for v in expected]
