"""What other writers committed since a transaction's base snapshot, for its validation.

Iceberg's optimistic concurrency (Iceberg Java's `MergingSnapshotProducer.validate*`): a
commit that finds the table moved on re-applies its changes on the new current snapshot
only after checking that what landed in between does not invalidate them. This module
reads what landed: the snapshots from the branch's new head back to the base (by parent
ids), and the manifest entries each of them added or deleted (entries whose snapshot id is
that snapshot's, in the manifests it added). A base that is no longer an ancestor of the
head (a rollback, an expired history) is reported as such: nothing can be re-applied then.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dvtool.iceberg.delete_index import DataFileEntry, DeleteContent, DeleteFileEntry
from dvtool.iceberg.snapshot_files import data_entry, delete_entry, manifest_entries

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot


@dataclass
class ConcurrentChanges:
    """The changes committed after the base snapshot, oldest first within each list."""

    snapshots: list[int] = field(default_factory=list)
    added_data: list[DataFileEntry] = field(default_factory=list)
    removed_data: list[DataFileEntry] = field(default_factory=list)
    added_deletes: list[DeleteFileEntry] = field(default_factory=list)
    removed_deletes: list[DeleteFileEntry] = field(default_factory=list)
    base_lost: bool = False
    """The base snapshot is no longer an ancestor of the branch head."""
    format_version_changed: bool = False
    """The table's format version is not the base's (e.g. upgraded to v3)."""

    @property
    def empty(self) -> bool:
        return not self.snapshots and not self.base_lost and not self.format_version_changed

    def removed_data_paths(self) -> set[str]:
        return {d.path for d in self.removed_data}

    def position_deletes_on(self, data_paths: set[str]) -> list[DeleteFileEntry]:
        """The added position deletes (files or DVs) that may apply to a file in
        `data_paths`: by the data file they reference, else by their `file_path` bounds.
        Equality deletes never: they apply by value, whatever a writer planned by position.
        A v3 writer that writes a file's one DV must not land beside another new one."""
        return [d for d in self.added_deletes if _may_apply(d, data_paths)]


def _may_apply(delete: DeleteFileEntry, data_paths: set[str]) -> bool:
    if delete.content is DeleteContent.EQUALITY:
        return False
    target = delete.target()
    if target is not None:
        return target in data_paths
    return any(delete.may_reference(path) for path in data_paths)


def snapshots_since(
    metadata: TableMetadata, base_id: int | None, branch: str = "main"
) -> tuple[list[Snapshot], bool]:
    """The snapshots on `branch` after `base_id`, oldest first, and whether the base was
    found among the head's ancestors (always true when the branch has not moved)."""
    ref = metadata.refs.get(branch)
    head = ref.snapshot_id if ref is not None else None
    found: list[Snapshot] = []
    current = head
    while current is not None and current != base_id:
        snapshot = metadata.snapshot_by_id(current)
        if snapshot is None:
            return list(reversed(found)), False
        found.append(snapshot)
        current = snapshot.parent_snapshot_id
    return list(reversed(found)), current == base_id


def changes_since(
    metadata: TableMetadata,
    io: FileIO,
    base_id: int | None,
    base_format_version: int,
    branch: str = "main",
) -> ConcurrentChanges:
    """Everything committed on `branch` after the snapshot `base_id` (None: an empty
    table's base)."""
    snapshots, found = snapshots_since(metadata, base_id, branch)
    changes = ConcurrentChanges(
        snapshots=[s.snapshot_id for s in snapshots],
        base_lost=not found,
        format_version_changed=metadata.format_version != base_format_version,
    )
    for snapshot in snapshots:
        _collect(snapshot, metadata, io, changes)
    return changes


def _collect(
    snapshot: Snapshot, metadata: TableMetadata, io: FileIO, out: ConcurrentChanges
) -> None:
    from pyiceberg.manifest import ManifestEntryStatus

    for manifest in snapshot.manifests(io):
        if manifest.added_snapshot_id != snapshot.snapshot_id:
            continue
        entries: list[Any] = manifest_entries(manifest, io, metadata.format_version, deleted=True)
        for entry in entries:
            if entry.snapshot_id != snapshot.snapshot_id:
                continue
            added = entry.status == ManifestEntryStatus.ADDED
            removed = entry.status == ManifestEntryStatus.DELETED
            if int(entry.data_file.content) == 0:
                if added:
                    out.added_data.append(data_entry(entry))
                elif removed:
                    out.removed_data.append(data_entry(entry))
            elif added:
                out.added_deletes.append(delete_entry(entry))
            elif removed:
                out.removed_deletes.append(delete_entry(entry))
