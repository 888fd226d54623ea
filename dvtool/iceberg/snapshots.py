"""Which snapshot to read (current, by id, as of a time) and the table's snapshot history.

Time travel as Iceberg defines it (spec.md "Snapshots", `snapshot-log`): the snapshot as of
a time is the one that was current then, the last snapshot-log entry at or before it, not
the newest snapshot created before it (a rollback makes the two differ). A snapshot whose
entries have expired from the log but that is still in `snapshots` is found by id only.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from dvtool.errors import UsageError, VersionNotFoundError

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")


def select_snapshot(
    metadata: TableMetadata, snapshot_id: int | None = None, timestamp_ms: int | None = None
) -> Snapshot | None:
    """The snapshot to read: the current one (None for a table without snapshots), the one
    with `snapshot_id`, or the one current at `timestamp_ms`."""
    if snapshot_id is not None and timestamp_ms is not None:
        raise UsageError("--version and --timestamp cannot be used together")
    if snapshot_id is not None:
        found = metadata.snapshot_by_id(snapshot_id)
        if found is None:
            raise VersionNotFoundError(
                f"the table has no snapshot {snapshot_id}",
                hint="`dvtool inspect TABLE --history` lists its snapshots.",
            )
        return found
    if timestamp_ms is not None:
        return snapshot_as_of(metadata, timestamp_ms)
    return metadata.current_snapshot()


def snapshot_as_of(metadata: TableMetadata, timestamp_ms: int) -> Snapshot:
    """The snapshot current at `timestamp_ms` by the snapshot log."""
    current = None
    for entry in metadata.snapshot_log:
        if entry.timestamp_ms <= timestamp_ms:
            current = entry.snapshot_id
    if current is None:
        first = min((e.timestamp_ms for e in metadata.snapshot_log), default=None)
        since = f" (its snapshot log starts at {_iso(first)})" if first is not None else ""
        raise VersionNotFoundError(
            f"the table had no current snapshot at {_iso(timestamp_ms)}{since}",
            hint="`dvtool inspect TABLE --history` lists its snapshots and their times.",
        )
    snapshot = metadata.snapshot_by_id(current)
    if snapshot is None:
        raise VersionNotFoundError(
            f"snapshot {current}, current at {_iso(timestamp_ms)}, has expired",
            hint="`dvtool inspect TABLE --history` lists the snapshots the table keeps.",
        )
    return snapshot


@dataclass(frozen=True)
class SnapshotEntry:
    """One snapshot as `inspect --history` shows it; `summary` is the snapshot's summary
    (operation aside) with counts as numbers."""

    snapshot_id: int
    parent_id: int | None
    sequence_number: int
    timestamp: int
    operation: str | None
    summary: dict[str, Any]
    current: bool
    """Whether this is the table's current snapshot."""
    in_current_lineage: bool
    """Whether it is the current snapshot or one of its ancestors (not a rolled-back one)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def history(metadata: TableMetadata, limit: int | None = None) -> list[SnapshotEntry]:
    """The newest `limit` snapshots (all when None), newest first (by sequence number, then
    time: v1 tables have no sequence numbers)."""
    lineage = _current_lineage(metadata)
    current = metadata.current_snapshot_id
    ordered = sorted(
        metadata.snapshots,
        key=lambda s: (s.sequence_number or 0, s.timestamp_ms, s.snapshot_id),
        reverse=True,
    )
    return [_entry(s, s.snapshot_id == current, s.snapshot_id in lineage) for s in ordered][:limit]


def _current_lineage(metadata: TableMetadata) -> set[int]:
    seen: set[int] = set()
    snapshot = metadata.current_snapshot()
    while snapshot is not None and snapshot.snapshot_id not in seen:
        seen.add(snapshot.snapshot_id)
        parent = snapshot.parent_snapshot_id
        snapshot = metadata.snapshot_by_id(parent) if parent is not None else None
    return seen


def _entry(snapshot: Snapshot, current: bool, in_lineage: bool) -> SnapshotEntry:
    summary = snapshot.summary
    values = dict(summary.additional_properties) if summary is not None else {}
    return SnapshotEntry(
        snapshot_id=snapshot.snapshot_id,
        parent_id=snapshot.parent_snapshot_id,
        sequence_number=snapshot.sequence_number or 0,
        timestamp=snapshot.timestamp_ms,
        operation=str(summary.operation.value) if summary is not None else None,
        summary={k: _number(v) for k, v in values.items()},
        current=current,
        in_current_lineage=in_lineage,
    )


def _number(value: Any) -> Any:
    """A summary value as a number when it is one (Iceberg writes them as strings)."""
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return value


def operation_of(snapshot: Snapshot | None) -> str | None:
    """The operation of a snapshot's summary (append, overwrite, delete, replace)."""
    if snapshot is None or snapshot.summary is None:
        return None
    return str(snapshot.summary.operation.value)
