"""Rewriting data files: one bin of input files in, one new data file out.

Both engines run `write_bin` (Spark on its executors), so this module needs only pyarrow and
dvtool's own modules. For each input it streams the file's batches (INT96 timestamps read as
microseconds, `dvtool.data_files.reading`), conforms them exactly to the table's current
physical schema (`dvtool.delta.protocol.file_schema`: field ids, other writers' arrow types, type
widening; a value the table's type cannot hold is an `UnrepresentableValueError`, never a
changed value), computes the preserved stable row IDs and commit versions where row
tracking is enabled, takes the rows its DV keeps (bitmap operations on the batch's row range,
then one `take`), adds the partition columns where the table materializes them, and writes
the result with `write_data_file`: the codec the table names, else the first input's. The
arrow engine passes a `BackgroundSync` so that the fsyncs of local files do not stall its
writer threads (it waits for them before returning the files); Spark executors pass none,
and each file is durable when its task reports it.

The new file's columns: the data columns in schema order, then the materialized partition
columns, then row tracking's hidden columns. Statistics cover the data columns as Delta's
stats columns select them, widened to the clustering columns; variant columns get nullCount
only and keep the layout (shredded or not) of the input that holds them.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dvtool.arrays import arrow_values
from dvtool.data_files import (
    BackgroundSync,
    WrittenFile,
    iter_file_batches,
    open_parquet_file,
    write_data_file,
)
from dvtool.delta.protocol.arrow_types import arrow_schema, delta_to_arrow_type
from dvtool.delta.protocol.file_layout import FOOTER_CODECS
from dvtool.delta.protocol.file_schema import FIELD_ID, ColumnPlan
from dvtool.delta.protocol.partitions import partition_arrays
from dvtool.delta.protocol.stats_collect import (
    StatsCollector,
    stats_columns_spec,
    with_required_columns,
)
from dvtool.engines.base import RewriteBin, RewriteInput, TableLayout

_ROW_BASE = arrow_values.from_numpy(np.arange(1 << 16, dtype=np.int64))
_NO_ROWS = np.empty(0, dtype=np.uint64)


@dataclass(frozen=True)
class _Columns:
    """The columns of the files a table's rewrites write, and what fills them."""

    data: pa.Schema  # table data columns, physical names, current types
    partitions: tuple[tuple[pa.Field, str], ...]  # (field, Delta type) when materialized
    hidden: tuple[pa.Field, ...]  # row id, row commit version

    @classmethod
    def of(cls, table: TableLayout) -> _Columns:
        mode = table.column_mapping_mode
        data = arrow_schema(table.schema, mode, table.partition_columns)
        partitions: list[tuple[pa.Field, str]] = []
        if table.materialize_partitions:
            for name in table.partition_columns:
                f = table.schema.get(name)
                if f is not None and isinstance(f.type, str):
                    # A materialized partition column is a file column like any other: under
                    # column mapping it carries its id as parquet field id (PROTOCOL.md
                    # "Writer Requirements for Column Mapping"; Iceberg readers of
                    # IcebergCompat tables resolve it by id). It used to be written without.
                    field_id = f.field_id if mode in ("id", "name") else None
                    metadata = None if field_id is None else {FIELD_ID: str(field_id).encode()}
                    arrow_field = pa.field(
                        f.physical_name(mode), delta_to_arrow_type(f.type), metadata=metadata
                    )
                    partitions.append((arrow_field, f.type))
        hidden: tuple[pa.Field, ...] = ()
        if table.row_tracking is not None:
            hidden = (
                pa.field(table.row_tracking.row_id, pa.int64()),
                pa.field(table.row_tracking.commit_version, pa.int64()),
            )
        return cls(data, tuple(partitions), hidden)

    @property
    def read_targets(self) -> list[pa.Field]:
        """What is read from an input file: data columns, then the hidden columns."""
        return [*self.data, *self.hidden]


def write_bin(
    table: TableLayout,
    configuration: Mapping[str, str],
    rewrite_bin: RewriteBin,
    sync: BackgroundSync | None = None,
) -> WrittenFile | None:
    """Write the rows the inputs of `rewrite_bin` keep as one new file; None if none remain.

    The file is durable on return, unless `sync` is given: the caller then waits for it
    before the file may be committed (`write_data_file`).
    """
    columns = _Columns.of(table)
    codec = table.codec
    # The first input's codec, noted when it is opened for its rows (not opened twice).
    first_codec: list[str] = [] if codec is None else [codec]
    batches = (
        batch
        for source in rewrite_bin.inputs
        for batch in _kept_batches(
            table, columns, source, rewrite_bin.partition_values, first_codec
        )
        if batch.num_rows
    )
    first = next(batches, None)
    if first is None:
        return None
    if codec is None:
        # Inputs are opened in order: the first one's codec is noted by now.
        codec = first_codec[0] if first_codec else input_codec(table, rewrite_bin.inputs[0])
    schema = first.schema
    spec = with_required_columns(
        stats_columns_spec(configuration, table.schema, table.column_mapping_mode),
        columns.data,
        table.clustering_columns,
    )
    stats_schema = pa.schema([schema.field(f.name) for f in columns.data])
    return write_data_file(
        table.storage,
        partition_dir=rewrite_bin.directory,
        batches=chain([first], batches),
        schema=schema,
        stats=StatsCollector(stats_schema, spec, opaque_columns=table.variant_columns),
        compression=codec,
        sync=sync,
    )


def input_codec(table: TableLayout, source: RewriteInput) -> str:
    """The codec of the first column chunk of `source` as pyarrow writes it (snappy when the
    file has no row group or a codec pyarrow cannot write)."""
    with open_parquet_file(table.storage, source.location) as parquet:
        return footer_codec(parquet.metadata)


def footer_codec(meta: pq.FileMetaData) -> str:
    """The codec of a file's first column chunk as pyarrow writes it (see `input_codec`)."""
    if meta.num_row_groups == 0 or meta.num_columns == 0:
        return "snappy"
    name = str(meta.row_group(0).column(0).compression).upper()
    return FOOTER_CODECS.get(name, "snappy")


def _kept_batches(
    table: TableLayout,
    columns: _Columns,
    source: RewriteInput,
    partition_values: Mapping[str, str | None],
    first_codec: list[str],
) -> Iterator[pa.RecordBatch]:
    """The rows of `source` its DV keeps, as the new file's columns; when `first_codec` is
    empty, the codec of `source` is put there as it is opened."""

    def note_codec(parquet: pq.ParquetFile) -> None:
        if not first_codec:
            first_codec.append(footer_codec(parquet.metadata))

    batches = conformed_batches(
        table, columns.read_targets, source, source.drop, keep=True, on_open=note_codec
    )
    for batch in batches:
        yield _complete(batch, columns, partition_values)


def conformed_batches(
    table: TableLayout,
    targets: list[pa.Field],
    source: RewriteInput,
    rows: np.ndarray | None,
    *,
    keep: bool,
    on_open: Callable[[pq.ParquetFile], object] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The batches of `source` as `targets`, without (keep=True) or with only (keep=False)
    the rows in `rows` (sorted uint64 row indexes); hidden row tracking columns, when
    targeted, hold the rows' stable values (the materialized one, else computed from the
    file's row tracking fields). `on_open` is called with the opened file first."""
    hidden = (
        {table.row_tracking.row_id, table.row_tracking.commit_version}
        if (table.row_tracking)
        else set()
    )
    with open_parquet_file(table.storage, source.location) as parquet:
        if on_open is not None:
            on_open(parquet)
        plan = ColumnPlan.of(
            parquet.schema_arrow,
            targets,
            table.column_mapping_mode,
            frozenset(hidden),
            location=source.location,
        )
        batches = iter_file_batches(
            table.storage, source.location, columns=plan.file_columns, parquet=parquet
        )
        for first_row, raw in batches:
            batch = plan.conform(raw)
            if table.row_tracking is not None:
                batch = _with_stable_row_tracking(batch, table, source, first_row)
            selected = _select_rows(batch, first_row, _NO_ROWS if rows is None else rows, keep=keep)
            if selected.num_rows:
                yield selected


def _with_stable_row_tracking(
    batch: pa.RecordBatch, table: TableLayout, source: RewriteInput, first_row: int
) -> pa.RecordBatch:
    """The hidden columns filled with each row's stable row ID and commit version
    (PROTOCOL.md "Reader Requirements for Row Tracking"): the materialized value where the
    file has one, else `baseRowId + row index` and `defaultRowCommitVersion`."""
    assert table.row_tracking is not None
    names = batch.schema.names
    row_id = names.index(table.row_tracking.row_id)
    version = names.index(table.row_tracking.commit_version)
    arrays = list(batch.columns)
    if source.base_row_id is not None:
        first_id = arrow_values.scalar(first_row + source.base_row_id, pa.int64())
        fresh = pc.add(_positions(batch.num_rows), first_id)
        arrays[row_id] = pc.coalesce(arrays[row_id], fresh)
    if source.default_row_commit_version is not None:
        default = arrow_values.scalar(source.default_row_commit_version, pa.int64())
        arrays[version] = pc.coalesce(arrays[version], default)
    return pa.RecordBatch.from_arrays(arrays, schema=batch.schema)


def _positions(count: int) -> pa.Array:
    """0..count-1 as int64, sliced from one cached array (no Python loop per row)."""
    global _ROW_BASE
    if count > len(_ROW_BASE):
        _ROW_BASE = arrow_values.from_numpy(np.arange(count, dtype=np.int64))
    return _ROW_BASE.slice(0, count)


def _complete(
    batch: pa.RecordBatch, columns: _Columns, partition_values: Mapping[str, str | None]
) -> pa.RecordBatch:
    """`batch` (data and hidden columns) with the materialized partition columns between."""
    if not columns.partitions:
        return batch
    data = len(columns.data)
    types = [(f.name, delta_type) for f, delta_type in columns.partitions]
    constants = partition_arrays(partition_values, types, batch.num_rows)
    arrays = [*batch.columns[:data], *constants.values(), *batch.columns[data:]]
    fields = [
        *list(batch.schema)[:data],
        *(f for f, _ in columns.partitions),
        *list(batch.schema)[data:],
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _select_rows(
    batch: pa.RecordBatch, first_row: int, rows: np.ndarray, *, keep: bool
) -> pa.RecordBatch:
    """The rows of `batch` (file rows first_row...) not in `rows` (keep) or only those in it.

    `rows` is sorted, so the batch's share of it is one slice found by binary search.
    """
    count = batch.num_rows
    lo, hi = np.searchsorted(rows, [first_row, first_row + count])
    hits = rows[lo:hi] - np.uint64(first_row)
    if len(hits) == 0:
        return batch if keep else batch.slice(0, 0)
    if len(hits) == count:
        return batch.slice(0, 0) if keep else batch
    if not keep:
        return batch.take(arrow_values.from_numpy(hits))
    mask = np.ones(count, dtype=np.bool_)
    mask[hits] = False
    return batch.filter(arrow_values.from_numpy(mask))


# -- change data -----------------------------------------------------------------------------


def write_change_data(
    table: TableLayout, add: Mapping[str, Any], rows: np.ndarray
) -> tuple[dict[str, Any], str]:
    """Write the rows `rows` of the data file of `add` to a `_change_data` file with
    `_change_type = 'delete'`; returns its `cdc` action and location.

    Change data files hold the table's data columns only (readers cannot read row tracking
    columns from them, PROTOCOL.md).
    """
    location = table.storage.resolve(str(add["path"]))
    relative = table.storage.relative_to_root(location) or ""
    directory = posixpath.dirname(relative)
    schema = arrow_schema(table.schema, table.column_mapping_mode, table.partition_columns)
    source = RewriteInput(str(add["path"]), location, None)
    batches = (
        batch.append_column(
            "_change_type", arrow_values.array(["delete"] * batch.num_rows, pa.string())
        )
        for batch in conformed_batches(table, list(schema), source, rows, keep=False)
    )
    first = next(batches, None)
    if first is None:
        raise ValueError(f"no rows to write as change data for {add['path']}")
    target = posixpath.join("_change_data", directory) if directory else "_change_data"
    written = write_data_file(
        table.storage,
        partition_dir=target,
        batches=chain([first], batches),
        schema=first.schema,
        stats=StatsCollector(first.schema, 0),
    )
    action = {
        "cdc": {
            "path": written.relative_path,
            "partitionValues": dict(add.get("partitionValues") or {}),
            "size": written.size,
            "dataChange": False,
        }
    }
    return action, written.location
