"""Paimon's manifest lists, manifests and index manifests as records, and how their entries
add up to a snapshot's files, without any IO (`manifest.md`, `tableindex.md`).

A manifest list names manifests; a manifest holds ADD (0) and DELETE (1) entries of data
files, each keyed by partition (serialized `BinaryRow` bytes), bucket, level and file name
(Paimon's `FileEntry.Identifier`). Read in order (the base manifest list, then the delta
one; each list's manifests in order), the last entry of a file wins: a DELETE removes the
ADD before it. A DELETE with no ADD before it, or a second ADD of a live file, is what
Paimon's commit refuses ("Trying to delete file ... which is not previously added"): dvtool
reports them (`MergedFiles.unmatched_deletes`, `duplicate_adds`) and keeps reading.

The index manifest holds the table-index files the same way, keyed by partition, bucket,
index type and file name. A `DELETION_VECTORS` index file (a deletion file) lists, per data
file of its bucket, where its DV lies (`offset`, `length`: see
`dvtool.deletion_vectors.paimon` for what `length` counts) and its cardinality (null in
files older Paimon versions wrote).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dvtool.errors import LogError

ADD, DELETE = 0, 1
DELETION_VECTORS_INDEX = "DELETION_VECTORS"
HASH_INDEX = "HASH"
"""A dynamic-bucket table's hash index: the hashes of one bucket's keys, 4-byte ints."""


@dataclass(frozen=True)
class ManifestFileMeta:
    """One entry of a manifest list: a manifest and its counts."""

    file_name: str
    file_size: int
    num_added_files: int
    num_deleted_files: int
    schema_id: int


@dataclass(frozen=True)
class DataFileMeta:
    """One data (or changelog) file as a manifest describes it."""

    file_name: str
    file_size: int
    row_count: int
    level: int
    schema_id: int
    min_sequence_number: int
    max_sequence_number: int
    delete_row_count: int | None
    """Rows of kind DELETE among `row_count` (a primary-key table's level-0 files keep them)."""
    creation_time: int | None
    file_source: int | None
    """0: written by an APPEND, 1: by a COMPACT (None: not recorded)."""
    extra_files: tuple[str, ...]
    external_path: str | None


@dataclass(frozen=True)
class ManifestEntry:
    """An ADD or DELETE of a data file in a partition's bucket."""

    kind: int
    partition: bytes
    bucket: int
    total_buckets: int
    file: DataFileMeta

    @property
    def identifier(self) -> tuple[bytes, int, int, str]:
        return (self.partition, self.bucket, self.file.level, self.file.file_name)


@dataclass(frozen=True)
class DeletionVectorMeta:
    """Where one data file's DV lies in a deletion file, and how many rows it deletes."""

    data_file: str
    offset: int
    length: int
    cardinality: int | None


@dataclass(frozen=True)
class IndexFileMeta:
    """A table-index file of one bucket: a deletion file (`DELETION_VECTORS`) or a hash
    index (`HASH`)."""

    index_type: str
    file_name: str
    file_size: int
    row_count: int
    dv_ranges: tuple[DeletionVectorMeta, ...]
    external_path: str | None


@dataclass(frozen=True)
class IndexManifestEntry:
    """An ADD or DELETE of a table-index file."""

    kind: int
    partition: bytes
    bucket: int
    index_file: IndexFileMeta

    @property
    def identifier(self) -> tuple[bytes, int, str, str]:
        return (self.partition, self.bucket, self.index_file.index_type, self.index_file.file_name)


def manifest_file_meta(record: Mapping[str, Any]) -> ManifestFileMeta:
    """A manifest list record as a `ManifestFileMeta`; LogError if fields are missing."""
    with _fields("manifest list"):
        return ManifestFileMeta(
            file_name=str(record["_FILE_NAME"]),
            file_size=int(record["_FILE_SIZE"]),
            num_added_files=int(record["_NUM_ADDED_FILES"]),
            num_deleted_files=int(record["_NUM_DELETED_FILES"]),
            schema_id=int(record["_SCHEMA_ID"]),
        )


def manifest_entry(record: Mapping[str, Any]) -> ManifestEntry:
    """A manifest record as a `ManifestEntry`; LogError if fields are missing."""
    with _fields("manifest"):
        f = record["_FILE"]
        meta = DataFileMeta(
            file_name=str(f["_FILE_NAME"]),
            file_size=int(f["_FILE_SIZE"]),
            row_count=int(f["_ROW_COUNT"]),
            level=int(f["_LEVEL"]),
            schema_id=int(f["_SCHEMA_ID"]),
            min_sequence_number=int(f["_MIN_SEQUENCE_NUMBER"]),
            max_sequence_number=int(f["_MAX_SEQUENCE_NUMBER"]),
            delete_row_count=_optional_int(f.get("_DELETE_ROW_COUNT")),
            creation_time=_optional_int(f.get("_CREATION_TIME")),
            file_source=_optional_int(f.get("_FILE_SOURCE")),
            extra_files=tuple(str(x) for x in f.get("_EXTRA_FILES") or ()),
            external_path=_optional_str(f.get("_EXTERNAL_PATH")),
        )
        return ManifestEntry(
            kind=_kind(record["_KIND"]),
            partition=bytes(record["_PARTITION"]),
            bucket=int(record["_BUCKET"]),
            total_buckets=int(record["_TOTAL_BUCKETS"]),
            file=meta,
        )


def index_manifest_entry(record: Mapping[str, Any]) -> IndexManifestEntry:
    """An index manifest record as an `IndexManifestEntry`; LogError if fields are missing."""
    with _fields("index manifest"):
        ranges = tuple(
            DeletionVectorMeta(
                data_file=str(r["f0"]),
                offset=int(r["f1"]),
                length=int(r["f2"]),
                cardinality=_optional_int(r.get("_CARDINALITY")),
            )
            for r in record.get("_DELETIONS_VECTORS_RANGES") or ()
            if r is not None
        )
        index_file = IndexFileMeta(
            index_type=str(record["_INDEX_TYPE"]),
            file_name=str(record["_FILE_NAME"]),
            file_size=int(record["_FILE_SIZE"]),
            row_count=int(record["_ROW_COUNT"]),
            dv_ranges=ranges,
            external_path=_optional_str(record.get("_EXTERNAL_PATH")),
        )
        return IndexManifestEntry(
            kind=_kind(record["_KIND"]),
            partition=bytes(record["_PARTITION"]),
            bucket=int(record["_BUCKET"]),
            index_file=index_file,
        )


@dataclass
class MergedFiles:
    """The live entries after merging ADDs and DELETEs in order, and what did not add up."""

    live: list[Any] = field(default_factory=list)
    unmatched_deletes: list[Any] = field(default_factory=list)
    duplicate_adds: list[Any] = field(default_factory=list)


def merge_entries(entries: Iterable[ManifestEntry | IndexManifestEntry]) -> MergedFiles:
    """The files live after `entries` (in order): an ADD makes a file live, a DELETE of a
    live file removes it; the live ones in the order they were added."""
    live: dict[Any, ManifestEntry | IndexManifestEntry] = {}
    merged = MergedFiles()
    for entry in entries:
        key = entry.identifier
        if entry.kind == ADD:
            if key in live:
                merged.duplicate_adds.append(entry)
            live[key] = entry
        elif key in live:
            del live[key]
        else:
            merged.unmatched_deletes.append(entry)
    merged.live = list(live.values())
    return merged


@contextmanager
def _fields(what: str) -> Iterator[None]:
    """Turn a missing or mistyped field of a record into a LogError naming the file kind."""
    try:
        yield
    except (KeyError, TypeError, ValueError) as e:
        raise LogError(f"a Paimon {what} record is malformed: {e!r}") from None


def _kind(value: Any) -> int:
    kind = int(value)
    if kind not in (ADD, DELETE):
        raise ValueError(f"_KIND {kind} is neither ADD (0) nor DELETE (1)")
    return kind


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)
