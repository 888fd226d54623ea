"""The default view of `dvtool inspect` on a Paimon table: snapshot, files, DVs, rows.

The figures of one snapshot, from its manifests and index manifest alone (no data file or
deletion file is read; `dvtool.paimon.snapshot_files`):

- the rows a reader in deletion-vectors mode sees (`dvtool.paimon.protocol.table_files`):
  physical rows are the `_ROW_COUNT`s of the files it reads, deleted rows the cardinalities
  of their DVs (as the index manifest records them), logical rows the difference, which is
  also what Paimon's own `DataSplit.mergedRowCount` counts. A primary-key table's level-0
  files are not read in this mode until a compaction moves them up: they are
  `pending_level0_files` / `pending_level0_rows`, the freshest data DV readers do not see
  yet (the cardinalities old writers did not record are counted from the deletion files
  first: `dvtool.paimon.deletion_files`). A primary-key table without deletion vectors
  merges its levels on read: then `row_counts_exact` is false and logical rows are an
  upper bound;
- `files_with_dvs` and `deletion_vectors`: data files with a DV (the first is the key
  Delta's and Iceberg's inspect share); the deleted-ratio histogram has Delta's buckets;
- data files per LSM level and per bucket, and the index files (deletion files, hash
  indexes) with their bytes;
- small files: live data files below `target-file-size` (Paimon's default: 128 MiB for a
  primary-key table, 256 MiB for an append table).

The JSON keys are Delta's and Iceberg's inspect's where the concept is the same (`format`,
`num_files`, `physical_rows`, `logical_rows`, `deleted_rows`, `row_counts_exact`,
`files_with_dvs`, `deleted_ratio_histogram`, `small_files`, ...).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from dvtool.paimon.protocol.manifests import DELETION_VECTORS_INDEX
from dvtool.paimon.protocol.schema import TableSchema
from dvtool.paimon.protocol.snapshots import Snapshot
from dvtool.paimon.protocol.table_files import LiveDataFile, TableFiles, files_by_bucket
from dvtool.paimon.tables import PaimonTable

RATIO_BUCKETS = 10


@dataclass(frozen=True)
class PaimonSummary:
    """The default view of `inspect` on a Paimon table."""

    name: str
    location: str
    table_kind: str
    """`primary-key` or `append`."""
    primary_keys: list[str]
    partition_keys: list[str]
    bucket: int
    """The `bucket` option: N fixed buckets, -1 dynamic (or unaware), -2 postponed."""
    deletion_vectors_enabled: bool
    bitmap64: bool
    snapshot_id: int | None
    schema_id: int
    commit_kind: str | None
    commit_timestamp: int | None
    total_record_count: int | None
    """The snapshot's own record count: every row of every live file, DELETE rows too."""
    options: dict[str, str]
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
    deletion_vectors: int
    """Data files with a DV (as `files_with_dvs`)."""
    pending_level0_files: int
    """A primary-key table's level-0 files in deletion-vectors mode: not read until compacted."""
    pending_level0_rows: int
    levels: list[dict[str, Any]]
    """Per LSM level: files, rows, bytes and files with DVs."""
    buckets: dict[str, Any]
    """The buckets holding files (`count`), the most files and pending level-0 files in one
    (`max_files`, `max_pending_level0_files`: Paimon compacts a bucket when it holds
    `num-sorted-run.compaction-trigger` sorted runs, 5 by default), and how many buckets
    hold how many files (`distribution`)."""
    deletion_files: int
    deletion_file_bytes: int
    hash_index_files: int
    hash_index_bytes: int
    deleted_ratio_histogram: list[dict[str, Any]]
    small_file_size: int | None
    small_files: int | None
    format: str = "paimon"
    branch: str = "main"
    """The branch read (`--branch`; Paimon's `table$branch_NAME`)."""
    branches: list[str] = field(default_factory=list)
    """The table's branches besides main (`branch/branch-NAME` folders)."""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        return {"format": out.pop("format"), **out}


def summarize(
    table: PaimonTable, schema: TableSchema, snapshot: Snapshot | None, files: TableFiles
) -> PaimonSummary:
    """The summary of `snapshot` (None: a table without commits) from its live files."""
    data = files.data
    read = [f for f in data if f.visible]
    physical = sum(f.meta.row_count for f in read)
    deleted = sum(f.deleted_rows for f in read)
    size = sum(f.meta.file_size for f in data)
    pending = [f for f in data if not f.visible]
    index_bytes = Counter[str]()
    index_count = Counter[str]()
    for f in files.index_files:
        index_count[f.meta.index_type] += 1
        index_bytes[f.meta.index_type] += f.meta.file_size
    target = schema.target_file_size
    return PaimonSummary(
        name=table.name,
        location=table.location,
        branch=table.branch,
        branches=table.branches(),
        table_kind=schema.kind,
        primary_keys=list(schema.primary_keys),
        partition_keys=list(schema.partition_keys),
        bucket=schema.bucket,
        deletion_vectors_enabled=schema.deletion_vectors,
        bitmap64=schema.bitmap64,
        snapshot_id=snapshot.id if snapshot else None,
        schema_id=schema.id,
        commit_kind=snapshot.commit_kind if snapshot else None,
        commit_timestamp=snapshot.time_millis if snapshot else None,
        total_record_count=snapshot.total_record_count if snapshot else None,
        options=dict(schema.options),
        schema=[
            {"name": f.name, "type": f.type, "nullable": f.nullable, "field_id": f.id}
            for f in schema.fields
        ],
        num_files=len(data),
        size_bytes=size,
        avg_file_size=size // len(data) if data else 0,
        physical_rows=physical,
        logical_rows=physical - deleted - _merged_deletes(schema, read),
        deleted_rows=deleted,
        deleted_ratio=deleted / physical if physical else 0.0,
        row_counts_exact=_exact(schema, read),
        files_with_dvs=sum(1 for f in data if f.dv is not None),
        deletion_vectors=sum(1 for f in data if f.dv is not None),
        pending_level0_files=len(pending),
        pending_level0_rows=sum(f.meta.row_count for f in pending),
        levels=_levels(data),
        buckets=_buckets(data),
        deletion_files=index_count[DELETION_VECTORS_INDEX],
        deletion_file_bytes=index_bytes[DELETION_VECTORS_INDEX],
        hash_index_files=sum(n for k, n in index_count.items() if k != DELETION_VECTORS_INDEX),
        hash_index_bytes=sum(n for k, n in index_bytes.items() if k != DELETION_VECTORS_INDEX),
        deleted_ratio_histogram=histogram(read),
        small_file_size=target,
        small_files=None if target is None else sum(f.meta.file_size < target for f in data),
    )


def _merged_deletes(schema: TableSchema, read: list[LiveDataFile]) -> int:
    """A primary-key table without DVs: the DELETE rows of its files, which a merge drops
    (with the rows they replace, which metadata cannot tell: hence an upper bound)."""
    if not schema.has_primary_key or schema.deletion_vectors:
        return 0
    return sum(f.meta.delete_row_count or 0 for f in read)


def _exact(schema: TableSchema, read: list[LiveDataFile]) -> bool:
    """Whether the row counts are exact: DV mode (or an append table) and every DV's
    cardinality recorded."""
    if schema.has_primary_key and not schema.deletion_vectors:
        return False
    return all(f.dv is None or f.dv.cardinality is not None for f in read)


def _levels(data: list[LiveDataFile]) -> list[dict[str, Any]]:
    """Files, rows, bytes and files with DVs per LSM level."""
    out: dict[int, dict[str, Any]] = {}
    for f in data:
        level = out.setdefault(
            f.meta.level,
            {"level": f.meta.level, "files": 0, "rows": 0, "size_bytes": 0, "files_with_dvs": 0},
        )
        level["files"] += 1
        level["rows"] += f.meta.row_count
        level["size_bytes"] += f.meta.file_size
        level["files_with_dvs"] += f.dv is not None
    return [out[k] for k in sorted(out)]


def _buckets(data: list[LiveDataFile]) -> dict[str, Any]:
    """How the files spread over (partition, bucket)s; bounded in size however many."""
    per_bucket = list(files_by_bucket(data).values())
    counts = Counter(len(files) for files in per_bucket)
    return {
        "count": len(per_bucket),
        "max_files": max((len(files) for files in per_bucket), default=0),
        "max_pending_level0_files": max(
            (sum(not f.visible for f in files) for files in per_bucket), default=0
        ),
        "distribution": [{"files": n, "buckets": counts[n]} for n in sorted(counts)],
    }


def histogram(read: list[LiveDataFile]) -> list[dict[str, Any]]:
    """Read data files per deleted-ratio bucket of 10% (Delta's buckets); files without a
    DV are a bucket of their own."""
    buckets = [0] * RATIO_BUCKETS
    with_dvs = 0
    for f in read:
        if f.dv is None:
            continue
        with_dvs += 1
        if f.meta.row_count > 0:
            ratio = f.deleted_rows / f.meta.row_count
            buckets[min(math.floor(ratio * RATIO_BUCKETS), RATIO_BUCKETS - 1)] += 1
    width = 100 // RATIO_BUCKETS
    rows = [{"bucket": "no deletes", "files": len(read) - with_dvs}]
    rows += [
        {"bucket": f"{b * width}-{(b + 1) * width}%", "files": n} for b, n in enumerate(buckets)
    ]
    return rows
