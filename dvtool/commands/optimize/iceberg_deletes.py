"""Rewriting an Iceberg table's deletes without touching its data files: REWRITE and CONVERT.

The two delete compactions of the Iceberg design text (iceberg-cow-and-mor-review.txt) that
leave data files as they are (Iceberg Spark's `rewrite_position_delete_files` is the
reference):

- **REWRITE** (`--rewrite-deletes`): on v2 tables, each partition whose position deletes are
  spread over several files, or hold deletes of files no longer live, gets one position
  delete file with the live positions of all of them (positions of removed data files and
  positions past a file's end are dropped); on v3 tables every Parquet position delete file
  is turned into deletion vectors (the path from v2 to v3), merged with each data file's
  DV. Delete files that apply to no live data file (dangling) are dropped.
- **CONVERT** (`--convert-equality`): a scan of the key columns turns equality deletes into
  position deletes (v2) or DVs (v3) for every live data file they apply to; the equality
  delete files are then removed. A data file whose rows all go is removed.

Both plan on the current snapshot and commit one snapshot (operation `replace` when only
delete files change, `delete` when data files go) through `dvtool.iceberg.transaction`,
validated against what landed meanwhile: a data file added or removed concurrently (a
compaction can keep old sequence numbers, to which equality deletes would still apply) or a
delete file this plan replaces being removed makes it plan again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyroaring import BitMap64

from dvtool.errors import CommitConflictError
from dvtool.iceberg.delete_files import FileNamer
from dvtool.iceberg.delete_index import DeleteContent, dangling_deletes
from dvtool.iceberg.live_files import Deleted, DeletedBefore, LiveDataFile, all_rows
from dvtool.iceberg.row_deletes import EntryKey, file_scoped, write_dvs, write_position_files
from dvtool.iceberg.snapshot_producer import SnapshotChanges

if TYPE_CHECKING:
    from dvtool.commands.iceberg_partition_filter import PartitionMatch
    from dvtool.iceberg.concurrent_changes import ConcurrentChanges
    from dvtool.iceberg.delete_index import DeleteFileEntry
    from dvtool.iceberg.live_files import LiveFiles
    from dvtool.iceberg.tables import IcebergTable
    from dvtool.iceberg.transaction import Written


@dataclass
class DeletePlan:
    """What a REWRITE or CONVERT does: per data file the positions its new delete file or
    DV holds, the data files that go, the entries removed."""

    positions: list[tuple[LiveDataFile, BitMap64]] = field(default_factory=list)
    removed_data: list[LiveDataFile] = field(default_factory=list)
    removed: set[EntryKey] = field(default_factory=set)
    rows_converted: int = 0
    deletion_vectors: bool = False
    """v3: the new deletes are DVs, which must stay one per data file."""
    combine: bool = False
    """v2 REWRITE: one position delete file per partition, whatever the granularity."""

    @property
    def empty(self) -> bool:
        return not (self.positions or self.removed_data or self.removed)


def _live_positions(deleted: Deleted, records: int) -> BitMap64:
    """The positions deleted by position that name a row of the file."""
    return deleted.positional & all_rows(records)


def plan_rewrite(
    table: IcebergTable, live: LiveFiles, where: PartitionMatch | None = None
) -> DeletePlan:
    """REWRITE: combine position deletes per partition (v2), or turn them into DVs (v3);
    with `where` (`--where`), only the delete files of the partitions it may match, as
    Iceberg Spark's `rewrite_position_delete_files(where => ...)` (dangling ones included:
    those of other partitions stay, as Spark leaves them)."""
    plan = DeletePlan(deletion_vectors=table.metadata.format_version >= 3, combine=True)

    def in_scope(d: DeleteFileEntry) -> bool:
        return where is None or where(d.spec_id, d.partition)

    dangling = dangling_deletes(live.deletes, live.index, (d.entry for d in live.data))
    plan.removed |= {
        (d.path, d.content_offset)
        for d in dangling
        if d.content is not DeleteContent.EQUALITY and in_scope(d)
    }
    v3 = table.metadata.format_version >= 3
    positional = [d for d in live.deletes if d.content is DeleteContent.POSITION and in_scope(d)]
    if v3:
        chosen = {(d.path, d.content_offset) for d in positional}
    else:
        chosen = _crowded_partitions(positional, plan.removed)
    if not chosen:
        return plan
    plan.removed |= chosen
    touched = [
        f
        for f in live.data
        if any(
            (e.path, e.content_offset) in chosen for e in live.index.for_data_file(f.entry).position
        )
    ]
    reader = DeletedBefore(table.io, live.index, with_equality=False)
    for f, deleted in zip(touched, reader.load(touched), strict=True):
        if v3:
            plan.removed |= file_scoped(deleted.applied, f.path)
        plan.positions.append((f, _live_positions(deleted, f.entry.record_count)))
    return plan


def _crowded_partitions(positional: list[Any], dropped: set[EntryKey]) -> set[EntryKey]:
    """The position delete files of partitions holding more than one (after the dangling
    ones are dropped): they are combined into one per partition."""
    by_partition: dict[tuple[int, tuple[Any, ...]], list[Any]] = {}
    for d in positional:
        if (d.path, d.content_offset) not in dropped:
            by_partition.setdefault((d.spec_id, d.partition), []).append(d)
    return {
        (d.path, d.content_offset)
        for files in by_partition.values()
        if len(files) > 1
        for d in files
    }


def plan_convert(table: IcebergTable, live: LiveFiles) -> DeletePlan:
    """CONVERT: the rows equality deletes match become positions; the equality files go."""
    plan = DeletePlan(deletion_vectors=table.metadata.format_version >= 3)
    equality = [d for d in live.deletes if d.content is DeleteContent.EQUALITY]
    if not equality:
        return plan
    plan.removed |= {(d.path, d.content_offset) for d in equality}
    touched = [f for f in live.data if live.index.for_data_file(f.entry).equality]
    v3 = table.metadata.format_version >= 3
    for f, deleted in zip(touched, DeletedBefore(table.io, live.index).load(touched), strict=True):
        records = f.entry.record_count
        gone = deleted.positional | deleted.by_equality
        if records <= 0 or gone.rank(records - 1) >= records:
            plan.removed_data.append(f)
            plan.removed |= {(f.path, None)} | file_scoped(deleted.applied, f.path)
            continue
        plan.rows_converted += len(deleted.by_equality)
        if v3:
            plan.removed |= file_scoped(deleted.applied, f.path)
            plan.positions.append((f, _live_positions(deleted, records) | deleted.by_equality))
        elif len(deleted.by_equality):
            plan.positions.append((f, deleted.by_equality))
    return plan


def write_plan(table: IcebergTable, plan: DeletePlan, written: Written) -> SnapshotChanges:
    """Write the new delete files; the snapshot's changes."""
    metadata = table.metadata
    namer = FileNamer.for_table(table.location, metadata.properties)
    if metadata.format_version >= 3:
        added = write_dvs(written.io, namer, plan.positions, written)
    else:
        granularity = "partition" if plan.combine else None
        added = write_position_files(
            written.io, namer, metadata, plan.positions, written, granularity
        )
    operation = "delete" if plan.removed_data else "replace"
    return SnapshotChanges(operation, tuple(added), frozenset(plan.removed))


def validate_delete_rewrite(plan: DeletePlan, changes: ConcurrentChanges) -> None:
    """CommitConflictError when what landed meanwhile invalidates the plan."""
    if changes.added_data or changes.removed_data:
        raise CommitConflictError(
            "data files were added or removed concurrently; the deletes are planned again"
        )
    removed = {(d.path, d.content_offset) for d in changes.removed_deletes}
    if removed & plan.removed:
        raise CommitConflictError("a delete file this rewrite replaces was removed concurrently")
    if plan.deletion_vectors and changes.added_deletes:
        touched = {f.path for f, _ in plan.positions}
        if changes.position_deletes_on(touched):
            raise CommitConflictError(
                "a concurrent commit added deletes to a data file this rewrite writes deletes for"
            )
