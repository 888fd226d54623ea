"""Data files: writing (streamed, with stats), reading with row indexes, footer statistics.

Checked on local disk and memory:// storage, against pyarrow reading the written files
directly and against pyarrow's own footer metadata.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import time
import uuid
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dvtool.data_files import (
    footer_row_count,
    iter_file_batches,
    publish,
    row_group_stats,
    write_data_file,
)
from dvtool.delta.protocol.arrow_types import FIELD_ID_METADATA_KEY
from dvtool.delta.protocol.partitions import partition_directory
from dvtool.delta.protocol.stats_collect import StatsCollector
from dvtool.errors import DataFileError, FileMissingError, StorageError
from dvtool.storage.table_storage import Storage
from tests.oracles import GOLDEN

FILE_NAME = re.compile(
    r"^part-00000-[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}-c000\.snappy\.parquet$"
)

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False, metadata={FIELD_ID_METADATA_KEY: b"1"}),
        pa.field("name", pa.string(), metadata={FIELD_ID_METADATA_KEY: b"2"}),
        pa.field(
            "s",
            pa.struct(
                [
                    pa.field("x", pa.float64(), metadata={FIELD_ID_METADATA_KEY: b"4"}),
                    pa.field("ts", pa.timestamp("us", tz="UTC")),
                ]
            ),
            metadata={FIELD_ID_METADATA_KEY: b"3"},
        ),
    ]
)


def make_batch(start: int, n: int) -> pa.RecordBatch:
    ids = list(range(start, start + n))
    return pa.record_batch(
        [
            pa.array(ids, pa.int64()),
            pa.array([None if i % 7 == 0 else f"n{i}" for i in ids]),
            pa.array(
                [
                    None
                    if i % 5 == 0
                    else {"x": i / 2, "ts": datetime(2024, 1, 1, tzinfo=timezone.utc)}
                    for i in ids
                ],
                SCHEMA.field("s").type,
            ),
        ],
        schema=SCHEMA,
    )


@pytest.fixture(params=["local", "memory"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    if request.param == "local":
        yield Storage.for_table(str(tmp_path / "table"))
    else:
        root = f"memory://dvtool-test-{uuid.uuid4().hex}"
        yield Storage.for_table(root)
        with contextlib.suppress(FileNotFoundError):
            fsspec.filesystem("memory").rm(root.removeprefix("memory://"), recursive=True)


def read_directly(storage: Storage, location: str) -> pa.Table:
    """pyarrow reading the file itself: from disk, or from fsspec's memory filesystem."""
    if storage.protocol == "file":
        return pq.read_table(location)
    with fsspec.filesystem("memory").open(location.removeprefix("memory:/"), "rb") as f:
        return pq.read_table(f)


def test_write_and_read_back(storage: Storage) -> None:
    batches = [make_batch(i * 100, 100) for i in range(10)]
    partition_dir = partition_directory([("region", "eu:west"), ("day", None)])
    before = int(time.time() * 1000) - 5000
    written = write_data_file(
        storage,
        partition_dir=partition_dir,
        batches=iter(batches),
        schema=SCHEMA,
        stats=StatsCollector(SCHEMA),
        row_group_size=300,
    )
    name = written.location.rpartition("/")[2]
    assert FILE_NAME.match(name)
    assert written.relative_path == (f"region=eu%253Awest/day=__HIVE_DEFAULT_PARTITION__/{name}")
    assert storage.resolve(written.relative_path) == written.location
    assert written.location == storage.join(f"{partition_dir}/{name}")
    assert written.num_records == 1000
    assert written.size == storage.size(written.location)
    assert before <= written.modification_time_ms <= int(time.time() * 1000) + 5000

    # pyarrow reads the file directly: same rows, same schema, field ids kept.
    direct = read_directly(storage, written.location)
    expected = pa.Table.from_batches(batches)
    assert direct.equals(expected)
    assert direct.schema.field("id").metadata == {FIELD_ID_METADATA_KEY: b"1"}
    with storage.open_parquet(written.location) as f:
        meta = pq.ParquetFile(f).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [300, 300, 300, 100]
    assert "field_id=3 s" in str(meta.schema) and "field_id=4 x" in str(meta.schema)
    assert footer_row_count(storage, written.location) == 1000

    # Stats are those of the rows.
    stats = json.loads(written.stats_json)
    assert written.stats_json.startswith('{"numRecords":1000,')
    assert stats["minValues"]["id"] == 0 and stats["maxValues"]["id"] == 999
    assert stats["nullCount"] == {"id": 0, "name": 143, "s": {"x": 200, "ts": 200}}
    assert stats["maxValues"]["s"]["ts"] == "2024-01-01T00:00:00.000Z"
    assert stats["tightBounds"] is True

    # iter_file_batches: contiguous first-row indexes that match the rows' ids.
    seen = 0
    for first_row, batch in iter_file_batches(storage, written.location, batch_size=64):
        assert first_row == seen
        assert batch.column(0)[0].as_py() == first_row
        seen += batch.num_rows
    assert seen == 1000


def test_iter_selected_row_groups_and_columns(storage: Storage) -> None:
    written = write_data_file(
        storage,
        partition_dir="",
        batches=[make_batch(0, 250)],
        schema=SCHEMA,
        stats=StatsCollector(SCHEMA),
        row_group_size=100,
    )
    assert "/" not in written.relative_path
    got = list(iter_file_batches(storage, written.location, ["id"], 30, row_groups=[2, 0]))
    assert [first for first, _ in got] == [200, 230, 0, 30, 60, 90]
    assert all(batch.schema.names == ["id"] for _, batch in got)
    for first, batch in got:
        assert batch.column(0).to_pylist() == list(range(first, first + batch.num_rows))
    nested = list(iter_file_batches(storage, written.location, ["s.x"], row_groups=[1]))
    assert nested[0][0] == 100 and nested[0][1].num_rows == 100
    with pytest.raises(StorageError, match="no row group 3"):
        list(iter_file_batches(storage, written.location, row_groups=[3]))
    with pytest.raises(FileMissingError):
        list(iter_file_batches(storage, storage.join("nope.parquet")))


@pytest.mark.parametrize("batch_size", [30, 100, 101, 4096])
def test_row_groups_read_whole_or_in_batches_give_the_same_rows(
    storage: Storage, batch_size: int
) -> None:
    """Row groups no larger than a batch are read whole, larger ones in batches: the same
    rows, columns and first-row indexes as pyarrow's own reader gives."""
    written = write_data_file(
        storage,
        partition_dir="",
        batches=[make_batch(0, 250)],
        schema=SCHEMA,
        stats=StatsCollector(SCHEMA),
        row_group_size=100,
    )
    got = list(iter_file_batches(storage, written.location, ["id", "s"], batch_size))
    assert all(batch.num_rows <= batch_size for _, batch in got)
    firsts = [first for first, _ in got]
    sizes = [batch.num_rows for _, batch in got]
    assert firsts == [sum(sizes[:i]) for i in range(len(sizes))] and sum(sizes) == 250
    whole = pa.Table.from_batches([batch for _, batch in got])
    with storage.open_parquet(written.location) as source:
        assert whole.equals(pq.ParquetFile(source).read(columns=["id", "s"]))


def test_batches_are_cast_to_the_schema(storage: Storage) -> None:
    """Nullable fields, ns timestamps, tables and empty batches are conformed to the schema."""
    schema = pa.schema(
        [
            pa.field("a", pa.int32(), nullable=False, metadata={FIELD_ID_METADATA_KEY: b"7"}),
            pa.field("t", pa.timestamp("us", tz="UTC")),
        ]
    )
    loose = pa.table(
        {
            "t": pa.array([0, 1000], pa.timestamp("ns", tz="UTC")),
            "a": pa.array([1, 2], pa.int64()),
        }
    )
    written = write_data_file(
        storage,
        partition_dir="x=1",
        batches=[loose, loose.slice(0, 0), loose.to_batches()[0].slice(0, 0)],
        schema=schema,
        stats=StatsCollector(schema),
        compression="zstd",
    )
    assert written.location.endswith(".zstd.parquet")
    direct = read_directly(storage, written.location)
    assert direct.schema.equals(schema, check_metadata=False)
    assert direct.schema.field("a").metadata == {FIELD_ID_METADATA_KEY: b"7"}
    assert direct.column("a").to_pylist() == [1, 2]


def test_empty_file(storage: Storage) -> None:
    written = write_data_file(
        storage, partition_dir="", batches=[], schema=SCHEMA, stats=StatsCollector(SCHEMA)
    )
    assert written.num_records == 0
    assert json.loads(written.stats_json)["numRecords"] == 0
    assert read_directly(storage, written.location).num_rows == 0
    assert list(iter_file_batches(storage, written.location)) == []


def test_streamed_upload_of_large_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Above the whole-write limit a remote file is streamed from the local temp file."""
    storage = Storage.for_table(f"memory://dvtool-test-{uuid.uuid4().hex}")
    monkeypatch.setattr(publish, "WHOLE_WRITE_LIMIT", 1000)
    monkeypatch.setattr(publish, "_COPY_CHUNK", 4096)
    calls: list[str] = []
    monkeypatch.setattr(storage, "write", lambda location, data: calls.append(location))
    written = write_data_file(
        storage,
        partition_dir="p=1",
        batches=[make_batch(0, 5000)],
        schema=SCHEMA,
        stats=StatsCollector(SCHEMA),
    )
    assert calls == []  # not the whole-file write
    assert written.size > 1000
    assert read_directly(storage, written.location).num_rows == 5000


def failing_batches() -> Iterator[pa.RecordBatch]:
    yield make_batch(0, 10)
    raise RuntimeError("the producer failed")


def test_failed_write_leaves_nothing(storage: Storage, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="producer failed"):
        write_data_file(
            storage,
            partition_dir="p=1",
            batches=failing_batches(),
            schema=SCHEMA,
            stats=StatsCollector(SCHEMA),
        )
    assert storage.list_dir(storage.join("p=1")) == []
    if storage.protocol == "file":
        leftovers = [p for p in (tmp_path / "table").rglob("*") if p.is_file()]
        assert leftovers == []


def test_batch_with_wrong_columns_is_refused(storage: Storage) -> None:
    with pytest.raises(ValueError, match="do not match"):
        write_data_file(
            storage,
            partition_dir="",
            batches=[pa.record_batch({"other": [1]})],
            schema=SCHEMA,
            stats=StatsCollector(SCHEMA),
        )


# Footer statistics


def stats_table() -> pa.Table:
    return pa.table(
        {
            "i": pa.array([5, None, -3, 8], pa.int64()),
            "f": pa.array([1.5, math.nan, None, -2.0]),
            "s": pa.array(["pear", "apple", None, "fig"]),
            "b": pa.array([True, None, True, True]),
            "d": pa.array([date(2020, 1, 1), None, date(1999, 12, 31), None]),
            "dec": pa.array([Decimal("1.10"), None, Decimal("-2.25"), None], pa.decimal128(6, 2)),
            "ts": pa.array([0, 10**12, None, None], pa.timestamp("us", tz="UTC")),
            "st": pa.array([{"x": 1}, None, {"x": 3}, {"x": None}], pa.struct([("x", pa.int32())])),
            "l": pa.array([[1, 2], None, [], [9]], pa.list_(pa.int16())),
            "nostats": pa.array([1, 2, 3, 4], pa.int32()),
        }
    )


def write_plain(storage: Storage, table: pa.Table, **options: Any) -> str:
    location = storage.join(f"plain-{uuid.uuid4().hex}.parquet")
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **options)
    storage.write(location, sink.getvalue().to_pybytes())
    return location


def test_row_group_stats_vs_pyarrow_metadata(storage: Storage) -> None:
    table = stats_table()
    location = write_plain(
        storage,
        table,
        row_group_size=2,
        write_statistics=["i", "f", "s", "b", "d", "dec", "ts", "st.x", "l.list.element"],
    )
    groups = row_group_stats(storage, location)
    with storage.open_parquet(location) as f:
        meta = pq.ParquetFile(f).metadata
    assert [(g.index, g.first_row, g.num_rows) for g in groups] == [(0, 0, 2), (1, 2, 2)]
    for g in groups:
        rg = meta.row_group(g.index)
        for c in range(rg.num_columns):
            column = rg.column(c)
            path, stats = column.path_in_schema, column.statistics
            if stats is None or not stats.has_null_count:
                assert path not in g.null_count
            else:
                assert g.null_count[path] == stats.null_count
            if stats is not None and stats.has_min_max:
                assert g.min[path] == stats.min and g.max[path] == stats.max
            else:
                assert path not in g.min and path not in g.max
    first, second = groups
    assert "nostats" not in first.min and "nostats" not in first.null_count
    assert first.min["i"] == 5 and second.min["i"] == -3
    assert first.min["s"] == "apple" and first.max["s"] == "pear"
    assert first.min["st.x"] == 1 and first.null_count["st.x"] == 1
    assert second.max["l.list.element"] == 9
    assert first.min["d"] == date(2020, 1, 1)
    assert second.min["dec"] == Decimal("-2.25")
    assert first.max["ts"] == datetime(1970, 1, 12, 13, 46, 40, tzinfo=timezone.utc)
    assert second.min["f"] == -2.0
    assert all(not (isinstance(v, float) and math.isnan(v)) for g in groups for v in g.max.values())


def test_row_group_stats_of_some_columns(storage: Storage) -> None:
    """`columns` keeps exactly the statistics of those top-level columns' leaves (a struct's
    included), each equal to what the whole footer's read gives."""
    location = write_plain(storage, stats_table(), row_group_size=2)
    every = row_group_stats(storage, location)
    some = row_group_stats(storage, location, columns=["i", "st", "ts"])
    assert [(g.index, g.first_row, g.num_rows) for g in some] == [
        (g.index, g.first_row, g.num_rows) for g in every
    ]
    for all_of, part in zip(every, some, strict=True):
        for name in ("min", "max", "null_count"):
            whole, kept = getattr(all_of, name), getattr(part, name)
            expected = {k: v for k, v in whole.items() if k.split(".")[0] in {"i", "st", "ts"}}
            assert kept == expected and "st.x" in part.null_count


@pytest.mark.parametrize("tz", [None, "UTC", "+07:00"])
@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_row_group_stats_of_timestamps(storage: Storage, unit: str, tz: str | None) -> None:
    """INT64 timestamps are converted from their raw values, since pyarrow imports pandas to
    convert those with a zone or in nanoseconds: to pyarrow's values, nanoseconds widened to
    the enclosing microseconds (pyarrow gives pandas Timestamps there)."""
    per_second = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[unit]
    nanos = [1_700_000_000_123_456_789, -1_234_567_890_123_456_789, None]
    ticks = [None if n is None else n // (10**9 // per_second) for n in nanos]
    column = pa.array(ticks, pa.int64()).cast(pa.timestamp(unit, tz))
    location = write_plain(storage, pa.table({"t": column}))
    (group,) = row_group_stats(storage, location)
    low, high = group.min["t"], group.max["t"]
    assert type(low) is datetime and type(high) is datetime
    if unit == "ns":
        epoch = datetime(1970, 1, 1, tzinfo=None if tz is None else timezone.utc)
        assert low == epoch + timedelta(microseconds=-1_234_567_890_123_457)
        assert high == epoch + timedelta(microseconds=1_700_000_000_123_457)
    else:
        with storage.open_parquet(location) as f:
            stats = pq.ParquetFile(f).metadata.row_group(0).column(0).statistics
        assert (low, high) == (stats.min, stats.max)
        assert (low.tzinfo, high.tzinfo) == (stats.min.tzinfo, stats.max.tzinfo)


def test_row_group_stats_of_golden_spark_file() -> None:
    table = GOLDEN / "basic_partitioned"
    if not table.is_dir():
        pytest.fail(f"golden table {table} is missing")
    storage = Storage.for_table(str(table))
    location = str(next((table / "letter=a").glob("*.parquet")))
    groups = row_group_stats(storage, location)
    meta = pq.ParquetFile(location).metadata
    assert len(groups) == meta.num_row_groups
    assert sum(g.num_rows for g in groups) == meta.num_rows
    column = meta.row_group(0).column(0)
    assert groups[0].min[column.path_in_schema] == column.statistics.min


def test_row_group_stats_errors(storage: Storage) -> None:
    with pytest.raises(FileMissingError):
        row_group_stats(storage, storage.join("missing.parquet"))
    location = storage.join("broken.parquet")
    storage.write(location, b"not a parquet file")
    with pytest.raises(DataFileError, match="footer"):  # not I/O: the file's integrity
        row_group_stats(storage, location)
    with pytest.raises(DataFileError):
        list(iter_file_batches(storage, location))


def test_local_temp_files_are_hidden_and_removed(tmp_path: Path) -> None:
    storage = Storage.for_table(str(tmp_path))
    written = write_data_file(
        storage,
        partition_dir="",
        batches=[make_batch(0, 3)],
        schema=SCHEMA,
        stats=StatsCollector(SCHEMA),
    )
    assert os.listdir(tmp_path) == [written.location.rpartition("/")[2]]
