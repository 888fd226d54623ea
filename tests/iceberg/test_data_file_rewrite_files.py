"""The data-file rewrite (dvtool/iceberg/data_file_rewrite.py) on Parquet files written here:
what pyiceberg's writer never writes (null lists of structs: its append writes them as empty
lists; nanosecond and INT96 timestamps; a column the file lacks that its identity partition
holds; another writer's types) and v3 row lineage and promotions, on a v3 view of a pyiceberg
table's metadata (pyiceberg writes no v3 metadata). The oracle is the rows themselves, or
pyiceberg's reading of the source where it is exact.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata, TableMetadataV3
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import (
    DateType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzType,
    UnknownType,
)
from pyroaring import BitMap64

from dvtool.errors import DataFileError, UnrepresentableValueError, WriteRefusedError
from dvtool.iceberg.data_file_rewrite import RewriteSource, rewrite_data_files
from dvtool.iceberg.partition_check import PartitionCheck
from dvtool.iceberg.rewrite_executor import ParquetOutput
from tests.iceberg.rewrite_files import data_file, field, field_ids, read_file, sql_catalog


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return sql_catalog(tmp_path)


def _rewrite(table: Table, sources: list[RewriteSource], path: Path, **kw: Any) -> None:
    written = rewrite_data_files(
        table.io,
        kw.get("metadata", table.metadata),
        sources,
        str(path),
        spec_id=0,
        partition=Record(),
    )
    assert written is not None


NESTED = Schema(
    NestedField(1, "id", LongType()),
    NestedField(
        2, "s", StructType(NestedField(3, "a", IntegerType()), NestedField(4, "b", StringType()))
    ),
    NestedField(
        5, "l", ListType(6, StructType(NestedField(7, "k", IntegerType())), element_required=False)
    ),
    NestedField(8, "m", MapType(9, StringType(), 10, LongType(), value_required=False)),
)


def test_nested_values_by_field_id_with_null_lists_and_maps(
    catalog: SqlCatalog, tmp_path: Path
) -> None:
    """Written with pyarrow: pyiceberg's own append turns a null list of structs into []."""
    table = catalog.create_table("ns.t", NESTED)
    rows = [
        {"id": 1, "s": {"a": 1, "b": "x"}, "l": [{"k": 1}, None], "m": {"p": 1}},
        {"id": 2, "s": None, "l": None, "m": None},
        {"id": 3, "s": {"a": None, "b": "z"}, "l": [], "m": {}},
        {"id": 4, "s": {"a": 4, "b": None}, "l": [{"k": None}], "m": {"q": None, "r": 2}},
    ]
    path = tmp_path / "nested.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema_to_pyarrow(NESTED)), path)
    renamed = Schema(
        NestedField(1, "id", LongType()),
        NestedField(
            2,
            "s",
            StructType(NestedField(3, "alpha", IntegerType()), NestedField(4, "b", StringType())),
        ),
        *NESTED.fields[2:],
        schema_id=1,
    )
    metadata = table.metadata.model_copy(update={"schemas": [renamed], "current_schema_id": 1})
    out = tmp_path / "out.parquet"
    source = RewriteSource(data_file(path, 4), BitMap64([0]), 1)
    rewrite_data_files(table.io, metadata, [source], str(out), spec_id=0, partition=Record())
    got = pq.read_table(out)
    assert got.to_pylist() == [
        {"id": 2, "s": None, "l": None, "m": None},
        {"id": 3, "s": {"alpha": None, "b": "z"}, "l": [], "m": []},
        {"id": 4, "s": {"alpha": 4, "b": None}, "l": [{"k": None}], "m": [("q", None), ("r", 2)]},
    ]
    assert field_ids(got.schema) == ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10"]


def _one_column_table(catalog: SqlCatalog, typ: Any) -> Table:
    return catalog.create_table("ns.t", Schema(NestedField(1, "ts", typ)))


def test_nanosecond_timestamps_kept_exactly_or_refused(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = _one_column_table(catalog, TimestampType())
    schema = pa.schema([field("ts", pa.timestamp("ns"), 1)])
    exact = tmp_path / "exact.parquet"
    pq.write_table(
        pa.table({"ts": pa.array([1_000, -2_000, None], pa.timestamp("ns"))}, schema=schema), exact
    )
    source = RewriteSource(data_file(exact, 3), BitMap64(), 1)
    _rewrite(table, [source], tmp_path / "ok.parquet")
    assert pq.read_table(tmp_path / "ok.parquet")["ts"].to_pylist() == [
        dt.datetime(1970, 1, 1, 0, 0, 0, 1),
        dt.datetime(1969, 12, 31, 23, 59, 59, 999998),
        None,
    ]
    lossy = tmp_path / "lossy.parquet"
    pq.write_table(
        pa.table({"ts": pa.array([1_000, 1_500], pa.timestamp("ns"))}, schema=schema), lossy
    )
    out = tmp_path / "out.parquet"
    with pytest.raises(UnrepresentableValueError, match=r"lossy.parquet: column ts \(field id 1\)"):
        _rewrite(table, [RewriteSource(data_file(lossy, 2), BitMap64(), 1)], out)
    assert not out.exists()


def test_int96_timestamps_beyond_the_nanosecond_range(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = _one_column_table(catalog, TimestamptzType())
    values = [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999), None]
    path = tmp_path / "int96.parquet"
    column = pa.array(values, pa.timestamp("us"))
    pq.write_table(
        pa.table({"ts": column}, schema=pa.schema([field("ts", pa.timestamp("us"), 1)])),
        path,
        use_deprecated_int96_timestamps=True,
        store_schema=False,
    )
    assert pq.ParquetFile(path).metadata.schema.column(0).physical_type == "INT96"
    _rewrite(table, [RewriteSource(data_file(path, 3), BitMap64(), 1)], tmp_path / "out.parquet")
    got = pq.read_table(tmp_path / "out.parquet")["ts"]
    assert got.type == pa.timestamp("us", tz="UTC")
    assert got.to_pylist() == [v and v.replace(tzinfo=dt.timezone.utc) for v in values]


def test_a_type_the_table_cannot_read_is_refused(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = _one_column_table(catalog, DateType())
    path = tmp_path / "long.parquet"
    pq.write_table(
        pa.table({"ts": pa.array([1], pa.int64())}, schema=pa.schema([field("ts", pa.int64(), 1)])),
        path,
    )
    with pytest.raises(DataFileError, match=r"column ts .* is long in the file"):
        _rewrite(
            table, [RewriteSource(data_file(path, 1), BitMap64(), 1)], tmp_path / "out.parquet"
        )
    assert not (tmp_path / "out.parquet").exists()


def test_a_required_column_without_a_value_is_refused(catalog: SqlCatalog, tmp_path: Path) -> None:
    schema = Schema(NestedField(1, "id", LongType(), required=True))
    table = catalog.create_table("ns.t", schema)
    nulls = tmp_path / "nulls.parquet"
    id_schema = pa.schema([field("id", pa.int64(), 1)])
    pq.write_table(pa.table({"id": [1, None]}, schema=id_schema), nulls)
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [1]}, schema=pa.schema([field("x", pa.int64(), 2)])), other)
    for path, rows, message in ((nulls, 2, "null values"), (other, 1, "required")):
        out = tmp_path / f"out-{rows}.parquet"
        with pytest.raises(DataFileError, match=message):
            _rewrite(table, [RewriteSource(data_file(path, rows), BitMap64(), 1)], out)
        assert not out.exists()


def test_a_column_the_file_lacks_takes_its_identity_partition_value(
    catalog: SqlCatalog, tmp_path: Path
) -> None:
    """Spec "Column Projection": e.g. a file imported from a Hive table, whose partition
    column lives in its path. pyiceberg's reading of the source applies the same rule."""
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "cat", StringType()))
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "cat"))
    table = catalog.create_table("ns.t", schema, partition_spec=spec)
    path = tmp_path / "imported.parquet"
    arrow_schema = pa.schema([field("id", pa.int64(), 1)])
    pq.write_table(pa.table({"id": [1, 2, 3]}, schema=arrow_schema), path)
    source = RewriteSource(data_file(path, 3, Record("b")), BitMap64([1]), 1)
    out = tmp_path / "out.parquet"
    written = rewrite_data_files(
        table.io, table.metadata, [source], str(out), spec_id=0, partition=Record("b")
    )
    assert written is not None and written.partition == Record("b")
    assert pq.read_table(out).to_pylist() == [{"id": 1, "cat": "b"}, {"id": 3, "cat": "b"}]
    oracle = read_file(table.metadata, table, source.data_file).to_pylist()
    assert [oracle[0], oracle[2]] == pq.read_table(out).to_pylist()


# -- v3: row lineage and the v3 promotions, on a v3 view of a pyiceberg table --------------


def _v3(table: Table, schema: Schema | None = None) -> TableMetadata:
    """`table`'s metadata as format version 3 (pyiceberg writes no v3 metadata itself)."""
    fields = table.metadata.model_dump(by_alias=False)
    fields.update(format_version=3, next_row_id=10_000)
    metadata = TableMetadataV3(**fields)
    if schema is not None:
        metadata = metadata.model_copy(
            update={"schemas": [schema], "current_schema_id": schema.schema_id}
        )
    return metadata


ROW_ID, LAST_UPDATED = 2147483540, 2147483539


def test_v3_lineage_kept_where_written_else_inherited(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = catalog.create_table("ns.t", Schema(NestedField(1, "id", LongType())))
    metadata = _v3(table)
    plain = tmp_path / "plain.parquet"
    pq.write_table(
        pa.table(
            {"id": pa.array(range(5), pa.int64())}, schema=pa.schema([field("id", pa.int64(), 1)])
        ),
        plain,
    )
    moved = tmp_path / "moved.parquet"
    lineage = pa.schema(
        [
            field("id", pa.int64(), 1),
            field("_row_id", pa.int64(), ROW_ID),
            field("_last_updated_sequence_number", pa.int64(), LAST_UPDATED),
        ]
    )
    pq.write_table(
        pa.table(
            {
                "id": [10, 11, 12],
                "_row_id": [7, None, 3],
                "_last_updated_sequence_number": [2, None, None],
            },
            schema=lineage,
        ),
        moved,
    )
    sources = [
        RewriteSource(data_file(plain, 5), BitMap64([1]), 4, first_row_id=100),
        RewriteSource(data_file(moved, 3), BitMap64(), 5, first_row_id=200),
        RewriteSource(data_file(plain, 5), BitMap64([0, 1, 2]), 4, first_row_id=None),
    ]
    out = tmp_path / "out.parquet"
    rewrite_data_files(table.io, metadata, sources, str(out), spec_id=0, partition=Record())
    got = pq.read_table(out)
    assert got.column_names == ["id", "_row_id", "_last_updated_sequence_number"]
    assert field_ids(got.schema) == ["1", str(ROW_ID), str(LAST_UPDATED)]
    assert got.to_pylist() == [
        {"id": 0, "_row_id": 100, "_last_updated_sequence_number": 4},
        {"id": 2, "_row_id": 102, "_last_updated_sequence_number": 4},
        {"id": 3, "_row_id": 103, "_last_updated_sequence_number": 4},
        {"id": 4, "_row_id": 104, "_last_updated_sequence_number": 4},
        {"id": 10, "_row_id": 7, "_last_updated_sequence_number": 2},
        {"id": 11, "_row_id": 201, "_last_updated_sequence_number": 5},
        {"id": 12, "_row_id": 3, "_last_updated_sequence_number": 5},
        {"id": 3, "_row_id": None, "_last_updated_sequence_number": None},
        {"id": 4, "_row_id": None, "_last_updated_sequence_number": None},
    ]


def test_v3_date_to_timestamp_promotion_and_initial_default(
    catalog: SqlCatalog, tmp_path: Path
) -> None:
    table = catalog.create_table("ns.t", Schema(NestedField(1, "d", DateType())))
    evolved = Schema(
        NestedField(1, "d", TimestampType()),
        NestedField(2, "n", LongType(), required=True, initial_default=42),
        schema_id=1,
    )
    metadata = _v3(table, evolved)
    path = tmp_path / "dates.parquet"
    pq.write_table(
        pa.table(
            {"d": pa.array([dt.date(2024, 2, 29), None], pa.date32())},
            schema=pa.schema([field("d", pa.date32(), 1)]),
        ),
        path,
    )
    out = tmp_path / "out.parquet"
    rewrite_data_files(
        table.io,
        metadata,
        [RewriteSource(data_file(path, 2), BitMap64(), 1, 0)],
        str(out),
        spec_id=0,
        partition=Record(),
    )
    got = pq.read_table(out, columns=["d", "n"]).to_pylist()
    assert got == [{"d": dt.datetime(2024, 2, 29), "n": 42}, {"d": None, "n": 42}]
    with pytest.raises(DataFileError, match="is date in the file"):
        rewrite_data_files(
            table.io,
            table.metadata.model_copy(update={"schemas": [evolved], "current_schema_id": 1}),
            [RewriteSource(data_file(path, 2), BitMap64(), 1)],
            str(tmp_path / "v2.parquet"),
            spec_id=0,
            partition=Record(),
        )


def test_v3_unknown_columns_are_not_stored_and_temporal_bounds_are_exact(
    catalog: SqlCatalog, tmp_path: Path
) -> None:
    """Spec: `unknown` is "not stored in data files". Bounds of dates and timestamps are
    the file's own integers: nanoseconds kept, years beyond 9999 too (pyiceberg's metrics
    go through Python's datetime)."""
    table = catalog.create_table("ns.t", Schema(NestedField(1, "id", LongType())))
    unk = UnknownType()
    evolved = Schema(
        NestedField(1, "id", LongType()),
        NestedField(2, "u", unk),
        NestedField(3, "ns", TimestampNanoType()),
        NestedField(4, "day", DateType()),
        NestedField(5, "s", StructType(NestedField(6, "a", LongType()), NestedField(7, "v", unk))),
        schema_id=1,
    )
    metadata = _v3(table, evolved)
    path = tmp_path / "temporal.parquet"
    columns = {
        "id": (pa.int64(), 1, [1, 2, 3]),
        "ns": (pa.timestamp("ns"), 3, [1, 2**62, None]),
        "day": (pa.date32(), 4, [3_000_000, -1, None]),  # 3_000_000 days: year 10183
        "s": (pa.struct([field("a", pa.int64(), 6)]), 5, [{"a": 1}, None, {"a": 3}]),
    }
    schema = pa.schema([field(n, t, i) for n, (t, i, _) in columns.items()])
    pq.write_table(pa.table({n: v for n, (_, _, v) in columns.items()}, schema=schema), path)
    out = tmp_path / "out.parquet"
    source = RewriteSource(data_file(path, 3), BitMap64([2]), 7, first_row_id=0)
    written = rewrite_data_files(
        table.io, metadata, [source], str(out), spec_id=0, partition=Record()
    )
    assert written is not None
    stored = pq.read_table(out)
    assert stored.column_names[:4] == ["id", "ns", "day", "s"]
    assert field_ids(stored.schema) == ["1", "3", "4", "5", "6", str(ROW_ID), str(LAST_UPDATED)]
    assert stored.column("s").to_pylist() == [{"a": 1}, None]
    assert written.lower_bounds[3] == (1).to_bytes(8, "little")
    assert written.upper_bounds[3] == (2**62).to_bytes(8, "little")
    assert written.lower_bounds[4] == (-1).to_bytes(4, "little", signed=True)
    assert written.upper_bounds[4] == (3_000_000).to_bytes(4, "little")


def test_partition_check_of_time_transforms_and_nulls(catalog: SqlCatalog) -> None:
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "ts", TimestamptzType()))
    spec = PartitionSpec(PartitionField(2, 1000, DayTransform(), "ts_day"))
    table = catalog.create_table("ns.t", schema, partition_spec=spec)
    day = dt.datetime(2024, 2, 29, tzinfo=dt.timezone.utc)
    days = (day.date() - dt.date(1970, 1, 1)).days
    check = PartitionCheck(table.metadata, table.schema(), 0, Record(days))
    assert not check.applies_to(0, Record(days)) and check.applies_to(0, Record(days + 1))
    arrow = table.schema().as_arrow()

    def batch(*times: dt.datetime | None) -> pa.RecordBatch:
        return pa.RecordBatch.from_pylist([{"id": 1, "ts": t} for t in times], schema=arrow)

    check.check(batch(day, day + dt.timedelta(hours=23, minutes=59)), "f")
    before, after = day - dt.timedelta(microseconds=1), day + dt.timedelta(days=1)
    for rows in ((day, after), (before,), (day, None)):
        with pytest.raises(WriteRefusedError, match="a row of f belongs to ts_day="):
            check.check(batch(*rows), "f")
    PartitionCheck(table.metadata, table.schema(), 0, Record(None)).check(batch(None), "f")


def test_memory_does_not_grow_with_the_file(
    catalog: SqlCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Arrow's allocations while rewriting files of 10 and of 40 row groups: the same (an
    input and an output row group, the writer's buffers), not in proportion to the file."""
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "s", StringType()))
    properties = {"write.parquet.row-group-size-bytes": str(1 << 20)}
    table = catalog.create_table("ns.t", schema, properties=properties)
    peak = [0]
    write, flush = ParquetOutput.write, ParquetOutput._flush

    def written(self: ParquetOutput, batch: pa.RecordBatch) -> None:
        peak[0] = max(peak[0], pa.total_allocated_bytes())
        write(self, batch)

    def flushed(self: ParquetOutput) -> None:
        flush(self)
        peak[0] = max(peak[0], pa.total_allocated_bytes())

    monkeypatch.setattr(ParquetOutput, "write", written)
    monkeypatch.setattr(ParquetOutput, "_flush", flushed)
    peaks = []
    for rows in (200_000, 800_000):
        ids = pa.array(range(rows), pa.int64())
        arrow = schema_to_pyarrow(schema)
        data = pa.table({"id": ids, "s": pc.cast(ids, pa.string())}, schema=arrow)
        path = tmp_path / f"{rows}.parquet"
        pq.write_table(data, path, row_group_size=20_000)
        del ids, data
        before, peak[0] = pa.total_allocated_bytes(), 0
        source = RewriteSource(data_file(path, rows), BitMap64(range(0, rows, 2)), 1)
        _rewrite(table, [source], tmp_path / f"out-{rows}.parquet")
        peaks.append(peak[0] - before)
    assert pq.ParquetFile(tmp_path / "out-800000.parquet").metadata.num_row_groups > 2
    assert peaks[1] < 1.5 * peaks[0]
