"""`dvtool optimize` and `delete --where` on a table whose files real Spark wrote with INT96
timestamps from 0001-01-01 to 9999-12-31 (issue 22: compaction rewrote 9999-12-31 as
1816-03-29, INT96 having been read through int64 nanoseconds, which wrap past 2262).

The table is `tests.writers.spark_int96_table`; expected rows are the original files read
with pyarrow as microseconds (`tests.oracles.raw_rows`), and after the rewrites polars and
deltalake, which cannot read the INT96 originals past 2262 themselves, read the new files.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest

from tests.commands.other_writers import committing, deltalake_rows, dvtool, flatten, live_adds
from tests.oracles import canon, raw_rows
from tests.writers import spark_int96_table

UTC = dt.timezone.utc
OPEN_END = dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
FIRST = dt.datetime(1, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def spark_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Spark-written table, built once per module (Spark runs in a child process)."""
    return spark_int96_table(tmp_path_factory.mktemp("int96") / "scd")


def _copy(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / "t"
    shutil.copytree(source, target)
    return target


def _polars_rows(table: Path) -> list[tuple[Any, ...]]:
    """Rows polars reads, maps as (key, value) pairs like pyarrow's (polars gives a dict, or
    a list of key/value structs)."""
    rows = pl.read_delta(str(table)).to_dicts()
    for row in rows:
        named = row["named"]
        if isinstance(named, dict):
            row["named"] = list(named.items())
        elif named is not None:
            row["named"] = [(e["key"], e["value"]) for e in named]
    return canon(rows)


def _stat_text(value: Any) -> Any:
    """A value as Delta's JSON stats hold it: timestamps in UTC milliseconds, floored."""
    if isinstance(value, dt.datetime):
        value = value.astimezone(UTC)
        return f"{value.year:04d}-{value:%m-%dT%H:%M:%S}.{value.microsecond // 1000:03d}Z"
    if isinstance(value, dt.date):
        return f"{value.year:04d}-{value:%m-%d}"
    return value


def _check_stats(table: Path, add: dict[str, Any]) -> None:
    """The add's min/max are those of the values its file holds (read with pyarrow)."""
    stats = json.loads(add["stats"], parse_float=Decimal)
    rows = [flatten(r) for r in pq.read_table(table / add["path"]).to_pylist()]
    assert stats["numRecords"] == len(rows)
    mins, maxs = flatten(stats["minValues"]), flatten(stats["maxValues"])
    assert {"valid_to", "valid_from", "day", "span.start", "span.end", "wide"} <= set(mins)
    for leaf in mins:
        values = [r[leaf] for r in rows if r.get(leaf) is not None]
        assert mins[leaf] == _stat_text(min(values)), leaf
        assert maxs[leaf] == _stat_text(max(values)), leaf


def _check_readers(table: Path, expected: list[tuple[Any, ...]]) -> None:
    """Every live file is dvtool's (INT64 microseconds): polars, deltalake and pyarrow read
    exactly the expected rows, and `inspect --verify` finds nothing."""
    assert canon(raw_rows(table)) == expected
    assert _polars_rows(table) == expected
    assert deltalake_rows(table) == expected
    for add in live_adds(table):
        _check_stats(table, add)
    dvtool(table, "inspect", "--verify")


def test_fixture_holds_the_open_ends(spark_table: Path) -> None:
    """The files are INT96, and the oracle reads 9999-12-31 and 0001-01-01 from them."""
    rows = raw_rows(spark_table)
    assert {r["valid_to"] for r in rows} >= {OPEN_END, FIRST}
    for add in live_adds(spark_table):
        schema = pq.ParquetFile(spark_table / add["path"]).metadata.schema
        assert schema.column(1).physical_type == "INT96"


def test_compaction_keeps_every_value(spark_table: Path, tmp_path: Path) -> None:
    table = _copy(spark_table, tmp_path)
    expected = canon(raw_rows(table))
    committing(table, "optimize")
    (add,) = live_adds(table)
    _check_readers(table, expected)
    maxs = json.loads(add["stats"])["maxValues"]
    assert maxs["valid_to"] == "9999-12-31T23:59:59.999Z"


def test_delete_where_on_int96_then_purge(spark_table: Path, tmp_path: Path) -> None:
    """`--where` compares the INT96 values as they are (ids 2 and 7 only), then the purge
    rewrites both files with every other value unchanged."""
    table = _copy(spark_table, tmp_path)
    where = (
        "valid_to = TIMESTAMP '0001-01-01 00:00:00' "
        "OR valid_from > TIMESTAMP '9999-12-31 23:59:59.999998'"
    )
    rows = raw_rows(table)
    committing(table, "delete", "--where", where)
    kept = [r for r in rows if r["id"] not in (2, 7)]
    assert canon(raw_rows(table)) == canon(kept)
    committing(table, "optimize", "--purge")
    assert len(live_adds(table)) == 2
    _check_readers(table, canon(kept))


def test_where_selects_the_open_end(spark_table: Path, tmp_path: Path) -> None:
    """The rows whose valid_to is the open end, and no other (a wrapped read would see 1816)."""
    table = _copy(spark_table, tmp_path)
    rows = raw_rows(table)
    committing(table, "delete", "--where", "valid_to >= TIMESTAMP '9999-12-31 00:00:00'")
    kept = [r for r in rows if r["valid_to"] is None or r["valid_to"] < OPEN_END]
    assert len(kept) == len(rows) - 2
    assert canon(raw_rows(table)) == canon(kept)
