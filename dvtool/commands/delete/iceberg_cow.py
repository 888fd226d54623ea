"""`dvtool delete --mode cow` on Iceberg tables: copy-on-write, as Iceberg Spark's DELETE with
`write.delete.mode=copy-on-write` (Iceberg's default) commits it.

The plan and scan are the merge-on-read delete's (`iceberg_plan`); then every touched data
file is rewritten, on the scan's engine (`write_rewrites`: arrow or Spark's executors),
without the matching rows and the rows deleted before (its DV, position
deletes, equality-deleted rows), keeping the order and, v3, the rows' `_row_id` and
`_last_updated_sequence_number` (`dvtool.iceberg.data_file_rewrite`); a file whose rows all
go is removed without a replacement. The snapshot (Java's `OverwriteFiles`: operation
`overwrite`, `delete` when no file is added) gives the new files this commit's sequence
number and removes the rewritten files and the delete files that applied to them alone (or
only to them and other rewritten files). No delete file is added.

Validation of what landed meanwhile (Java's copy-on-write `validateNoConflictingData` and
`validateNoConflictingDeletes`, serializable): a data file the delete read was removed, a
data file was added (it may hold matching rows), a delete file this delete removes was
removed, or deletes were added that apply to a rewritten file - position deletes and DVs,
and equality deletes too: the new files have a higher sequence number than a concurrent
equality delete, which would then no longer apply to the rows it deleted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from dvtool.commands.optimize.iceberg_rewrites import (
    Input,
    RewriteBin,
    RewritePlan,
    added_bytes,
    unused_deletes,
    validate_rewrite,
    write_rewrites,
)
from dvtool.errors import CommitConflictError
from dvtool.iceberg.delete_index import DeleteContent, partition_key
from dvtool.iceberg.live_files import Deleted
from dvtool.iceberg.snapshot_files import unpartitioned_specs

if TYPE_CHECKING:
    from dvtool.commands.delete.command import FileChange
    from dvtool.commands.delete.iceberg_plan import Plan, Touched
    from dvtool.engines.base import Engine
    from dvtool.iceberg.concurrent_changes import ConcurrentChanges
    from dvtool.iceberg.snapshot_producer import SnapshotChanges
    from dvtool.iceberg.transaction import Written


@dataclass(frozen=True)
class CowWrite:
    """The rewritten files' snapshot changes, the write metrics, and the validation."""

    changes: SnapshotChanges
    metrics: dict[str, int]
    validate: Callable[[ConcurrentChanges], None]


def cow_changes(changes: Sequence[FileChange]) -> list[FileChange]:
    """The plan's file changes as copy-on-write does them: `rewrite` where merge-on-read
    would write deletes."""
    return [replace(c, action="rewrite") if c.action == "dv" else c for c in changes]


def write_cow(
    plan: Plan, touched: Sequence[Touched], written: Written, engine: Engine | None = None
) -> CowWrite:
    """Rewrite the touched files without their deleted rows (module docstring), on
    `engine` (the scan's; default arrow)."""
    started = time.monotonic()
    inputs = [_input(t) for t in touched]
    rewrite = RewritePlan(bins=[RewriteBin((i,), None) for i in inputs])
    rewrite.removed_deletes = unused_deletes(plan.live, inputs, dangling=False)
    table = plan.table
    changes = write_rewrites(table, rewrite, written, operation="overwrite", engine=engine)
    if not changes.added:
        changes = replace(changes, operation="delete")
    metrics = {
        "numRewrittenFiles": sum(1 for b in rewrite.bins if b.remaining_rows),
        "numAddedDataFiles": len(changes.added),
        "numAddedBytes": added_bytes(changes),
        "numRemovedDeleteEntries": len(rewrite.removed_deletes),
        "writeTimeMs": int((time.monotonic() - started) * 1000),
    }
    return CowWrite(changes, metrics, lambda c: validate_cow(plan, rewrite, c))


def _input(t: Touched) -> Input:
    """The file with every row it loses: the new matches and those deleted before."""
    before = t.before
    gone = before.positional | t.new_rows
    return Input(t.file, Deleted(before.applied, gone, before.by_equality))


def validate_cow(plan: Plan, rewrite: RewritePlan, changes: ConcurrentChanges) -> None:
    """CommitConflictError when what landed meanwhile invalidates the delete."""
    read = {live.path for live in plan.whole + plan.scan}
    if read & changes.removed_data_paths():
        raise CommitConflictError("a data file this delete read was removed by a concurrent commit")
    if changes.added_data:
        raise CommitConflictError(
            f"{len(changes.added_data)} data file(s) were added concurrently; they may hold "
            "matching rows"
        )
    validate_rewrite(rewrite, changes)  # position deletes and DVs on rewritten files
    inputs = rewrite.inputs
    partitions = {partition_key(i.file.entry.spec_id, i.file.entry.partition) for i in inputs}
    unpartitioned = unpartitioned_specs(plan.table.metadata)
    if any(
        d.content is DeleteContent.EQUALITY
        and (d.spec_id in unpartitioned or partition_key(d.spec_id, d.partition) in partitions)
        for d in changes.added_deletes
    ):
        raise CommitConflictError(
            "a concurrent commit added equality deletes to a partition this delete rewrites"
        )
