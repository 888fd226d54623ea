"""The default view of `dvtool inspect` on an Iceberg table: snapshot, files, deletes, rows.

The figures of one snapshot, from its live manifest entries (`snapshot_files`), the scope
rules of `delete_index` (which deletes apply to which data file) and, for exact deleted
rows, the position delete files' `(file_path, pos)` columns (`deleted_rows`):

- physical rows: the data files' `record_count`s; deleted rows: per data file, its DV's
  cardinality or the distinct positions its position deletes hold for it, and with
  `--count-rows` also the rows its equality deletes match (read from the data files' key
  columns). Without `--count-rows`, a table with equality deletes applying to live files
  has `row_counts_exact` false: `deleted_rows` then counts only position deletes and DVs
  (a lower bound; `logical_rows` an upper bound);
- `files_with_dvs` (the key Delta's inspect uses): data files with any deletes applying;
  the deleted-ratio histogram has Delta's buckets;
- delete files by kind, per data file (maximum and distribution), dangling ones (applying
  to no live data file), and Puffin bytes that no DV of a live data file uses (read from
  the Puffin footers: footer and magic bytes are not counted as unused);
- small files: data files below `write.target-file-size-bytes` (default 512 MiB, as
  Iceberg's writers).

The JSON keys are Delta's inspect's where the concept is the same (`format`,
`format_version`, `num_files`, `physical_rows`, `logical_rows`, `deleted_rows`,
`row_counts_exact`, `files_with_dvs`, `deleted_ratio_histogram`, `small_files`, ...).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from dvtool.iceberg.delete_index import (
    AppliedDeletes,
    DataFileEntry,
    DeleteContent,
    DeleteFileEntry,
    DeleteIndex,
    dangling_deletes,
)

if TYPE_CHECKING:
    from pyiceberg.table.snapshots import Snapshot

    from dvtool.iceberg.tables import IcebergTable

RATIO_BUCKETS = 10
TARGET_FILE_SIZE = "write.target-file-size-bytes"
DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024


@dataclass(frozen=True)
class SnapshotDeletes:
    """A snapshot's live files, which deletes apply to each, and the rows they delete."""

    data: list[DataFileEntry]
    deletes: list[DeleteFileEntry]
    applied: list[tuple[DataFileEntry, AppliedDeletes]]
    deleted: dict[str, int]
    """Rows deleted per data file with deletes: exact when `exact`, else by position
    deletes and DVs only for the files with equality deletes."""
    exact: bool
    dangling: list[DeleteFileEntry]


def snapshot_deletes(
    table: IcebergTable, snapshot: Snapshot | None, count_rows: bool
) -> SnapshotDeletes:
    """Read the snapshot's manifests and count the rows its deletes delete."""
    from dvtool.iceberg.data_file_io import read_errors
    from dvtool.iceberg.deleted_rows import exact_position_deletes
    from dvtool.iceberg.snapshot_files import live_files, unpartitioned_specs

    if snapshot is None:
        return SnapshotDeletes([], [], [], {}, True, [])
    with read_errors(snapshot.manifest_list):
        data, deletes = live_files(table.metadata, snapshot, table.io)
    index = DeleteIndex(deletes, unpartitioned_specs(table.metadata))
    applied = [(d, index.for_data_file(d)) for d in data]
    deleted = exact_position_deletes(applied, table.io)
    with_equality = {d.path for d, a in applied if a.equality}
    if count_rows and with_equality:
        deleted.update(_with_equality(table, applied, with_equality))
    exact = count_rows or not with_equality
    dangling = dangling_deletes(deletes, index, data)
    return SnapshotDeletes(data, deletes, applied, deleted, exact, dangling)


def _with_equality(
    table: IcebergTable, applied: list[tuple[DataFileEntry, AppliedDeletes]], paths: set[str]
) -> dict[str, int]:
    """Exact deleted rows of the data files with equality deletes (all their deletes)."""
    from dvtool.iceberg.deleted_rows import count_below, deleted_bitmaps
    from dvtool.iceberg.equality_deletes import EqualityApplier

    applier = EqualityApplier(table.io)
    out = {}
    for data, deletes, rows in deleted_bitmaps(applied, table.io, lambda d: d.path in paths):
        out[data.path] = count_below(applier.deleted(data, deletes, rows), data.record_count)
    return out


@dataclass(frozen=True)
class PuffinUse:
    """The live Puffin files (DV containers) and their bytes no live DV uses."""

    files: int = 0
    bytes: int = 0
    unused_bytes: int | None = 0
    """Bytes of blobs no DV of a live data file names (None: a footer could not be read)."""


@dataclass(frozen=True)
class IcebergSummary:
    """The default view of `inspect` on an Iceberg table."""

    format_version: int
    table_uuid: str
    name: str | None
    location: str
    metadata_location: str
    snapshot_id: int | None
    sequence_number: int | None
    commit_timestamp: int | None
    operation: str | None
    properties: dict[str, str]
    partition_spec: list[dict[str, Any]]
    schema: list[dict[str, Any]]
    num_files: int
    size_bytes: int
    avg_file_size: int
    physical_rows: int
    logical_rows: int
    deleted_rows: int
    deleted_ratio: float
    row_counts_exact: bool
    files_with_dvs: int
    """Data files with any deletes applying (DVs, position or equality deletes)."""
    files_with_equality_deletes: int
    delete_files: dict[str, int]
    delete_file_bytes: int
    equality_delete_rows: int
    """The rows (keys) of the live equality delete files."""
    delete_files_per_data_file: dict[str, Any]
    dangling_deletes: int
    puffin: PuffinUse
    deleted_ratio_histogram: list[dict[str, Any]]
    small_file_size: int | None
    small_files: int | None
    warnings: list[str] = field(default_factory=list)
    format: str = "iceberg"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        return {"format": out.pop("format"), **out}


def summarize(
    table: IcebergTable, snapshot: Snapshot | None, figures: SnapshotDeletes
) -> IcebergSummary:
    """The summary of `snapshot` from its files and deletes."""
    from dvtool.iceberg.snapshots import operation_of

    data = figures.data
    physical = sum(d.record_count for d in data)
    deleted = sum(figures.deleted.values())
    size = sum(d.file_size_in_bytes for d in data)
    target = small_file_size(table.metadata.properties)
    puffin, warnings = puffin_use(table, figures)
    return IcebergSummary(
        format_version=table.metadata.format_version,
        table_uuid=str(table.metadata.table_uuid),
        name=table.name,
        location=table.location,
        metadata_location=table.metadata_location,
        snapshot_id=snapshot.snapshot_id if snapshot else None,
        sequence_number=snapshot.sequence_number if snapshot else None,
        commit_timestamp=snapshot.timestamp_ms if snapshot else None,
        operation=operation_of(snapshot),
        properties=dict(table.metadata.properties),
        partition_spec=_partition_spec(table),
        schema=_schema(table, snapshot),
        num_files=len(data),
        size_bytes=size,
        avg_file_size=size // len(data) if data else 0,
        physical_rows=physical,
        logical_rows=physical - deleted,
        deleted_rows=deleted,
        deleted_ratio=deleted / physical if physical else 0.0,
        row_counts_exact=figures.exact,
        files_with_dvs=sum(1 for _, a in figures.applied if a.files()),
        files_with_equality_deletes=sum(1 for _, a in figures.applied if a.equality),
        delete_files=delete_file_counts(figures.deletes),
        delete_file_bytes=_delete_bytes(figures.deletes),
        equality_delete_rows=sum(
            e.record_count for e in figures.deletes if e.content is DeleteContent.EQUALITY
        ),
        delete_files_per_data_file=_per_data_file(figures.applied),
        dangling_deletes=len(figures.dangling),
        puffin=puffin,
        deleted_ratio_histogram=histogram(figures),
        small_file_size=target,
        small_files=None if target is None else sum(d.file_size_in_bytes < target for d in data),
        warnings=warnings,
    )


def delete_file_counts(deletes: list[DeleteFileEntry]) -> dict[str, int]:
    """Delete files by kind: position and equality files, and DVs (one per data file)."""
    kinds = Counter(e.content for e in deletes)
    return {
        "position": kinds[DeleteContent.POSITION],
        "equality": kinds[DeleteContent.EQUALITY],
        "deletion_vectors": kinds[DeleteContent.DELETION_VECTOR],
    }


def _delete_bytes(deletes: list[DeleteFileEntry]) -> int:
    """Bytes of the delete files: each Puffin file once, other delete files whole."""
    sizes = {e.path: e.file_size_in_bytes for e in deletes}
    return sum(sizes.values())


def _per_data_file(applied: list[tuple[DataFileEntry, AppliedDeletes]]) -> dict[str, Any]:
    counts = Counter(len(a.files()) for _, a in applied)
    return {
        "max": max(counts, default=0),
        "distribution": [{"delete_files": k, "data_files": counts[k]} for k in sorted(counts)],
    }


def small_file_size(properties: dict[str, str]) -> int | None:
    """`write.target-file-size-bytes` (default 512 MiB); None when it is not a size."""
    value = properties.get(TARGET_FILE_SIZE)
    if value is None:
        return DEFAULT_TARGET_FILE_SIZE
    try:
        size = int(value.strip())
    except ValueError:
        return None
    return size if size > 0 else None


def histogram(figures: SnapshotDeletes) -> list[dict[str, Any]]:
    """Data files per deleted-ratio bucket of 10% (Delta's buckets); files without
    deletes are a bucket of their own."""
    buckets = [0] * RATIO_BUCKETS
    with_deletes = 0
    for data, applied in figures.applied:
        if not applied.files():
            continue
        with_deletes += 1
        if data.record_count > 0:
            ratio = figures.deleted.get(data.path, 0) / data.record_count
            buckets[min(math.floor(ratio * RATIO_BUCKETS), RATIO_BUCKETS - 1)] += 1
    width = 100 // RATIO_BUCKETS
    rows = [{"bucket": "no deletes", "files": len(figures.data) - with_deletes}]
    rows += [
        {"bucket": f"{b * width}-{(b + 1) * width}%", "files": n} for b, n in enumerate(buckets)
    ]
    return rows


def puffin_use(table: IcebergTable, figures: SnapshotDeletes) -> tuple[PuffinUse, list[str]]:
    """The live Puffin files, their bytes, and the bytes of blobs no used DV names."""
    from dvtool.errors import DvtoolError
    from dvtool.io_pool import map_io

    dvs = [e for e in figures.deletes if e.content is DeleteContent.DELETION_VECTOR]
    if not dvs:
        return PuffinUse(), []
    dangling = {(e.path, e.content_offset) for e in figures.dangling}
    used = {(e.path, e.content_offset) for e in dvs if (e.path, e.content_offset) not in dangling}
    sizes = {e.path: e.file_size_in_bytes for e in dvs}

    def unused(path: str) -> int | str:
        try:
            blobs = puffin_blobs(table, path, sizes[path])
        except DvtoolError as e:
            return f"cannot read the Puffin footer of {path}: {e.message}"
        return sum(length for offset, length in blobs if (path, offset) not in used)

    results = map_io(unused, sorted(sizes))
    warnings = [r for r in results if isinstance(r, str)]
    total = None if warnings else sum(r for r in results if isinstance(r, int))
    return PuffinUse(len(sizes), sum(sizes.values()), total), warnings


def puffin_blobs(table: IcebergTable, path: str, size: int) -> list[tuple[int, int]]:
    """(offset, length) of every blob in a Puffin file's footer."""
    from dvtool.deletion_vectors.puffin import FOOTER_TRAILER, footer_length, parse_footer
    from dvtool.iceberg.data_file_io import read_errors

    with read_errors(path), table.io.new_input(path).open(seekable=True) as stream:
        stream.seek(size - FOOTER_TRAILER)
        length = footer_length(stream.read(FOOTER_TRAILER), size)
        stream.seek(size - length)
        footer = parse_footer(stream.read(length))
    return [(b.offset, b.length) for b in footer.blobs]


def _partition_spec(table: IcebergTable) -> list[dict[str, Any]]:
    metadata = table.metadata
    schema = metadata.schema()
    out = []
    for f in metadata.spec().fields:
        source = schema.find_column_name(f.source_id)
        out.append({"name": f.name, "transform": str(f.transform), "source": source})
    return out


def _schema(table: IcebergTable, snapshot: Snapshot | None) -> list[dict[str, Any]]:
    """The columns of the snapshot's schema (the current one without a snapshot)."""
    metadata = table.metadata
    schema = metadata.schema()
    if snapshot is not None and snapshot.schema_id is not None:
        schema = next((s for s in metadata.schemas if s.schema_id == snapshot.schema_id), schema)
    return [
        {
            "name": f.name,
            "type": str(f.field_type),
            "nullable": not f.required,
            "field_id": f.field_id,
        }
        for f in schema.fields
    ]
