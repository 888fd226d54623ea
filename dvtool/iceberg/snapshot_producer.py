"""A new Iceberg snapshot from a set of file changes: manifests, manifest list, summary.

What Iceberg Java's `MergingSnapshotProducer` (under `BaseRowDelta`, `BaseRewriteFiles`,
`BaseOverwriteFiles`) does for a commit, without the commit itself: `produce_snapshot`
writes the new snapshot's files and returns the pyiceberg `TableUpdate`s and
`TableRequirement`s a catalog commit applies (`catalog_commit.commit_updates`).

- The new snapshot's parent is the branch's current snapshot; its sequence number is the
  table's `last-sequence-number` + 1; its id a fresh positive 63-bit number no snapshot of
  the table has (Java's `SnapshotIdGeneratorUtil`: the two halves of a random UUID xor-ed).
- Base manifests that hold none of `changes.removed` are carried over unchanged (a manifest
  whose files were all removed by an earlier snapshot is dropped, as Java drops manifests
  without live files). A manifest holding a removed file is rewritten: the removed entries
  with status DELETED and this snapshot's id, the others EXISTING with their snapshot id,
  data and file sequence numbers (and, v3, their `first_row_id`), for data and delete
  manifests alike. On v3 tables a deletion vector of a removed data file is removed too
  (Java's `removeDanglingDeletesFor`).
- Added files go to new manifests, one per partition spec and content (data, deletes):
  ADDED with this snapshot's id and a null data sequence number (inherited: this commit's),
  unless `AddedFile.data_sequence_number` keeps a rewritten file's (Java's
  `rewriteFiles(..., dataSequenceNumber)`).
- A removal of a file that is not live in the base snapshot raises `RemovedFileNotLiveError`
  (a `CommitConflictError`): the table moved on since the plan, the caller re-plans.
- File names as Java's: `{metadata path}/{commit uuid}-m{N}.avro` for manifests,
  `snap-{snapshot id}-1-{commit uuid}.avro` for the list; the metadata path is
  `write.metadata.path` or `{location}/metadata`; Avro codec `write.avro.compression-codec`
  (default gzip).
- v3: the snapshot's `first-row-id` is the table's `next-row-id` and its `added-rows` what
  the manifest list writer assigned (`manifest_writers.ManifestListWriterV3`).
- The summary as Java fills it (`snapshot_summary`), plus `changes.summary`.

If writing fails, the files written so far are deleted (nothing references them); once
`produce_snapshot` returns, `ProducedSnapshot.written` lists them for the caller, who
deletes them only when the commit provably did not land.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyiceberg.table.refs import SnapshotRefType

from dvtool.errors import CommitConflictError, WriteRefusedError
from dvtool.iceberg.manifest_writers import (
    DEFAULT_AVRO_CODEC,
    avro_codec,
    blob_key,
    manifest_list_writer,
    read_manifest_list,
)
from dvtool.iceberg.snapshot_summary import ManifestCounts, SummaryBuilder

if TYPE_CHECKING:
    from pyiceberg.avro.codecs import AvroCompressionCodec
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile, ManifestFile
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot
    from pyiceberg.table.update import TableRequirement, TableUpdate

    from dvtool.iceberg.tables import IcebergTable

OPERATIONS = ("append", "overwrite", "delete", "replace")
METADATA_PATH = "write.metadata.path"
AVRO_COMPRESSION = "write.avro.compression-codec"
_LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class AddedFile:
    """A data or delete file the snapshot adds."""

    data_file: DataFile
    """pyiceberg DataFile (v3 fields set when relevant; `spec_id` its partition spec)."""
    data_sequence_number: int | None = None
    """Keep a rewritten file's data sequence number (MERGE); None: this commit's."""


@dataclass(frozen=True)
class SnapshotChanges:
    """What a snapshot changes."""

    operation: str
    """"append" | "overwrite" | "delete" | "replace"."""
    added: Sequence[AddedFile] = ()
    removed: frozenset[tuple[str, int | None]] = frozenset()
    """(file_path, content_offset): DV blobs share a Puffin path; None for other files."""
    summary: Mapping[str, str] = field(default_factory=dict)
    """Extra summary properties."""


@dataclass(frozen=True)
class ProducedSnapshot:
    """A snapshot ready to commit: the updates and requirements, and the files written."""

    snapshot: Snapshot
    updates: tuple[TableUpdate, ...]
    requirements: tuple[TableRequirement, ...]
    written: tuple[str, ...]
    """Manifest and manifest-list locations written."""


class RemovedFileNotLiveError(CommitConflictError):
    """A file the snapshot removes is not live in the base snapshot."""

    fallback_hint = "The table changed since the plan: run the command again to re-plan."


@dataclass
class _Commit:
    """One attempt's state: ids, names, and the files written so far."""

    metadata: TableMetadata
    io: FileIO
    snapshot_id: int
    sequence_number: int
    codec: AvroCompressionCodec
    metadata_path: str
    commit_uuid: str = field(default_factory=lambda: str(uuid.uuid4()))
    written: list[str] = field(default_factory=list)

    def new_output(self, name: str) -> Any:
        location = f"{self.metadata_path}/{name}"
        self.written.append(location)
        return self.io.new_output(location)

    def manifest_output(self) -> Any:
        return self.new_output(f"{self.commit_uuid}-m{len(self.written)}.avro")

    def writer(self, content: Any, spec_id: int) -> Any:
        from dvtool.iceberg.manifest_writers import manifest_writer

        return manifest_writer(
            self.metadata.format_version,
            content,
            self.metadata.specs()[spec_id],
            self.metadata.schema(),
            self.manifest_output(),
            self.snapshot_id,
            self.codec,
        )


def produce_snapshot(
    table: IcebergTable,
    io: FileIO,
    changes: SnapshotChanges,
    *,
    branch: str = "main",
    now_ms: int | None = None,
) -> ProducedSnapshot:
    """Write the manifests and manifest list of a new snapshot of `branch` applying
    `changes` on the branch's current snapshot; the updates and requirements to commit it.
    `io` must be able to write (catalog_commit.writable_io)."""
    metadata = table.metadata
    _check(metadata, changes)
    base = _branch_head(metadata, branch)
    commit = _Commit(
        metadata,
        io,
        new_snapshot_id(metadata),
        _last_sequence_number(metadata) + 1,
        _codec(metadata),
        metadata_path(metadata),
    )
    try:
        snapshot = _write_snapshot(commit, base, changes, now_ms)
    except BaseException:
        _delete_quietly(io, commit.written)
        raise
    return ProducedSnapshot(
        snapshot,
        _updates(metadata, snapshot, branch),
        _requirements(metadata, branch),
        tuple(commit.written),
    )


def _check(metadata: TableMetadata, changes: SnapshotChanges) -> None:
    if metadata.format_version < 2:
        raise WriteRefusedError(
            "dvtool writes Iceberg tables of format version 2 and 3, this one is version 1",
            hint="Upgrade the table (ALTER TABLE ... SET TBLPROPERTIES ('format-version'='2')).",
        )
    if changes.operation not in OPERATIONS:
        raise ValueError(f"unknown snapshot operation {changes.operation!r}")


def _branch_head(metadata: TableMetadata, branch: str) -> Snapshot | None:
    """The snapshot the new one builds on: the branch's current snapshot; for a branch
    that does not exist yet, the table's current snapshot (Java's
    `SnapshotUtil.latestSnapshot`); None for a table without snapshots."""
    ref = metadata.refs.get(branch)
    if ref is None:
        return metadata.current_snapshot()
    if ref.snapshot_ref_type != SnapshotRefType.BRANCH:
        raise WriteRefusedError(
            f"{branch!r} is a tag, not a branch: a tag cannot take new snapshots",
            hint="Write to a branch (main, or one made with ALTER TABLE ... CREATE BRANCH).",
        )
    snapshot = metadata.snapshot_by_id(ref.snapshot_id)
    if snapshot is None:
        raise ValueError(f"branch {branch!r} names a missing snapshot {ref.snapshot_id}")
    return snapshot


def new_snapshot_id(metadata: TableMetadata) -> int:
    """A positive 63-bit snapshot id the table does not have (Java: UUID halves xor-ed)."""
    taken = {s.snapshot_id for s in metadata.snapshots}
    while True:
        value = uuid.uuid4().int
        candidate = ((value >> 64) ^ value) & _LONG_MAX
        if candidate and candidate not in taken:
            return candidate


def metadata_path(metadata: TableMetadata) -> str:
    """Where new metadata files go: `write.metadata.path`, else `{location}/metadata`."""
    configured = metadata.properties.get(METADATA_PATH)
    if configured:
        return str(configured).rstrip("/")
    return f"{str(metadata.location).rstrip('/')}/metadata"


def _codec(metadata: TableMetadata) -> AvroCompressionCodec:
    """The Avro codec `write.avro.compression-codec` asks for; WriteRefusedError when it is
    unknown or its library is not installed (snappy needs python-snappy)."""
    from pyiceberg.avro.codecs import KNOWN_CODECS

    name = str(metadata.properties.get(AVRO_COMPRESSION, DEFAULT_AVRO_CODEC))
    try:
        codec = avro_codec(name)
        implementation = KNOWN_CODECS[codec]
        if implementation is not None:
            implementation.compress(b"")
    except (ValueError, ImportError) as e:
        raise WriteRefusedError(
            f"the table's {AVRO_COMPRESSION} is {name!r}, which dvtool cannot write: {e}",
            hint="Install the codec's library (pip install 'pyiceberg[snappy]' for snappy), "
            "or set the property to gzip, zstd or uncompressed.",
        ) from None
    return codec


def _write_snapshot(
    commit: _Commit, base: Snapshot | None, changes: SnapshotChanges, now_ms: int | None
) -> Snapshot:
    """Write the manifests and the manifest list; the new snapshot."""
    from pyiceberg.manifest import ManifestContent
    from pyiceberg.table.snapshots import Operation, Snapshot, Summary

    from dvtool.iceberg.base_manifests import filter_manifests

    metadata = commit.metadata
    summary = SummaryBuilder(metadata)
    base_manifests = (
        read_manifest_list(commit.io, base.manifest_list, metadata.format_version) if base else []
    )
    filtered = filter_manifests(commit, base_manifests, changes.removed, summary)
    new_data = _write_added(commit, changes.added, ManifestContent.DATA, summary)
    new_deletes = _write_added(commit, changes.added, ManifestContent.DELETES, summary)
    manifests = [*new_data, *filtered.data, *new_deletes, *filtered.deletes]
    first_row_id = _first_row_id(metadata)
    next_row_id = _write_manifest_list(commit, base, manifests, first_row_id)
    counts = ManifestCounts(
        created=len(new_data) + len(new_deletes) + filtered.replaced,
        kept=filtered.kept,
        replaced=filtered.replaced,
    )
    properties = summary.build(changes.summary, counts, base.summary if base else None)
    properties.pop("operation", None)
    added_rows = None if next_row_id is None or first_row_id is None else next_row_id - first_row_id
    return Snapshot.model_validate(
        {
            "snapshot-id": commit.snapshot_id,
            "parent-snapshot-id": base.snapshot_id if base else None,
            "sequence-number": commit.sequence_number,
            "timestamp-ms": now_ms if now_ms is not None else int(time.time() * 1000),
            "manifest-list": commit.written[-1],
            "summary": Summary(operation=Operation(changes.operation), **properties),
            "schema-id": metadata.current_schema_id,
            "first-row-id": first_row_id,
            "added-rows": added_rows,
        }
    )


def _last_sequence_number(metadata: TableMetadata) -> int:
    return int(getattr(metadata, "last_sequence_number", 0))


def _first_row_id(metadata: TableMetadata) -> int | None:
    if metadata.format_version < 3:
        return None
    next_row_id = getattr(metadata, "next_row_id", None)
    return int(next_row_id) if next_row_id is not None else 0


def _spec_id(data_file: DataFile, metadata: TableMetadata) -> int:
    spec_id = getattr(data_file, "_spec_id", None)
    return int(spec_id) if spec_id is not None else int(metadata.default_spec_id)


def _write_added(
    commit: _Commit, added: Sequence[AddedFile], content: Any, summary: SummaryBuilder
) -> list[ManifestFile]:
    """New manifests for the added files of `content` (DATA or DELETES), one per spec."""
    from pyiceberg.manifest import ManifestContent, ManifestEntry, ManifestEntryStatus

    by_spec: dict[int, list[AddedFile]] = {}
    for item in added:
        is_data = int(item.data_file.content) == 0
        if is_data == (content == ManifestContent.DATA):
            by_spec.setdefault(_spec_id(item.data_file, commit.metadata), []).append(item)
    manifests = []
    for spec_id, items in by_spec.items():
        with commit.writer(content, spec_id) as writer:
            for item in items:
                item.data_file.spec_id = spec_id
                writer.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED,
                        snapshot_id=commit.snapshot_id,
                        sequence_number=item.data_sequence_number,
                        data_file=item.data_file,
                    )
                )
                summary.added(item.data_file)
        manifests.append(writer.to_manifest_file())
    return manifests


def _write_manifest_list(
    commit: _Commit,
    base: Snapshot | None,
    manifests: list[ManifestFile],
    first_row_id: int | None,
) -> int | None:
    """Write the manifest list (the last file written); v3: the next row id after it."""
    name = f"snap-{commit.snapshot_id}-1-{commit.commit_uuid}.avro"
    with manifest_list_writer(
        commit.metadata.format_version,
        commit.new_output(name),
        commit.snapshot_id,
        base.snapshot_id if base else None,
        commit.sequence_number,
        first_row_id,
        commit.codec,
    ) as writer:
        writer.add_manifests(manifests)
    next_row_id = getattr(writer, "next_row_id", None)
    return int(next_row_id) if next_row_id is not None else None


def _updates(metadata: TableMetadata, snapshot: Snapshot, branch: str) -> tuple[TableUpdate, ...]:
    """Add the snapshot, point the branch at it (keeping the branch's retention settings)."""
    from pyiceberg.table.update import AddSnapshotUpdate, SetSnapshotRefUpdate

    ref = metadata.refs.get(branch)
    return (
        AddSnapshotUpdate(snapshot=snapshot),
        SetSnapshotRefUpdate.model_validate(
            {
                "ref-name": branch,
                "type": SnapshotRefType.BRANCH,
                "snapshot-id": snapshot.snapshot_id,
                "max-ref-age-ms": ref.max_ref_age_ms if ref else None,
                "max-snapshot-age-ms": ref.max_snapshot_age_ms if ref else None,
                "min-snapshots-to-keep": ref.min_snapshots_to_keep if ref else None,
            }
        ),
    )


def _requirements(metadata: TableMetadata, branch: str) -> tuple[TableRequirement, ...]:
    """The table is the same table, and the branch still where it was (or still absent)."""
    from pyiceberg.table.update import AssertRefSnapshotId, AssertTableUUID

    ref = metadata.refs.get(branch)
    return (
        AssertTableUUID(uuid=metadata.table_uuid),
        AssertRefSnapshotId.model_validate(
            {"ref": branch, "snapshot-id": ref.snapshot_id if ref else None}
        ),
    )


def _delete_quietly(io: FileIO, locations: Sequence[str]) -> None:
    """Delete files this attempt wrote and nothing references; a failure to delete one
    leaves an orphan for `vacuum`, not an error that hides the first one."""
    for location in locations:
        try:
            io.delete(location)
        except Exception:  # best effort: the original error matters
            continue


def removed_key(data_file: DataFile) -> tuple[str, int | None]:
    """The key of a live file in `SnapshotChanges.removed`."""
    return blob_key(data_file)
