"""Parquet data files of a table, through the storage layer: footers, reading, writing.

- `footer_row_count`: the row count in a footer.
- `iter_file_batches`: a file's record batches row group by row group, each with the index
  of its first row in the file (so callers know physical row indexes, as DVs need).
- `row_group_stats`: per row group min/max/null counts from the footer.
- `write_data_file`: stream record batches into a new, uniquely named parquet file under a
  partition directory, collecting Delta statistics on the way; returns what an `add` needs.
  Files are written through Arrow's native file streams (not a Python file object, whose
  writes would take the GIL per page), and the min/max the footer holds exactly are taken
  from the footer instead of being computed batch by batch (see `StatsCollector.defer_bounds`).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from dvtool.core import arrow_values
from dvtool.core.stats_collect import StatsCollector, stats_json
from dvtool.errors import DataFileError, DvtoolError, FileMissingError, StorageError
from dvtool.storage.locations import encode_for_log

if TYPE_CHECKING:
    from dvtool.storage.data_file_storage import DataFileStorage

__all__ = [
    "RowGroupStats",
    "WrittenFile",
    "data_file_name",
    "footer_row_count",
    "iter_file_batches",
    "row_group_stats",
    "write_data_file",
]

DEFAULT_ROW_GROUP_ROWS = 1_048_576
DEFAULT_ROW_GROUP_BYTES = 128 * 2**20
# Remote files up to this size are written with one `write`; larger ones are
# streamed from a local temp file (memory stays bounded either way).
WHOLE_WRITE_LIMIT = 64 * 2**20
_COPY_CHUNK = 8 * 2**20

# Spark's file name extensions per parquet codec.
_CODEC_EXTENSIONS = {
    "snappy": ".snappy",
    "gzip": ".gz",
    "zstd": ".zstd",
    "lz4": ".lz4",
    "brotli": ".br",
    "none": "",
    "uncompressed": "",
}


@dataclass(frozen=True)
class WrittenFile:
    """A data file `write_data_file` wrote: what its `add` action needs."""

    relative_path: str  # as stored in the log: relative to the root, URI-encoded
    location: str
    size: int
    num_records: int
    stats_json: str
    modification_time_ms: int

    def add_action(
        self,
        partition_values: Mapping[str, str | None],
        *,
        data_change: bool,
        clustering_provider: str | None = None,
    ) -> dict[str, Any]:
        """The `add` action of this file, in the partition (and clustering) of its inputs."""
        body: dict[str, Any] = {
            "path": self.relative_path,
            "partitionValues": dict(partition_values),
            "size": self.size,
            "modificationTime": self.modification_time_ms,
            "dataChange": data_change,
            "stats": self.stats_json,
        }
        if clustering_provider:
            body["clusteringProvider"] = clustering_provider
        return {"add": body}


@dataclass(frozen=True)
class RowGroupStats:
    """Footer statistics of one row group, keyed by physical dotted column path."""

    index: int
    first_row: int
    num_rows: int
    min: dict[str, Any] = field(default_factory=dict)
    max: dict[str, Any] = field(default_factory=dict)
    null_count: dict[str, int] = field(default_factory=dict)


def footer_row_count(storage: DataFileStorage, location: str) -> int:
    """The row count in a parquet file's footer (reads the footer only)."""
    try:
        with storage.open_parquet(location) as source:
            return int(pq.ParquetFile(source).metadata.num_rows)
    except FileMissingError:
        raise
    except (OSError, pa.ArrowException) as e:
        raise StorageError(f"cannot read the parquet footer of {location}: {e}") from e


def footer_column_types(
    storage: DataFileStorage, location: str, names: Iterable[str]
) -> tuple[str, ...]:
    """The arrow types, as text, that a parquet file's footer gives the top-level columns
    `names` ("" for a column the file lacks); reads the footer only."""
    try:
        with storage.open_parquet(location) as source:
            schema = pq.ParquetFile(source).schema_arrow
    except FileMissingError:
        raise
    except (OSError, pa.ArrowException) as e:
        raise StorageError(f"cannot read the parquet footer of {location}: {e}") from e
    return tuple(str(schema.field(name).type) if name in schema.names else "" for name in names)


# Reading


@contextlib.contextmanager
def open_parquet_file(storage: DataFileStorage, location: str) -> Iterator[pq.ParquetFile]:
    """One open parquet file (footer read once) for `row_group_stats` and `iter_file_batches`."""
    try:
        with storage.open_parquet(location) as source:
            yield pq.ParquetFile(source)
    except DvtoolError:
        raise
    except (OSError, pa.ArrowException) as e:
        raise parquet_read_error(location, e) from e


def parquet_read_error(location: str, error: Exception) -> DvtoolError:
    """The error for a parquet file that cannot be read: a storage failure (I/O) or a file
    that is not valid parquet (`DataFileError`, the table's integrity)."""
    message = f"cannot read the parquet file {location}: {error}"
    if isinstance(error, OSError) and not isinstance(error, pa.ArrowException):
        return StorageError(message)
    return DataFileError(
        message, hint="Restore the file, or check it with dvtool inspect --verify."
    )


def iter_file_batches(
    storage: DataFileStorage,
    location: str,
    columns: list[str] | None = None,
    batch_size: int = 65536,
    row_groups: list[int] | None = None,
    parquet: pq.ParquetFile | None = None,
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """`(index of the batch's first row in the file, batch)`, row group by row group.

    `columns` are physical column names (dotted paths select nested fields, as pyarrow
    does); None reads all. `row_groups` restricts the read to those row groups (in the order
    given); row indexes stay those of the whole file. `parquet` is the file already opened
    with `open_parquet_file` (else it is opened here and closed when the iterator ends).
    """
    if parquet is None:
        with open_parquet_file(storage, location) as opened:
            yield from _batches(opened, location, columns, batch_size, row_groups)
        return
    try:
        yield from _batches(parquet, location, columns, batch_size, row_groups)
    except DvtoolError:
        raise
    except (OSError, pa.ArrowException) as e:
        raise parquet_read_error(location, e) from e


def _batches(
    parquet: pq.ParquetFile,
    location: str,
    columns: list[str] | None,
    batch_size: int,
    row_groups: list[int] | None,
) -> Iterator[tuple[int, pa.RecordBatch]]:
    meta = parquet.metadata
    starts = _row_group_starts(meta)
    wanted = range(meta.num_row_groups) if row_groups is None else row_groups
    for rg in wanted:
        if not 0 <= rg < meta.num_row_groups:
            raise StorageError(
                f"{location} has {meta.num_row_groups} row groups; no row group {rg}"
            )
        row = starts[rg]
        for batch in parquet.iter_batches(batch_size=batch_size, row_groups=[rg], columns=columns):
            yield row, batch
            row += batch.num_rows


def row_group_stats(
    storage: DataFileStorage, location: str, parquet: pq.ParquetFile | None = None
) -> list[RowGroupStats]:
    """Min, max and null count per column of each row group, from the footer.

    Keys are dotted physical column paths as in the parquet schema (`a`, `s.x`, and
    `l.list.element` inside lists). Values are python values typed by the column's logical
    type (int, float, str, bytes, bool, Decimal, date, datetime). A column without
    statistics is left out of `null_count`; one without valid min/max (or with a NaN bound)
    is left out of `min` and `max`.
    """
    if parquet is None:
        with open_parquet_file(storage, location) as opened:
            meta = opened.metadata
    else:
        meta = parquet.metadata
    starts = _row_group_starts(meta)
    timestamps = _timestamp_types(meta)
    out = []
    for rg in range(meta.num_row_groups):
        group = meta.row_group(rg)
        minimum: dict[str, Any] = {}
        maximum: dict[str, Any] = {}
        nulls: dict[str, int] = {}
        for c in range(group.num_columns):
            chunk = group.column(c)
            stats = chunk.statistics
            if stats is None:
                continue
            path = chunk.path_in_schema
            if stats.has_null_count:
                nulls[path] = int(stats.null_count)
            if not stats.has_min_max:
                continue
            try:
                low, high = _min_max(stats, timestamps.get(c))
            except (ValueError, pa.ArrowException):
                continue  # a logical type pyarrow cannot convert
            if low is None or high is None or _is_nan(low) or _is_nan(high):
                continue
            minimum[path] = low
            maximum[path] = high
        out.append(RowGroupStats(rg, starts[rg], group.num_rows, minimum, maximum, nulls))
    return out


def _timestamp_types(meta: pq.FileMetaData) -> dict[int, pa.DataType]:
    """The arrow types pyarrow gives the statistics of the INT64 timestamp leaf columns, by
    leaf index: zone "UTC" when the values are adjusted to UTC, none otherwise."""
    out = {}
    for index in range(meta.num_columns):
        column = meta.schema.column(index)
        unit = _timestamp_unit(column)
        if unit:
            utc = json.loads(column.logical_type.to_json()).get("isAdjustedToUTC")
            out[index] = pa.timestamp(unit, "UTC" if utc else None)
    return out


def _min_max(stats: pq.Statistics, timestamp: pa.DataType | None) -> tuple[Any, Any]:
    """`stats.min, stats.max`, but INT64 timestamps converted from their raw values here:
    pyarrow imports pandas to convert those with a zone or in nanoseconds (see
    `arrow_values.as_py`). Nanoseconds are widened to the enclosing microseconds, which
    still bound the values (pyarrow gives a pandas Timestamp, or fails without pandas)."""
    if timestamp is None:
        return stats.min, stats.max
    low, high = stats.min_raw, stats.max_raw
    if timestamp.unit == "ns":
        timestamp = pa.timestamp("us", timestamp.tz)
        low, high = low // 1000, -(-high // 1000)
    as_py = arrow_values.as_py
    return as_py(arrow_values.scalar(low, timestamp)), as_py(arrow_values.scalar(high, timestamp))


def _row_group_starts(meta: pq.FileMetaData) -> list[int]:
    starts, row = [], 0
    for rg in range(meta.num_row_groups):
        starts.append(row)
        row += meta.row_group(rg).num_rows
    return starts


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and value != value


# Writing


def data_file_name(compression: str = "snappy") -> str:
    """A new unique data file name like Delta Spark's: `part-00000-<uuid4>-c000.snappy.parquet`."""
    extension = _CODEC_EXTENSIONS.get(compression.lower(), f".{compression.lower()}")
    return f"part-00000-{uuid.uuid4()}-c000{extension}.parquet"


def write_data_file(
    storage: DataFileStorage,
    *,
    partition_dir: str,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    stats: StatsCollector,
    compression: str = "snappy",
    row_group_size: int = DEFAULT_ROW_GROUP_ROWS,
    row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
    tight_bounds: bool | None = True,
) -> WrittenFile:
    """Write `batches` as one new parquet file under `partition_dir` (`""`: the root).

    Batches are cast to `schema` (physical names, field ids in its field metadata) and
    buffered into row groups of up to `row_group_size` rows or `row_group_bytes` bytes;
    `stats` sees every batch. The file goes to a temp file first, so memory stays bounded:
    on local disk a temp file beside the target, fsynced and renamed into place; elsewhere
    a local temp file, then one `write` (up to 64 MiB) or a streamed upload, which
    object stores publish only when complete. Nothing of a failed write is left behind.
    """
    name = data_file_name(compression)
    relative = f"{partition_dir.strip('/')}/{name}" if partition_dir.strip("/") else name
    location = storage.join(relative)
    codec = "none" if compression.lower() == "uncompressed" else compression
    try:
        if storage.protocol == "file":
            num_records = _write_local(
                location, batches, schema, stats, codec, row_group_size, row_group_bytes
            )
        else:
            num_records = _write_remote(
                storage, location, batches, schema, stats, codec, row_group_size, row_group_bytes
            )
    except DvtoolError:
        raise
    except OSError as e:  # arrow's IO errors are OSErrors; bad data stays a ValueError
        raise StorageError(f"cannot write the data file {location}: {e}") from e
    info = storage.info(location)
    if info is None:
        raise StorageError(f"the data file {location} is missing right after it was written")
    mtime = info.modification_time_ms
    return WrittenFile(
        relative_path=encode_for_log(relative),
        location=location,
        size=info.size,
        num_records=num_records,
        stats_json=stats_json(stats.result(tight_bounds)),
        modification_time_ms=mtime if mtime is not None else int(time.time() * 1000),
    )


def _write_parquet(
    sink: Any,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    stats: StatsCollector,
    codec: str,
    row_group_size: int,
    row_group_bytes: int,
) -> int:
    """Stream `batches` into `sink` as parquet; returns the number of rows written."""
    rows = 0
    pending: list[pa.RecordBatch] = []
    pending_rows = pending_bytes = 0
    with pq.ParquetWriter(sink, schema, compression=codec) as writer:
        for batch in _record_batches(batches):
            if batch.num_rows == 0:
                continue
            batch = _conform(batch, schema)
            stats.update(batch)
            rows += batch.num_rows
            pending.append(batch)
            pending_rows += batch.num_rows
            pending_bytes += batch.nbytes
            if pending_rows >= row_group_size or pending_bytes >= row_group_bytes:
                table = pa.Table.from_batches(pending, schema)
                # Whole row groups of row_group_size rows; the rest waits for more rows
                # unless the buffer is full by bytes.
                full = (pending_rows // row_group_size) * row_group_size
                if pending_bytes >= row_group_bytes or full == 0:
                    full = pending_rows
                writer.write_table(table.slice(0, full), row_group_size=row_group_size)
                rest = table.slice(full)
                pending = rest.to_batches()
                pending_rows = rest.num_rows
                pending_bytes = sum(b.nbytes for b in pending)
        if pending:
            writer.write_table(
                pa.Table.from_batches(pending, schema), row_group_size=row_group_size
            )
    return rows


def _record_batches(
    items: Iterable[pa.RecordBatch | pa.Table],
) -> Iterator[pa.RecordBatch]:
    for item in items:
        if isinstance(item, pa.Table):
            yield from item.to_batches()
        else:
            yield item


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """`batch` (with rows) with exactly `schema`: names, types, nullability, field metadata."""
    if batch.schema.equals(schema, check_metadata=True):
        return batch
    if batch.schema.names != schema.names:
        try:
            batch = batch.select(schema.names)
        except (KeyError, pa.ArrowException) as e:
            raise ValueError(
                f"batch columns {batch.schema.names} do not match the file schema {schema.names}"
            ) from e
    return pa.Table.from_batches([batch]).cast(schema).combine_chunks().to_batches()[0]


def _write_local(
    location: str,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    stats: StatsCollector,
    codec: str,
    row_group_size: int,
    row_group_bytes: int,
) -> int:
    """Temp file beside `location`, fsync, rename into place, fsync the directory."""
    directory = os.path.dirname(location)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".tmp-{uuid.uuid4().hex}.dvtool")
    # Created exclusively here; the descriptor stays open to fsync what Arrow writes.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        rows = _write_parquet_file(
            tmp, batches, schema, stats, codec, row_group_size, row_group_bytes
        )
        os.fsync(fd)
        os.replace(tmp, location)
        _fsync_dir(directory)
    finally:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
    return rows


def _write_remote(
    storage: DataFileStorage,
    location: str,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    stats: StatsCollector,
    codec: str,
    row_group_size: int,
    row_group_bytes: int,
) -> int:
    """Local temp file, then one whole-file write or a streamed upload."""
    fd, tmp = tempfile.mkstemp(prefix="dvtool-", suffix=".parquet")
    os.close(fd)
    try:
        rows = _write_parquet_file(
            tmp, batches, schema, stats, codec, row_group_size, row_group_bytes
        )
        with open(tmp, "rb") as f:
            if os.fstat(f.fileno()).st_size <= WHOLE_WRITE_LIMIT:
                storage.write(location, f.read())
            else:
                _upload(storage, location, f)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
    return rows


def _write_parquet_file(
    path: str,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    stats: StatsCollector,
    codec: str,
    row_group_size: int,
    row_group_bytes: int,
) -> int:
    """Write the local file `path` through an Arrow native stream, then complete `stats`
    with the min/max of its footer; returns the number of rows written."""
    deferred = stats.defer_bounds()
    with pa.OSFile(path, "wb") as sink:
        rows = _write_parquet(sink, batches, schema, stats, codec, row_group_size, row_group_bytes)
    if deferred:
        with pa.OSFile(path, "rb") as source:
            _footer_bounds(pq.ParquetFile(source), stats, deferred)
    return rows


def _footer_bounds(
    parquet: pq.ParquetFile, stats: StatsCollector, deferred: list[tuple[str, ...]]
) -> None:
    """Give `stats` the min/max of the `deferred` top-level leaves from the footer of the
    file just written; leaves the footer has no usable statistics for in some row group
    (pyarrow leaves out strings over 4 KiB, for one) are read back from the file."""
    meta = parquet.metadata
    columns = _top_level_columns(meta)
    missing = [
        path
        for path in deferred
        if path[0] not in columns or not _add_column_bounds(meta, columns[path[0]], path, stats)
    ]
    if not missing:
        return
    names = [path[0] for path in missing]
    # A dotted name would select a nested field: read every column then.
    selected = None if any("." in name for name in names) else names
    for batch in parquet.iter_batches(columns=selected):
        stats.update_bounds(batch, missing)


def _top_level_columns(meta: pq.FileMetaData) -> dict[str, int]:
    """Leaf index by name of the top-level, non-repeated leaf columns whose name has no dot
    (a dotted path is a field inside a struct, or ambiguous with one)."""
    out = {}
    for index in range(meta.num_columns):
        column = meta.schema.column(index)
        if column.max_repetition_level == 0 and "." not in column.path:
            out[column.path] = index
    return out


def _add_column_bounds(
    meta: pq.FileMetaData, index: int, path: tuple[str, ...], stats: StatsCollector
) -> bool:
    """Pass every row group's min/max of leaf column `index` to `stats`; False when some row
    group with non-null values has none."""
    unit = _timestamp_unit(meta.schema.column(index))
    if unit is None:
        return False
    for rg in range(meta.num_row_groups):
        chunk = meta.row_group(rg).column(index)
        statistics = chunk.statistics
        if statistics is None:
            return False
        if statistics.has_min_max:
            raw = bool(unit)  # timestamps: integers in the file's unit
            low = statistics.min_raw if raw else statistics.min
            high = statistics.max_raw if raw else statistics.max
            if not stats.add_bounds(path, low, high, unit):
                return False
        elif not (statistics.has_null_count and statistics.null_count == chunk.num_values):
            return False  # values, but no min/max
    return True


_PARQUET_TIME_UNITS = {"milliseconds": "ms", "microseconds": "us", "nanoseconds": "ns"}


def _timestamp_unit(column: pq.ColumnSchema) -> str | None:
    """`ms`/`us`/`ns` for an INT64 timestamp column, "" for other columns, None for a
    timestamp column stored otherwise (INT96)."""
    logical = column.logical_type
    if logical is None or logical.type != "TIMESTAMP":
        return ""
    if column.physical_type != "INT64":
        return None
    return _PARQUET_TIME_UNITS.get(json.loads(logical.to_json()).get("timeUnit"))


def _upload(storage: DataFileStorage, location: str, source: IO[bytes]) -> None:
    """Stream a local file to `location`; a failed upload leaves no file behind."""
    fs, path = storage.arrow_filesystem(location)
    try:
        with fs.open_output_stream(path) as out:
            while chunk := source.read(_COPY_CHUNK):
                out.write(chunk)
    except BaseException:
        with contextlib.suppress(Exception):
            storage.delete(location)
        raise


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
