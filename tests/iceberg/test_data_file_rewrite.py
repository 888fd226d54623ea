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
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform, IdentityTransform, TruncateTransform
from pyiceberg.typedef import Record
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from pyroaring import BitMap64

import dvtool.iceberg.rewrite_executor as rewrite_module
from dvtool.errors import (
    DataFileError,
    FileMissingError,
    StorageError,
    UnsupportedFeatureError,
    WriteRefusedError,
)
from dvtool.iceberg.data_file_rewrite import (
    RewriteSource,
    new_data_location,
    rewrite_data_files,
)
from dvtool.iceberg.parquet_settings import DICTIONARY_LIMIT, ParquetSettings
from tests.iceberg.rewrite_files import field_ids, read_file, sql_catalog, values


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return sql_catalog(tmp_path)


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


def _expected(table: Table, sources: list[RewriteSource]) -> pa.Table:
    """The rows of `sources` (read by pyiceberg) without their dropped positions."""
    parts = []
    for source in sources:
        rows = read_file(table.metadata, table, source.data_file)
        keep = [i for i in range(rows.num_rows) if i not in source.drop]
        parts.append(rows.take(pa.array(keep, pa.int64())))
    return pa.concat_tables(parts, promote_options="permissive")


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
    assert values(read_file(table.metadata, table, written)) == values(expected)
    assert written.file_size_in_bytes == (tmp_path / "out.parquet").stat().st_size
    assert written.content == DataFileContent.DATA and written.file_format == FileFormat.PARQUET
    assert written.spec_id == 0 and written.sort_order_id == 0
    reference = catalog.create_table("ns.reference", table.schema())
    reference.append(expected)
    (theirs,) = [f for f, _ in _entries(reference)]
    assert _stats(written) == _stats(theirs)
    assert written.nan_value_counts == {3: sum(1 for v in expected["x"].to_pylist() if v != v)}
    footer = pq.ParquetFile(tmp_path / "out.parquet")
    assert field_ids(footer.schema_arrow) == ["1", "2", "3"]
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
    got = read_file(table.metadata, table, written)
    assert values(got) == values(expected)
    assert got.column_names == ["id", "label", "f", "d", "extra"]
    assert got["f"].to_pylist() == [1.5, -2.25, 0.1]  # float -> double: the float's value
    assert field_ids(pq.read_schema(tmp_path / "out.parquet")) == ["1", "2", "3", "4", "6"]


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
    first = new_data_location(table.metadata, spec_id=0, partition=Record("b"))
    assert first.startswith(f"{table.location()}/data/cat=b/00000-0-")
    assert first != new_data_location(table.metadata, spec_id=0, partition=Record("b"))
    assert new_data_location(table.metadata, spec_id=1, partition=Record()).startswith(
        f"{table.location()}/data/00000-0-"
    )
    assert values(read_file(table.metadata, table, written)) == values(_expected(table, sources))


@pytest.mark.filterwarnings("ignore:Parquet writer option:UserWarning")  # pyiceberg's append
def test_metrics_modes_and_parquet_properties(catalog: SqlCatalog, tmp_path: Path) -> None:
    properties = {
        "write.metadata.metrics.default": "counts",
        "write.metadata.metrics.column.cat": "truncate(1)",
        "write.metadata.metrics.column.id": "full",
        "write.parquet.compression-codec": "snappy",
        "write.parquet.bloom-filter-enabled.column.cat": "true",
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
    blooms = [footer.row_group(0).column(i).bloom_filter_length for i in range(3)]
    assert blooms[0] is None and 0 < blooms[1] <= 1024 * 1024 and blooms[2] is None


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
    assert values(read_file(table.metadata, table, written)) == values(_expected(table, sources))


@pytest.mark.filterwarnings("ignore:Parquet writer option:UserWarning")  # pyiceberg's append
@pytest.mark.parametrize("limit", [None, 1024])
def test_dictionary_pages_follow_dict_size_bytes_else_pyarrows_default(
    catalog: SqlCatalog, tmp_path: Path, limit: int | None
) -> None:
    """`write.parquet.dict-size-bytes` bounds the dictionary page; unset, pyarrow's 1 MiB
    (parquet_output.DICTIONARY_LIMIT, not Java's 2 MiB) holds the whole dictionary of
    ROWS distinct ids. Uncompressed, so the page's bytes are the dictionary's."""
    properties = {"write.parquet.compression-codec": "uncompressed"}
    if limit is not None:
        properties["write.parquet.dict-size-bytes"] = str(limit)
    table = catalog.create_table("ns.t", ROWS_SCHEMA, properties=properties)
    table.append(_rows(0, ROWS))
    sources = _sources(table, {0: [3]})
    written = _rewrite(table, sources, tmp_path / "out.parquet")
    assert values(read_file(table.metadata, table, written)) == values(_expected(table, sources))
    assert ParquetSettings.of(properties).dictionary_size == (limit or DICTIONARY_LIMIT)
    assert DICTIONARY_LIMIT == 1024 * 1024
    ids = pq.ParquetFile(tmp_path / "out.parquet").metadata.row_group(0).column(0)
    dictionary_bytes = ids.data_page_offset - ids.dictionary_page_offset
    if limit is None:
        assert dictionary_bytes >= 8 * (ROWS - 1)  # every id in the dictionary
    else:
        # pyarrow checks the limit once per write batch (1,024 values): one batch past it
        assert dictionary_bytes <= limit + 8 * 1024 < 8 * (ROWS - 1)


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


@pytest.mark.parametrize(
    ("properties", "error"),
    [
        ({"write.parquet.compression-codec": "lzo"}, UnsupportedFeatureError),
        ({"write.parquet.row-group-size-bytes": "big"}, WriteRefusedError),
        ({"write.metadata.metrics.default": "truncate(0)"}, WriteRefusedError),
        ({"write.format.default": "orc"}, UnsupportedFeatureError),
    ],
)
def test_properties_dvtool_cannot_honour_are_refused_before_writing(
    catalog: SqlCatalog, tmp_path: Path, properties: dict[str, str], error: type[Exception]
) -> None:
    table = catalog.create_table("ns.t", ROWS_SCHEMA)
    table.append(_rows(0, 10))
    metadata = table.metadata.model_copy(update={"properties": properties})
    out = tmp_path / "out.parquet"
    with pytest.raises(error, match=next(iter(properties))):
        _rewrite(table, _sources(table), out, metadata=metadata)
    assert not out.exists()


def test_a_source_whose_rows_all_go_is_not_read(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = catalog.create_table("ns.t", ROWS_SCHEMA)
    table.append(_rows(0, 10))
    table.append(_rows(10, 20))
    first, second = _sources(table, {0: list(range(10))})
    Path(first.data_file.file_path.removeprefix("file://")).unlink()
    written = _rewrite(table, [first, second], tmp_path / "out.parquet")
    assert values(read_file(table.metadata, table, written)) == values(_rows(10, 20))


PRIMITIVES = Schema(
    NestedField(1, "b", BooleanType()),
    NestedField(2, "i", IntegerType()),
    NestedField(3, "l", LongType()),
    NestedField(4, "f", FloatType()),
    NestedField(5, "d", DoubleType()),
    NestedField(6, "dec", DecimalType(20, 3)),
    NestedField(7, "date", DateType()),
    NestedField(8, "t", TimeType()),
    NestedField(9, "ts", TimestampType()),
    NestedField(10, "tz", TimestamptzType()),
    NestedField(11, "s", StringType()),
    NestedField(12, "u", UUIDType()),
    NestedField(13, "fx", FixedType(3)),
    NestedField(14, "bin", BinaryType()),
)


def test_every_primitive_type_with_pyiceberg_metrics(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = catalog.create_table("ns.t", PRIMITIVES)
    arrow = table.schema().as_arrow()
    row = {
        "b": True,
        "i": -1,
        "l": 2**40,
        "f": 1.5,
        "d": float("nan"),
        "dec": decimal.Decimal("-12345678901234567.123"),
        "date": dt.date(1, 1, 1),
        "t": dt.time(23, 59, 59, 999999),
        "ts": dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
        "tz": dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc),
        "s": "ü" * 20,
        "u": uuid.UUID(int=5),
        "fx": b"abc",
        "bin": b"\x00\xff",
    }
    table.append(pa.Table.from_pylist([row, dict.fromkeys(row), {**row, "b": False}], schema=arrow))
    sources = _sources(table, {0: [0]})
    written = _rewrite(table, sources, tmp_path / "out.parquet")
    expected = _expected(table, sources)
    assert values(read_file(table.metadata, table, written)) == values(expected)
    reference = catalog.create_table("ns.reference", table.schema())
    reference.append(expected)
    (theirs,) = [f for f, _ in _entries(reference)]
    assert _stats(written) == _stats(theirs)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"file_format": FileFormat.ORC}, "is a ORC data file"),
        ({"key_metadata": b"k"}, "encrypted"),
    ],
)
def test_data_files_dvtool_cannot_read_are_refused(
    catalog: SqlCatalog, tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    table = catalog.create_table("ns.t", ROWS_SCHEMA)
    table.append(_rows(0, 10))
    (source,) = _sources(table)
    record = DataFile.from_args(**{**_args(source.data_file), **change})
    record.spec_id = 0
    out = tmp_path / "out.parquet"
    with pytest.raises(UnsupportedFeatureError, match=message):
        _rewrite(table, [RewriteSource(record, BitMap64(), 1)], out)
    assert not out.exists()


def _bucket(value: int) -> int:
    return BucketTransform(4).transform(LongType())(value)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("transform", "source", "value", "fits"),
    [
        (IdentityTransform(), 2, "a", lambda r: r["cat"] == "a"),
        (BucketTransform(4), 1, _bucket(3), lambda r: _bucket(r["id"]) == _bucket(3)),
        (TruncateTransform(10), 1, 20, lambda r: 20 <= r["id"] < 30),
    ],
)
def test_rows_of_another_spec_are_written_only_into_their_partition(
    catalog: SqlCatalog,
    tmp_path: Path,
    transform: Any,
    source: int,
    value: Any,
    fits: Any,
) -> None:
    """Compaction across a spec change: an unpartitioned file's rows go into a file of the
    new spec only if each row's partition is that file's (readers skip files by it)."""
    table = catalog.create_table("ns.t", ICEBERG_ROWS)
    rows = _rows(0, 60)
    inside = pa.Table.from_pylist([r for r in rows.to_pylist() if fits(r)], schema=ROWS_SCHEMA)
    table.append(inside)
    table.append(rows)
    with table.update_spec() as update:
        update.add_field(ICEBERG_ROWS.find_column_name(source), transform, "p")
    table = catalog.load_table("ns.t")
    fitting, mixed = _sources(table)
    out = tmp_path / "out.parquet"
    written = _rewrite(table, [fitting], out, spec_id=1, partition=Record(value))
    assert written.spec_id == 1 and written.record_count == inside.num_rows
    out.unlink()
    with pytest.raises(WriteRefusedError, match="belongs to p="):
        _rewrite(table, [fitting, mixed], out, spec_id=1, partition=Record(value))
    assert not out.exists()
