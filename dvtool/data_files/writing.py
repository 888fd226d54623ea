"""Writing new parquet data files: names, row groups, statistics, and what an `add` needs.

`write_data_file` streams record batches into a new, uniquely named parquet file under a
partition directory, collecting Delta statistics on the way, and returns a `WrittenFile`.
Files are written through Arrow's native file streams (not a Python file object, whose
writes would take the GIL per page), and the null counts and min/max the footer holds
exactly are taken from the writer's footer metadata instead of being computed batch by
batch (`footer_stats.footer_statistics`; the rest falls back to the computed statistics).
How the finished file is put in place and made durable is `dvtool.data_files.publish`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from dvtool.data_files.footer_stats import footer_statistics, read_back_statistics
from dvtool.data_files.publish import BackgroundSync, publish_local, publish_remote
from dvtool.data_files.reading import parquet_file
from dvtool.delta.protocol.stats_collect import StatsCollector, stats_json
from dvtool.errors import DvtoolError, StorageError
from dvtool.storage.failures import storage_error
from dvtool.storage.locations import encode_for_log

if TYPE_CHECKING:
    from dvtool.storage.data_file_storage import DataFileStorage

__all__ = ["WrittenFile", "data_file_name", "write_data_file"]

DEFAULT_ROW_GROUP_ROWS = 1_048_576
DEFAULT_ROW_GROUP_BYTES = 128 * 2**20

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
    sync: BackgroundSync | None = None,
) -> WrittenFile:
    """Write `batches` as one new parquet file under `partition_dir` (`""`: the root).

    Batches are cast to `schema` (physical names, field ids in its field metadata) and
    buffered into row groups of up to `row_group_size` rows or `row_group_bytes` bytes;
    `stats` sees every batch. The file goes to a temp file first, so memory stays bounded:
    on local disk a temp file beside the target, renamed into place; elsewhere a local temp
    file, then one `write` (up to 64 MiB) or a streamed upload, which object stores publish
    only when complete. Nothing of a failed write is left behind.

    A local file is durable when this returns, unless `sync` is given: its fsyncs are then
    queued there, and the caller must `sync.wait()` before committing the file (see
    `dvtool.data_files.publish`).
    """
    name = data_file_name(compression)
    relative = f"{partition_dir.strip('/')}/{name}" if partition_dir.strip("/") else name
    location = storage.join(relative)
    codec = "none" if compression.lower() == "uncompressed" else compression

    def write(path: str) -> int:
        return _write_parquet_file(
            path, batches, schema, stats, codec, row_group_size, row_group_bytes
        )

    try:
        if storage.protocol == "file":
            num_records = publish_local(location, write, sync)
        else:
            num_records = publish_remote(storage, location, write)
    except DvtoolError:
        raise
    except OSError as e:  # arrow's IO errors are OSErrors; bad data stays a ValueError
        raise storage_error("write the data file", location, e) from e
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


def _write_parquet_file(
    path: str,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    stats: StatsCollector,
    codec: str,
    row_group_size: int,
    row_group_bytes: int,
) -> int:
    """Write the local file `path` through an Arrow native stream, with `stats` completed
    from the writer's own footer metadata (no second read of the file, unless a leaf's
    footer statistics are unusable); returns the number of rows written."""
    footer = stats.use_footer()
    collected: list[pq.FileMetaData] = []
    with pa.OSFile(path, "wb") as sink:
        rows = _write_parquet(
            sink, batches, schema, stats, codec, row_group_size, row_group_bytes, collected
        )
    missing = footer_statistics(collected[0], schema, stats, footer) if footer else []
    if missing:
        with pa.OSFile(path, "rb") as source:
            read_back_statistics(parquet_file(source), stats, missing)
    return rows


def _write_parquet(
    sink: Any,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    stats: StatsCollector,
    codec: str,
    row_group_size: int,
    row_group_bytes: int,
    metadata: list[pq.FileMetaData],
) -> int:
    """Stream `batches` into `sink` as parquet; returns the number of rows written and
    appends the file's footer metadata (the writer's own, once closed) to `metadata`."""
    rows = 0
    pending: list[pa.RecordBatch] = []
    pending_rows = pending_bytes = 0
    with pq.ParquetWriter(sink, schema, compression=codec, metadata_collector=metadata) as writer:
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
