"""The data-file rewrite of Iceberg purge, copy-on-write delete and compaction
(dvtool/iceberg/data_file_rewrite.py), on tables pyiceberg writes in a SQL catalog on SQLite.

The oracles: pyiceberg reads the source data files onto the table's current schema (its own
projection) and the new file; the rows must be the same, minus the dropped positions, in
order. The new file's metrics must be those pyiceberg's own append gives the same rows.
Where pyiceberg's projection is not exact (nanoseconds, null lists of structs) the oracle is
the rows themselves, written here. v3 row lineage on Iceberg Spark's tables is in
tests/reference/test_iceberg_data_file_rewrite.py; here a v3 view of a pyiceberg table
(pyiceberg writes no v3 metadata) checks the rules on hand-written lineage columns.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.metadata import TableMetadata, TableMetadataV3
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import (
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)
from pyroaring import BitMap64

import dvtool.iceberg.data_file_rewrite as rewrite_module
from dvtool.errors import (
    DataFileError,
    FileMissingError,
    StorageError,
    UnrepresentableValueError,
)
from dvtool.iceberg.data_file_rewrite import RewriteSource, rewrite_data_files


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    catalog = SqlCatalog("rw", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("ns")
    return catalog


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Record batches of 700 rows, so drops and lineage cross batch boundaries."""
    monkeypatch.setattr(rewrite_module, "_BATCH_ROWS", 700)


def _entries(table: Table) -> Iterator[tuple[DataFile, int]]:
    """The live data files of `table` with their data sequence numbers."""
    snapshot = table.current_snapshot()
    assert snapshot is not None
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io):
            if entry.data_file.content == DataFileContent.DATA:
                assert entry.sequence_number is not None
                yield entry.data_file, entry.sequence_number


def _sources(table: Table, drops: dict[int, list[int]] | None = None) -> list[RewriteSource]:
    """A source per live data file, oldest first; `drops` by that index."""
    files = sorted(_entries(table), key=lambda e: e[1])
    drops = drops or {}
    return [
        RewriteSource(f, BitMap64(drops.get(n, [])), seq, None) for n, (f, seq) in enumerate(files)
    ]


def _read(metadata: TableMetadata, table: Table, data_file: DataFile) -> pa.Table:
    """pyiceberg's reading of one data file onto the current schema, no deletes."""
    scan = ArrowScan(metadata, table.io, metadata.schema(), AlwaysTrue())
    return scan.to_table([FileScanTask(data_file)])


def _expected(table: Table, sources: list[RewriteSource]) -> pa.Table:
    """The rows of `sources` (read by pyiceberg) without their dropped positions."""
    parts = []
    for source in sources:
        rows = _read(table.metadata, table, source.data_file)
        keep = [i for i in range(rows.num_rows) if i not in source.drop]
        parts.append(rows.take(pa.array(keep, pa.int64())))
    return pa.concat_tables(parts, promote_options="permissive")


def _values(rows: pa.Table) -> list[dict[str, Any]]:
    """The rows as Python values, NaN as a string (NaN != NaN), whatever the arrow types."""
    return [{k: "NaN" if v != v else v for k, v in row.items()} for row in rows.to_pylist()]


def _rewrite(table: Table, sources: list[RewriteSource], path: Path, **kw: Any) -> DataFile:
    first = sources[0].data_file
    written = rewrite_data_files(
        table.io,
        kw.get("metadata", table.metadata),
        sources,
        str(path),
        spec_id=kw.get("spec_id", first.spec_id),
        partition=kw.get("partition", first.partition),
    )
    assert written is not None
    return written


def _stats(data_file: DataFile) -> tuple[Any, ...]:
    return (
        data_file.record_count,
        data_file.value_counts,
        data_file.null_value_counts,
        data_file.lower_bounds,
        data_file.upper_bounds,
    )


def _field_ids(schema: pa.Schema | pa.DataType) -> list[str]:
    """Every field's `PARQUET:field_id`, nested fields too, depth first."""
    fields = list(schema) if isinstance(schema, pa.Schema) else _children(schema)
    ids = []
    for field in fields:
        ids.append((field.metadata or {}).get(b"PARQUET:field_id", b"?").decode())
        ids.extend(_field_ids(field.type))
    return ids


def _children(typ: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(typ):
        return list(typ)
    if pa.types.is_map(typ):
        return [typ.key_field, typ.item_field]
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return [typ.value_field]
    return []


ROWS = 2000


ROWS_SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string()), ("x", pa.float64())])
ICEBERG_ROWS = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "cat", StringType()),
    NestedField(3, "x", DoubleType()),
)


def _rows(lo: int, hi: int) -> pa.Table:
    return pa.table(
        {
            "id": range(lo, hi),
            "cat": ["abc"[i % 3] if i % 7 else None for i in range(lo, hi)],
            "x": [float("nan") if i % 11 == 0 else i / 4 for i in range(lo, hi)],
        },
        schema=ROWS_SCHEMA,
    )


def test_rows_minus_dropped_positions_in_order_with_pyiceberg_metrics(
    catalog: SqlCatalog, tmp_path: Path
) -> None:
    table = catalog.create_table("ns.t", ROWS_SCHEMA)
    table.append(_rows(0, ROWS))
    table.append(_rows(ROWS, 2 * ROWS))
    drops = {0: [0, 1, 699, 700, 701, 1999], 1: list(range(0, ROWS, 3))}
    sources = _sources(table, drops)
    written = _rewrite(table, sources, tmp_path / "out.parquet")
    expected = _expected(table, sources)
    assert _values(_read(table.metadata, table, written)) == _values(expected)
    assert written.file_size_in_bytes == (tmp_path / "out.parquet").stat().st_size
    assert written.content == DataFileContent.DATA and written.file_format == FileFormat.PARQUET
    assert written.spec_id == 0 and written.sort_order_id == 0
    reference = catalog.create_table("ns.reference", table.schema())
    reference.append(expected)
    (theirs,) = [f for f, _ in _entries(reference)]
    assert _stats(written) == _stats(theirs)
    assert written.nan_value_counts == {3: sum(1 for v in expected["x"].to_pylist() if v != v)}
    footer = pq.ParquetFile(tmp_path / "out.parquet")
    assert _field_ids(footer.schema_arrow) == ["1", "2", "3"]
    assert footer.metadata.row_group(0).column(0).compression == "ZSTD"
    assert b"iceberg.schema" in footer.metadata.metadata


def test_nothing_is_written_when_no_row_remains(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = catalog.create_table("ns.t", ROWS_SCHEMA)
    table.append(_rows(0, 10))
    (source,) = _sources(table, {0: [*range(10), 99]})
    out = tmp_path / "out.parquet"
    assert (
        rewrite_data_files(
            table.io, table.metadata, [source], str(out), spec_id=0, partition=Record()
        )
        is None
    )
    assert not out.exists()


def test_schema_evolution_rename_add_and_promotions(catalog: SqlCatalog, tmp_path: Path) -> None:
    schema = Schema(
        NestedField(1, "id", IntegerType()),
        NestedField(2, "name", StringType()),
        NestedField(3, "f", FloatType()),
        NestedField(4, "d", DecimalType(5, 2)),
        NestedField(5, "gone", StringType()),
    )
    table = catalog.create_table("ns.t", schema)
    first = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int32()),
            "name": ["a", None, "c"],
            "f": pa.array([1.5, None, -2.25], pa.float32()),
            "d": pa.array(
                [decimal.Decimal("1.25"), None, decimal.Decimal("-999.99")], pa.decimal128(5, 2)
            ),
            "gone": ["x", "y", "z"],
        }
    )
    table.append(first)
    with table.update_schema() as update:
        update.rename_column("name", "label")
        update.update_column("id", LongType())
        update.update_column("f", DoubleType())
        update.update_column("d", DecimalType(10, 2))
        update.delete_column("gone")
        update.add_column("extra", StringType())
    table = catalog.load_table("ns.t")
    second = pa.table(
        {
            "id": pa.array([2**40], pa.int64()),
            "label": ["n"],
            "f": pa.array([0.1], pa.float64()),
            "d": pa.array([decimal.Decimal("12345678.99")], pa.decimal128(10, 2)),
            "extra": ["e"],
        }
    )
    table.append(second)
    sources = _sources(table, {0: [1]})
    written = _rewrite(table, sources, tmp_path / "out.parquet")
    expected = _expected(table, sources)
    got = _read(table.metadata, table, written)
    assert _values(got) == _values(expected)
    assert got.column_names == ["id", "label", "f", "d", "extra"]
    assert got["f"].to_pylist() == [1.5, -2.25, 0.1]  # float -> double: the float's value
    assert _field_ids(pq.read_schema(tmp_path / "out.parquet")) == ["1", "2", "3", "4", "6"]


def test_sources_of_two_partition_specs_into_one_file(catalog: SqlCatalog, tmp_path: Path) -> None:
    rows = _rows(0, 30)
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "cat"))
    table = catalog.create_table("ns.t", ICEBERG_ROWS, partition_spec=spec)
    table.append(rows.filter(pa.compute.equal(rows["cat"], "a")))
    with table.update_spec() as update:
        update.remove_field("cat")
    table = catalog.load_table("ns.t")
    table.append(rows.filter(pa.compute.equal(rows["cat"], "b")))
    sources = _sources(table, {0: [0], 1: [2, 3]})
    assert {s.data_file.spec_id for s in sources} == {0, 1}
    written = _rewrite(table, sources, tmp_path / "out.parquet", spec_id=1, partition=Record())
    assert written.spec_id == 1 and written.partition == Record()
    assert _values(_read(table.metadata, table, written)) == _values(_expected(table, sources))


def test_metrics_modes_and_parquet_properties(catalog: SqlCatalog, tmp_path: Path) -> None:
    properties = {
        "write.metadata.metrics.default": "counts",
        "write.metadata.metrics.column.cat": "truncate(1)",
        "write.metadata.metrics.column.id": "full",
        "write.parquet.compression-codec": "snappy",
    }
    table = catalog.create_table("ns.t", ROWS_SCHEMA, properties=properties)
    table.append(_rows(0, ROWS))
    sources = _sources(table, {0: [5]})
    written = _rewrite(table, sources, tmp_path / "out.parquet")
    reference = catalog.create_table("ns.reference", table.schema(), properties=properties)
    reference.append(_expected(table, sources))
    (theirs,) = [f for f, _ in _entries(reference)]
    assert _stats(written) == _stats(theirs)
    assert set(written.lower_bounds) == {1, 2}
    footer = pq.ParquetFile(tmp_path / "out.parquet").metadata
    assert footer.row_group(0).column(0).compression == "SNAPPY"


@pytest.mark.filterwarnings("ignore:Parquet writer option:UserWarning")  # pyiceberg's append
def test_row_groups_follow_the_row_group_size(catalog: SqlCatalog, tmp_path: Path) -> None:
    properties = {"write.parquet.row-group-size-bytes": str(8 * 1024)}
    table = catalog.create_table("ns.t", ROWS_SCHEMA, properties=properties)
    table.append(_rows(0, ROWS))
    sources = _sources(table, {0: [7]})
    written = _rewrite(table, sources, tmp_path / "out.parquet")
    footer = pq.ParquetFile(tmp_path / "out.parquet").metadata
    assert footer.num_row_groups > 2
    assert all(
        footer.row_group(i).total_byte_size < 16 * 1024 for i in range(footer.num_row_groups)
    )
    assert written.split_offsets is not None and len(written.split_offsets) == footer.num_row_groups
    assert _values(_read(table.metadata, table, written)) == _values(_expected(table, sources))


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
    source = RewriteSource(_data_file(path, 4), BitMap64([0]), 1)
    rewrite_data_files(table.io, metadata, [source], str(out), spec_id=0, partition=Record())
    got = pq.read_table(out)
    assert got.to_pylist() == [
        {"id": 2, "s": None, "l": None, "m": None},
        {"id": 3, "s": {"alpha": None, "b": "z"}, "l": [], "m": []},
        {"id": 4, "s": {"alpha": 4, "b": None}, "l": [{"k": None}], "m": [("q", None), ("r", 2)]},
    ]
    assert _field_ids(got.schema) == ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10"]


# -- files written here: what pyiceberg's writer never writes -------------------------------


def _field(name: str, typ: pa.DataType, field_id: int) -> pa.Field:
    return pa.field(name, typ, metadata={b"PARQUET:field_id": str(field_id).encode()})


def _data_file(path: Path, rows: int) -> DataFile:
    data_file = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=str(path),
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=rows,
        file_size_in_bytes=path.stat().st_size,
    )
    data_file.spec_id = 0
    return data_file


def _one_column_table(catalog: SqlCatalog, typ: Any) -> Table:
    return catalog.create_table("ns.t", Schema(NestedField(1, "ts", typ)))


def test_nanosecond_timestamps_kept_exactly_or_refused(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = _one_column_table(catalog, TimestampType())
    schema = pa.schema([_field("ts", pa.timestamp("ns"), 1)])
    exact = tmp_path / "exact.parquet"
    pq.write_table(
        pa.table({"ts": pa.array([1_000, -2_000, None], pa.timestamp("ns"))}, schema=schema), exact
    )
    source = RewriteSource(_data_file(exact, 3), BitMap64(), 1)
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
        _rewrite(table, [RewriteSource(_data_file(lossy, 2), BitMap64(), 1)], out)
    assert not out.exists()


def test_int96_timestamps_beyond_the_nanosecond_range(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = _one_column_table(catalog, TimestamptzType())
    values = [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999), None]
    path = tmp_path / "int96.parquet"
    column = pa.array(values, pa.timestamp("us"))
    pq.write_table(
        pa.table({"ts": column}, schema=pa.schema([_field("ts", pa.timestamp("us"), 1)])),
        path,
        use_deprecated_int96_timestamps=True,
        store_schema=False,
    )
    assert pq.ParquetFile(path).metadata.schema.column(0).physical_type == "INT96"
    _rewrite(table, [RewriteSource(_data_file(path, 3), BitMap64(), 1)], tmp_path / "out.parquet")
    got = pq.read_table(tmp_path / "out.parquet")["ts"]
    assert got.type == pa.timestamp("us", tz="UTC")
    assert got.to_pylist() == [v and v.replace(tzinfo=dt.timezone.utc) for v in values]


def test_a_type_the_table_cannot_read_is_refused(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = _one_column_table(catalog, DateType())
    path = tmp_path / "long.parquet"
    pq.write_table(
        pa.table(
            {"ts": pa.array([1], pa.int64())}, schema=pa.schema([_field("ts", pa.int64(), 1)])
        ),
        path,
    )
    with pytest.raises(DataFileError, match=r"column ts .* is long in the file"):
        _rewrite(
            table, [RewriteSource(_data_file(path, 1), BitMap64(), 1)], tmp_path / "out.parquet"
        )
    assert not (tmp_path / "out.parquet").exists()


def test_footer_and_manifest_row_counts_must_agree(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = catalog.create_table("ns.t", ROWS_SCHEMA)
    table.append(_rows(0, 10))
    (source,) = _sources(table)
    wrong = DataFile.from_args(**{**_args(source.data_file), "record_count": 11})
    wrong.spec_id = 0
    with pytest.raises(DataFileError, match="holds 10 rows, its manifest entry says 11"):
        _rewrite(table, [RewriteSource(wrong, BitMap64(), 1)], tmp_path / "out.parquet")


def _args(data_file: DataFile) -> dict[str, Any]:
    names = (
        "content",
        "file_path",
        "file_format",
        "partition",
        "record_count",
        "file_size_in_bytes",
    )
    return {n: getattr(data_file, n) for n in names}


def test_an_existing_target_is_never_overwritten(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = catalog.create_table("ns.t", ROWS_SCHEMA)
    table.append(_rows(0, 10))
    out = tmp_path / "out.parquet"
    out.write_bytes(b"keep me")
    with pytest.raises(StorageError, match=r"out\.parquet"):
        _rewrite(table, _sources(table), out)
    assert out.read_bytes() == b"keep me"


def test_a_failed_rewrite_leaves_no_file(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = catalog.create_table("ns.t", ROWS_SCHEMA)
    table.append(_rows(0, 10))
    table.append(_rows(10, 20))
    first, second = _sources(table)
    Path(second.data_file.file_path.removeprefix("file://")).unlink()
    out = tmp_path / "out.parquet"
    with pytest.raises(FileMissingError):
        _rewrite(table, [first, second], out)
    assert not out.exists()


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
            {"id": pa.array(range(5), pa.int64())}, schema=pa.schema([_field("id", pa.int64(), 1)])
        ),
        plain,
    )
    moved = tmp_path / "moved.parquet"
    lineage = pa.schema(
        [
            _field("id", pa.int64(), 1),
            _field("_row_id", pa.int64(), ROW_ID),
            _field("_last_updated_sequence_number", pa.int64(), LAST_UPDATED),
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
        RewriteSource(_data_file(plain, 5), BitMap64([1]), 4, first_row_id=100),
        RewriteSource(_data_file(moved, 3), BitMap64(), 5, first_row_id=200),
        RewriteSource(_data_file(plain, 5), BitMap64([0, 1, 2]), 4, first_row_id=None),
    ]
    out = tmp_path / "out.parquet"
    rewrite_data_files(table.io, metadata, sources, str(out), spec_id=0, partition=Record())
    got = pq.read_table(out)
    assert got.column_names == ["id", "_row_id", "_last_updated_sequence_number"]
    assert _field_ids(got.schema) == ["1", str(ROW_ID), str(LAST_UPDATED)]
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
            schema=pa.schema([_field("d", pa.date32(), 1)]),
        ),
        path,
    )
    out = tmp_path / "out.parquet"
    rewrite_data_files(
        table.io,
        metadata,
        [RewriteSource(_data_file(path, 2), BitMap64(), 1, 0)],
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
            [RewriteSource(_data_file(path, 2), BitMap64(), 1)],
            str(tmp_path / "v2.parquet"),
            spec_id=0,
            partition=Record(),
        )
