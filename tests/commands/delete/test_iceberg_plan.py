"""Planning and scanning an Iceberg delete (dvtool/commands/delete/iceberg_plan.py), checked
against each data file read independently with pyarrow.

The table is written by pyiceberg (v2, SQL catalog on SQLite): files with disjoint and
overlapping id ranges, so column metrics decide some files and not others. For each
predicate: a file the plan skips has no matching row, a file it removes unread has only
matching rows, and the scan's matches are exactly the positions pyarrow's filter selects
(minus rows deleted before).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyroaring import BitMap64

from dvtool.commands.delete.iceberg_plan import (
    parse_predicate,
    plan_delete,
    scan_files,
    whole_files,
)
from dvtool.engines.arrow import ArrowEngine
from dvtool.errors import PredicateError
from dvtool.iceberg.live_files import DeletedBefore
from dvtool.iceberg.tables import open_at
from dvtool.storage.table_storage import Storage

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("cat", pa.string()),
        pa.field("score", pa.float64()),
        pa.field("when", pa.timestamp("us", "UTC")),
    ]
)
# Each batch becomes one data file: ids 0-99, 100-199, 200-299, and 50-249 (overlapping).
RANGES = ((0, 100), (100, 200), (200, 300), (50, 250))
# predicate -> how pyarrow evaluates it on a file's rows
PREDICATES: dict[str, Any] = {
    "id < 100": lambda t: pc.less(t["id"], 100),
    "id >= 150": lambda t: pc.greater_equal(t["id"], 150),
    "id BETWEEN 120 AND 130 OR cat = 'c'": lambda t: pc.or_kleene(
        pc.and_(pc.greater_equal(t["id"], 120), pc.less_equal(t["id"], 130)),
        pc.equal(t["cat"], "c"),
    ),
    "score IS NULL": lambda t: pc.is_null(t["score"]),
    "`when` >= TIMESTAMP'2024-01-01 00:03:20'": lambda t: pc.greater_equal(
        t["when"], pa.scalar(1704067400 * 10**6, pa.timestamp("us", "UTC"))
    ),
    "id > 1000": lambda t: pc.greater(t["id"], 1000),
}


def _rows(lo: int, hi: int) -> pa.Table:
    ids = list(range(lo, hi))
    return pa.table(
        {
            "id": ids,
            "cat": ["abc"[i % 3] for i in ids],
            "score": [None if i % 7 == 0 else i / 2 for i in ids],
            "when": [(1704067200 + i) * 10**6 for i in ids],
        },
        schema=SCHEMA,
    )


@pytest.fixture(scope="module")
def table_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("iceberg-plan")
    catalog = SqlCatalog(
        "plan", uri=f"sqlite:///{folder}/catalog.db", warehouse=f"file://{folder}/warehouse"
    )
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA, properties={"format-version": "2"})
    for lo, hi in RANGES:
        table.append(_rows(lo, hi))
    return Path(table.location().removeprefix("file://"))


def _file_rows(path: str) -> pa.Table:
    return pq.read_table(path.removeprefix("file://"))


@pytest.mark.parametrize("where", list(PREDICATES))
def test_plan_and_scan_equal_pyarrow_on_each_file(table_folder: Path, where: str) -> None:
    storage = Storage.for_table(str(table_folder))
    table = open_at(storage)
    predicate = parse_predicate(table, where, None)
    plan = plan_delete(table, predicate)
    assert plan.skipped + len(plan.whole) + len(plan.scan) == len(RANGES)
    expected = {}
    for live in plan.live.data:
        rows = _file_rows(live.path)
        mask = PREDICATES[where](rows).fill_null(False)
        expected[live.path] = BitMap64(pc.indices_nonzero(mask).to_pylist())
    decided = {live.path for live in plan.whole + plan.scan}
    for live in plan.live.data:
        if live.path not in decided:
            assert not expected[live.path], f"{live.path} was skipped but has matches"
    deleted = DeletedBefore(table.io, plan.live.index)
    touched = whole_files(plan, deleted) + scan_files(plan, deleted, storage, ArrowEngine(), None)
    for t in touched:
        if not t.read:
            assert len(expected[t.file.path]) == t.file.entry.record_count
    found = {t.file.path: t.new_rows for t in touched if len(t.new_rows)}
    assert found == {path: rows for path, rows in expected.items() if rows}


def test_metrics_decide_files_without_reading_them(table_folder: Path) -> None:
    """`id < 100` covers the first file entirely and excludes the second and third."""
    table = open_at(Storage.for_table(str(table_folder)))
    plan = plan_delete(table, parse_predicate(table, "id < 100", None))
    assert (plan.skipped, len(plan.whole), len(plan.scan)) == (2, 1, 1)


def test_unknown_columns_are_a_predicate_error(table_folder: Path) -> None:
    table = open_at(Storage.for_table(str(table_folder)))
    with pytest.raises(PredicateError, match="nope"):
        parse_predicate(table, "nope = 1", None)
