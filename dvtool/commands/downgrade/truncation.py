"""History truncation for `dvtool downgrade --truncate-history`: the log entries before the
history boundary, and their deletion.

The same rules as the metadata cleanup (PROTOCOL.md "Metadata Cleanup",
`dvtool.delta.protocol.log_cleanup`) with the boundary as the cutoff checkpoint: commits,
checkpoints,
checksums and their hidden Hadoop `.crc` files before it, log compactions starting at or
before it, staged commits at or before it, and sidecars no remaining checkpoint references
that were written before a cutoff (so that a checkpoint being written concurrently keeps its
own). Listing, reading checkpoints and deleting are `dvtool.commands.log_cleanup`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from dvtool.delta.log.cleanup import list_log_entries, referenced_sidecars
from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.protocol.log_cleanup import (
    SIDECAR_DIR,
    STAGED_COMMITS_DIR,
    expired_entries,
    expired_sidecars,
    sidecar_holders,
)
from dvtool.delta.protocol.log_files import parse_log_name


def truncation_plan(log: DeltaLog, boundary: int, sidecar_cutoff_ms: int) -> list[tuple[str, int]]:
    """(name under _delta_log, version) of every log entry a truncation before `boundary`
    deletes, oldest version first: commits, checkpoints, checksums and their hidden Hadoop
    .crc files before it, log compactions starting at or before it, then the sidecars no
    remaining checkpoint references that were written before `sidecar_cutoff_ms` (so an
    in-progress checkpoint keeps its own), with version -1."""
    if boundary <= 0:
        return []
    entries = list_log_entries(log)
    expired = expired_entries(entries + list_log_entries(log, STAGED_COMMITS_DIR), boundary)
    sidecars = list_log_entries(log, SIDECAR_DIR)
    if expired_sidecars(sidecars, (), sidecar_cutoff_ms):  # read checkpoints only if needed
        files = [f for e in entries if (f := parse_log_name(e.name)) is not None]
        referenced = referenced_sidecars(log, sidecar_holders(files, boundary))
        expired += expired_sidecars(sidecars, referenced, sidecar_cutoff_ms)
    return [(f.name, -1 if f.version is None else f.version) for f in expired]


def delete_history(log: DeltaLog, boundary: int, plan: Sequence[tuple[str, int]]) -> list[str]:
    """Delete the planned log entries before `boundary`; returns their names. A
    `_last_checkpoint` hint older than the boundary goes too: it would point to a deleted
    checkpoint, and the drop's checkpoint writes a new one."""
    storage = log.storage
    hint = log.last_checkpoint_hint()
    if hint is not None and hint < boundary:
        storage.delete(storage.join("_delta_log/_last_checkpoint"))
        storage.delete(storage.join("_delta_log/._last_checkpoint.crc"))
    storage.delete_many(storage.join(f"_delta_log/{name}") for name, _ in plan)
    return [name for name, _ in plan]
