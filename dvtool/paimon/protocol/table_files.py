"""A snapshot's live data files with their deletion vectors, and which rows a reader sees,
without any IO.

From the merged manifest entries (`manifests.merge_entries`) and the schema: each live data
file with its partition values and folder, its bucket and LSM level, and the DV a live
deletion file holds for it (matched by partition, bucket and data file name). Paths are
relative to the table: `{partition folder}/bucket-{N}/{file}` for data files,
`index/{file}` for index files, unless the manifest names an external path.

Which rows a reader sees (the design text's "Read", and Paimon's `batchScanSkipLevel0`):

- an append table: every file, minus its DV's rows;
- a primary-key table in deletion-vectors mode: the files above level 0, minus their DVs'
  rows. Level-0 files hold the newest writes, which DV readers do not see until a
  compaction moves them up (and marks the rows they replace in DVs): `pending` files;
- a primary-key table without deletion vectors: a merge of every level on read, so the
  rows are not known from metadata (`row_counts_exact` false; logical rows counted as the
  files' rows minus their DELETE rows, an upper bound).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dvtool.paimon.protocol.binary_row import PaimonType
from dvtool.paimon.protocol.manifests import (
    DELETION_VECTORS_INDEX,
    DataFileMeta,
    DeletionVectorMeta,
    IndexFileMeta,
    IndexManifestEntry,
    ManifestEntry,
)
from dvtool.paimon.protocol.partitions import (
    DEFAULT_PARTITION,
    bucket_dir,
    decode_binary_row,
    partition_path,
)
from dvtool.paimon.protocol.schema import (
    DEFAULT_PARTITION_NAME,
    LEGACY_PARTITION_NAME,
    TableSchema,
)

INDEX_DIR = "index"


@dataclass(frozen=True)
class Partition:
    """A partition: its values by key, and its folder relative to the table."""

    values: dict[str, Any]
    path: str


@dataclass(frozen=True)
class LiveIndexFile:
    """A live table-index file of a bucket."""

    partition: Partition
    bucket: int
    meta: IndexFileMeta

    @property
    def path(self) -> str:
        """Relative to the table, or the external path the manifest names."""
        return self.meta.external_path or f"{INDEX_DIR}/{self.meta.file_name}"


@dataclass(frozen=True)
class LiveDataFile:
    """A live data file, the DV of it a live deletion file holds, and whether readers
    in deletion-vectors mode see its rows (False: a primary-key table's level 0)."""

    partition: Partition
    bucket: int
    meta: DataFileMeta
    dv: DeletionVectorMeta | None
    dv_file: LiveIndexFile | None
    visible: bool
    data_dir: str = ""
    """The table's `data-file.path-directory`: the folder the partition folders are in."""

    @property
    def path(self) -> str:
        """Relative to the table, or the external path the manifest names."""
        if self.meta.external_path:
            return self.meta.external_path
        parts = (self.data_dir, self.partition.path, bucket_dir(self.bucket))
        folder = "/".join(p for p in parts if p)
        return f"{folder}/{self.meta.file_name}"

    @property
    def deleted_rows(self) -> int:
        """Rows its DV deletes (0 without one, or without a recorded cardinality)."""
        if self.dv is None or self.dv.cardinality is None:
            return 0
        return self.dv.cardinality


@dataclass
class TableFiles:
    """A snapshot's live files, how they fit together, and what does not fit."""

    data: list[LiveDataFile] = field(default_factory=list)
    index_files: list[LiveIndexFile] = field(default_factory=list)
    dangling_dvs: list[tuple[LiveIndexFile, DeletionVectorMeta]] = field(default_factory=list)
    """DVs of data files not live in their bucket."""
    duplicate_dvs: list[tuple[LiveIndexFile, DeletionVectorMeta]] = field(default_factory=list)
    """Second and later DVs of one data file (each data file has at most one)."""

    def deletion_files(self) -> list[LiveIndexFile]:
        return [f for f in self.index_files if f.meta.index_type == DELETION_VECTORS_INDEX]


class PartitionDecoder:
    """Partition bytes to `Partition`s, each distinct row decoded once."""

    def __init__(self, schema: TableSchema) -> None:
        self.keys = schema.partition_keys
        self.fields = schema.partition_fields()
        self.types = [PaimonType.parse(f.type) for f in self.fields]
        self.default_name = schema.options.get(DEFAULT_PARTITION_NAME, DEFAULT_PARTITION)
        legacy = schema.options.get(LEGACY_PARTITION_NAME, "true").strip().lower()
        self.legacy_name = legacy != "false"
        self._seen: dict[bytes, Partition] = {}

    def __call__(self, data: bytes) -> Partition:
        found = self._seen.get(data)
        if found is None:
            values = decode_binary_row(data, self.fields)
            path = partition_path(
                self.keys, values, self.default_name, self.legacy_name, self.types
            )
            found = Partition(dict(zip(self.keys, values, strict=True)), path)
            self._seen[data] = found
        return found


def table_files(
    schema: TableSchema,
    data_entries: Sequence[ManifestEntry],
    index_entries: Sequence[IndexManifestEntry],
) -> TableFiles:
    """Join the live data files (merged entries) with the DVs of the live deletion files."""
    partition_of = PartitionDecoder(schema)
    out = TableFiles()
    out.index_files = [
        LiveIndexFile(partition_of(e.partition), e.bucket, e.index_file) for e in index_entries
    ]
    live_names = {(e.partition, e.bucket, e.file.file_name) for e in data_entries}
    dvs: dict[tuple[bytes, int, str], tuple[LiveIndexFile, DeletionVectorMeta]] = {}
    for entry, live in zip(index_entries, out.index_files, strict=True):
        if live.meta.index_type != DELETION_VECTORS_INDEX:
            continue
        for dv in live.meta.dv_ranges:
            key = (entry.partition, entry.bucket, dv.data_file)
            if key not in live_names:
                out.dangling_dvs.append((live, dv))
            elif key in dvs:
                out.duplicate_dvs.append((live, dv))
            else:
                dvs[key] = (live, dv)
    hidden_level0 = schema.has_primary_key and schema.deletion_vectors
    data_dir = schema.data_directory
    for e in data_entries:
        found = dvs.get((e.partition, e.bucket, e.file.file_name))
        out.data.append(
            LiveDataFile(
                partition=partition_of(e.partition),
                bucket=e.bucket,
                meta=e.file,
                dv=found[1] if found else None,
                dv_file=found[0] if found else None,
                visible=not (hidden_level0 and e.file.level == 0),
                data_dir=data_dir,
            )
        )
    return out


def files_by_bucket(files: Sequence[LiveDataFile]) -> dict[tuple[str, int], list[LiveDataFile]]:
    """The files of each (partition folder, bucket), in the order given."""
    out: dict[tuple[str, int], list[LiveDataFile]] = defaultdict(list)
    for f in files:
        out[(f.partition.path, f.bucket)].append(f)
    return dict(out)
