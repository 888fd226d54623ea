"""Writing one rewritten Iceberg data file from a plan made on the driver: pyarrow and numpy only.

Every Iceberg data file rewrite (MERGE, compaction, copy-on-write delete) writes its new file
here, in the driver's process (the arrow engine) or on Spark executors, whose stock Python
has pyarrow, pandas and numpy and none of pyiceberg, pyroaring or fsspec. So this module
imports pyarrow, numpy, the standard library and dvtool's stock-safe modules only
(tests/iceberg/test_rewrite_job.py runs it where the others cannot be imported), and all
that needs pyiceberg is decided on the driver (`dvtool.iceberg.data_file_rewrite.FilePlanner`)
and arrives as plain data:

- `WriterSpec` (one per table and job): the output's arrow schema (Iceberg field ids in
  `PARQUET:field_id`, names as Iceberg Java writes them), the table's Parquet settings and
  Bloom filters, the `iceberg.schema` footer value, the float columns whose NaNs are counted;
- `FilePlan` (one per new file): its location and its sources in order, each a
  `SourcePlan`: the range of the file's row positions it takes (all of them, or a part of
  a file a compaction splits over several new files), the positions to drop (portable
  Roaring bytes, decoded with `dvtool.deletion_vectors.roaring`), the projection of its
  columns onto the write schema (`dvtool.iceberg.column_plan`), its row lineage inputs (v3)
  and, for a source of another partition than the new file's, the partition columns whose
  values the driver checks (`Probe`).

`write_file` streams each source a row group at a time (skipping the row groups outside its
range), leaves out its dropped positions, projects the rest, fills in row lineage
(`_row_id` = `first_row_id + position` where the file holds none,
`_last_updated_sequence_number` = the source's data sequence number), and writes one Parquet
file a row group at a time (`ParquetOutput`). It returns `NewFile`: the location, row count,
size, the serialized Parquet footer (from which the driver computes the Iceberg metrics with
pyiceberg, as for any file it wrote itself), the NaN counts and the probed partition values.
A file it fails to finish is deleted before the error is raised.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dvtool.arrays import arrow_values
from dvtool.data_files.reading import parquet_file
from dvtool.deletion_vectors import roaring
from dvtool.errors import DataFileError
from dvtool.iceberg.column_plan import ColumnPlan, project
from dvtool.iceberg.data_file_io import read_errors
from dvtool.iceberg.parquet_settings import ParquetSettings
from dvtool.storage.failures import backend_errors

ROW_ID_NAME = "_row_id"
SEQUENCE_NAME = "_last_updated_sequence_number"
_BATCH_ROWS = 64 * 1024


@dataclass(frozen=True)
class WriterSpec:
    """How the new files of a table are written (module docstring)."""

    schema: pa.Schema
    parquet: ParquetSettings
    bloom_filters: Mapping[str, Mapping[str, float]]
    iceberg_schema: str
    nan_columns: tuple[tuple[int, int], ...]
    lineage: bool


@dataclass(frozen=True)
class Probe:
    """A partition field's source column to report for a source of another partition:
    `path` its struct positions in the output, `integers` the integer type its values are
    read as (dates, times, timestamps), `ordered` whether its least and greatest values
    decide (order-preserving transforms), else every distinct value does."""

    path: tuple[int, ...]
    integers: pa.DataType | None
    ordered: bool


@dataclass(frozen=True)
class SourcePlan:
    """One source of a new file (module docstring): its rows at positions `start` to
    `stop` (exclusive; None: the file's end). `footer` is the file's Parquet footer when the
    driver read it in this process (not pickled: executors read it again)."""

    path: str
    record_count: int
    drop: bytes
    columns: ColumnPlan
    data_sequence_number: int
    first_row_id: int | None
    probes: tuple[Probe, ...] = ()
    start: int = 0
    stop: int | None = None
    footer: Any = field(default=None, compare=False, repr=False)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (
            SourcePlan,
            (
                self.path,
                self.record_count,
                self.drop,
                self.columns,
                self.data_sequence_number,
                self.first_row_id,
                self.probes,
                self.start,
                self.stop,
            ),
        )


@dataclass(frozen=True)
class FilePlan:
    """One new file: its location and its sources, in order."""

    location: str
    sources: tuple[SourcePlan, ...]


@dataclass(frozen=True)
class NewFile:
    """What `write_file` wrote (module docstring): `probed` holds, per source, per probe,
    the values the driver checks."""

    location: str
    record_count: int
    file_size: int
    footer: bytes
    nan_counts: Mapping[int, int]
    probed: tuple[tuple[tuple[Any, ...], ...], ...]


class CountingStream:
    """The file-like object pyarrow writes to: the output stream's `write`, with the bytes
    counted (the file's size) and one close of the stream (which finishes an upload)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.size = 0
        self.closed = False

    def write(self, data: Any) -> int:
        """Write `data` (bytes or a buffer pyarrow hands over) to the stream."""
        size = memoryview(data).nbytes
        self._stream.write(data)
        self.size += size
        return size

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        """Nothing: the stream is flushed when closed."""

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._stream.close()


class ParquetOutput:
    """One Parquet file of `spec.schema` written to `stream` a row group at a time
    (batches are buffered until a row group is full, by rows or by Arrow's in-memory bytes,
    at least the encoded size); `finish` closes it and returns its footer."""

    def __init__(self, stream: CountingStream, spec: WriterSpec) -> None:
        self.spec = spec
        self._stream = stream
        self.nans = {field_id: 0 for _, field_id in spec.nan_columns}
        self.rows_written = 0
        self._pending: list[pa.RecordBatch] = []
        self._rows = 0
        self._bytes = 0
        self._writer = pq.ParquetWriter(
            stream,
            spec.schema,
            compression=spec.parquet.compression,
            compression_level=spec.parquet.compression_level,
            data_page_size=spec.parquet.page_size,
            max_rows_per_page=spec.parquet.page_rows,
            dictionary_pagesize_limit=spec.parquet.dictionary_size,
            store_decimal_as_integer=True,
            store_schema=False,
            bloom_filter_options={k: dict(v) for k, v in spec.bloom_filters.items()} or None,
        )

    def write(self, batch: pa.RecordBatch) -> None:
        """Add `batch` (of `spec.schema`) to the file, writing every row group that fills."""
        for index, field_id in self.spec.nan_columns:
            self.nans[field_id] += pc.sum(pc.is_nan(batch.column(index))).as_py() or 0
        self.rows_written += batch.num_rows
        while batch.num_rows:
            room = self.spec.parquet.row_group_rows - self._rows
            head, batch = batch.slice(0, room), batch.slice(room)
            self._pending.append(head)
            self._rows += head.num_rows
            self._bytes += head.nbytes
            full = self._rows >= self.spec.parquet.row_group_rows
            if full or self._bytes >= self.spec.parquet.row_group_bytes:
                self._flush()

    def _flush(self) -> None:
        if self._pending:
            table = pa.Table.from_batches(self._pending, schema=self.spec.schema)
            self._writer.write_table(table, row_group_size=max(self._rows, 1))
        self._pending, self._rows, self._bytes = [], 0, 0

    def finish(self) -> bytes:
        """Close the file (the last row group, the footer, the stream); its footer's bytes."""
        self._flush()
        self._writer.add_key_value_metadata({"iceberg.schema": self.spec.iceberg_schema})
        self._writer.close()
        self._stream.close()
        out = pa.BufferOutputStream()
        self._writer.writer.metadata.write_metadata_file(out)
        return bytes(out.getvalue().to_pybytes())

    def abort(self) -> None:
        """Stop writing after a failure: the writer and the stream closed, errors ignored
        (the caller removes the partial file)."""
        for close in (self._writer.close, self._stream.close):
            with contextlib.suppress(Exception):  # the first failure is the one reported
                close()


def write_file(io: Any, spec: WriterSpec, plan: FilePlan) -> NewFile:
    """Write `plan`'s new file (which must not exist) through `io` (a FileIO: module
    docstring of `dvtool.iceberg.data_file_io`); deleted again if this fails."""
    location = plan.location
    with backend_errors(location, "create", missing=False):
        stream = CountingStream(io.new_output(location).create(overwrite=False))
    output: ParquetOutput | None = None
    try:
        with backend_errors(location, "write", missing=False):
            output = ParquetOutput(stream, spec)
            probed = tuple(_write_source(io, spec, source, output) for source in plan.sources)
            footer = output.finish()
    except BaseException:
        if output is not None:
            output.abort()
        else:
            with contextlib.suppress(Exception):
                stream.close()
        with contextlib.suppress(Exception):
            io.delete(location)
        raise
    return NewFile(location, output.rows_written, stream.size, footer, dict(output.nans), probed)


def _write_source(
    io: Any, spec: WriterSpec, source: SourcePlan, output: ParquetOutput
) -> tuple[tuple[Any, ...], ...]:
    """Write the rows `source` keeps; the values of its probes."""
    values: list[list[Any]] = [[] for _ in source.probes]
    for batch in source_batches(io, spec, source):
        for probe, seen in zip(source.probes, values, strict=True):
            _merge(seen, probe_values(batch, probe), probe.ordered)
        output.write(batch)
    return tuple(tuple(v) for v in values)


def source_batches(io: Any, spec: WriterSpec, source: SourcePlan) -> Iterator[pa.RecordBatch]:
    """The rows of `source`'s range not dropped, in order, as record batches of
    `spec.schema`, with their row lineage filled in (module docstring)."""
    path = source.path
    drop = roaring.decode64(source.drop) if source.drop else np.empty(0, np.uint64)
    stop = source.record_count if source.stop is None else source.stop
    with read_errors(path), io.new_input(path).open(seekable=True) as stream:
        parquet = parquet_file(stream, source.footer)
        check_row_count(path, parquet.metadata.num_rows, source.record_count)
        for first, raw in _batches(parquet, list(source.columns.read), source.start, stop):
            keep = _keep_mask(drop, first, raw.num_rows)
            selected = raw if keep is None else raw.filter(arrow_values.from_numpy(keep))
            if selected.num_rows == 0:
                continue
            batch = project(selected, source.columns, path)
            if spec.lineage:
                positions = np.arange(raw.num_rows) if keep is None else np.flatnonzero(keep)
                batch = _with_lineage(batch, source, positions + first)
            yield batch


def check_row_count(path: str, rows: int, record_count: int) -> None:
    """A file whose footer and manifest entry disagree on its rows has positions no delete
    can be trusted for: never rewritten."""
    if rows != record_count:
        raise DataFileError(
            f"{path} holds {rows} rows, its manifest entry says {record_count}",
            hint="The table is damaged: `dvtool inspect TABLE --verify` lists such files.",
        )


def _batches(
    parquet: Any, columns: list[str], start: int, stop: int
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """The record batches of `columns` of the file's rows at positions `start` to `stop`
    (exclusive), each with the position of its first row, read one row group at a time
    (pyarrow's reader over a whole file holds all of it; row groups outside the range are
    not read); a file with none of the columns gives batches of no columns."""
    position = 0
    for index in range(parquet.metadata.num_row_groups):
        rows = parquet.metadata.row_group(index).num_rows
        if position + rows <= start or position >= stop:
            position += rows
            continue
        for batch in _row_group(parquet, index, rows, columns):
            lo, hi = max(start, position), min(stop, position + batch.num_rows)
            if lo < hi:
                yield lo, batch.slice(lo - position, hi - lo)
            position += batch.num_rows
            if position >= stop:
                return


def _row_group(parquet: Any, index: int, rows: int, columns: list[str]) -> Iterator[pa.RecordBatch]:
    if not columns:
        yield pa.RecordBatch.from_struct_array(pa.nulls(rows, pa.struct([])))
        return
    yield from parquet.iter_batches(
        batch_size=_BATCH_ROWS, row_groups=[index], columns=columns, use_threads=True
    )


def _keep_mask(drop: np.ndarray, start: int, count: int) -> np.ndarray | None:
    """Which rows of a batch of the file's rows start..start+count-1 `drop` (sorted
    positions) keeps, as a boolean mask; None when it keeps them all."""
    lo, hi = np.searchsorted(drop, [start, start + count])
    if lo == hi:
        return None
    mask = np.ones(count, dtype=np.bool_)
    mask[(drop[lo:hi] - np.uint64(start)).astype(np.int64)] = False
    return mask


def _with_lineage(
    batch: pa.RecordBatch, source: SourcePlan, positions: np.ndarray
) -> pa.RecordBatch:
    """`batch` with each row's `_row_id` and `_last_updated_sequence_number`: the file's
    value, else the inherited one (`first_row_id + position`, the data sequence number)."""
    if source.first_row_id is None:
        return batch
    names = batch.schema.names
    arrays = list(batch.columns)
    row_id = names.index(ROW_ID_NAME)
    sequence = names.index(SEQUENCE_NAME)
    inherited = arrow_values.from_numpy(positions.astype(np.int64) + source.first_row_id)
    arrays[row_id] = pc.coalesce(arrays[row_id], inherited)
    arrays[sequence] = pc.coalesce(
        arrays[sequence], arrow_values.scalar(source.data_sequence_number, pa.int64())
    )
    return pa.RecordBatch.from_arrays(arrays, schema=batch.schema)


def probe_values(batch: pa.RecordBatch, probe: Probe) -> list[Any]:
    """The values of the probed column whose partition decides the batch's: all distinct
    ones, or for an order-preserving transform the least and the greatest (and null if
    any)."""
    column = batch.column(probe.path[0])
    if len(probe.path) > 1:
        column = pc.struct_field(column, list(probe.path[1:]))
    if probe.integers is not None:
        column = column.cast(probe.integers)
    if probe.ordered:
        try:
            bounds = pc.min_max(column).as_py()
        except pa.ArrowNotImplementedError:  # no order for the type (uuid): every value
            return list(pc.unique(column).to_pylist())
        values = [v for v in (bounds["min"], bounds["max"]) if v is not None]
        return values + ([None] if column.null_count else [])
    return list(pc.unique(column).to_pylist())


def _merge(seen: list[Any], values: Sequence[Any], ordered: bool) -> None:
    """Add a batch's probed `values` to a source's: for an ordered probe only the least,
    the greatest and null are kept."""
    merged = list(dict.fromkeys([*seen, *values]))
    if ordered:
        present = [v for v in merged if v is not None]
        kept = [min(present), max(present)] if present else []
        merged = kept + ([None] if None in merged else [])
    seen[:] = merged


class RewriteJob:
    """Writes one new file per `FilePlan` through `io` with `spec`; picklable as plain data:
    `io` becomes what `dvtool.iceberg.rewrite_job.portable_io` makes of it (on the driver),
    which needs nothing but pyarrow on an executor."""

    def __init__(self, io: Any, spec: WriterSpec, locations: Sequence[str] = ()) -> None:
        self.io = io
        self.spec = spec
        self.locations = tuple(locations)

    def __call__(self, plan: FilePlan) -> NewFile:
        return write_file(self.io, self.spec, plan)

    def __reduce__(self) -> tuple[Any, tuple[Any, WriterSpec]]:
        from dvtool.iceberg.rewrite_job import portable_io  # the driver's side: pyiceberg

        return (RewriteJob, (portable_io(self.io, self.locations), self.spec))


__all__ = [
    "CountingStream",
    "FilePlan",
    "NewFile",
    "ParquetOutput",
    "Probe",
    "RewriteJob",
    "SourcePlan",
    "WriterSpec",
    "check_row_count",
    "probe_values",
    "source_batches",
    "write_file",
]
