"""Which snapshots and refs of an Iceberg table expire: Iceberg Java's `RemoveSnapshots`.

Pure (no IO): given the table metadata, the time and the policy, the plan names the refs
and snapshots to remove and the pyiceberg updates and requirements that commit it. The
rules are Java's (`RemoveSnapshots.internalApply`), so that `dvtool vacuum` and Iceberg
Spark's `expire_snapshots` keep the same snapshots:

1. Refs. `main` is always kept. Another branch or tag is removed when its snapshot is
   older than its `max-ref-age-ms` (default: the table's `history.expire.max-ref-age-ms`,
   unbounded), or when its snapshot does not exist.
2. Snapshots every kept ref points at are kept (the current snapshot is main's).
3. Each kept branch keeps its ancestors, newest first, while fewer than its
   `min-snapshots-to-keep` are kept or the ancestor is not older than its
   `max-snapshot-age-ms` (defaults: the table's `history.expire.min-snapshots-to-keep`, 1,
   and the expiry cutoff, `now - history.expire.max-snapshot-age-ms`, 5 days); the first
   ancestor that fails both ends the walk (older ancestors go, even if younger ones follow).
4. Snapshots in no kept branch's history and on no kept tag are kept while they are not
   older than the cutoff.
Everything else expires. `gc.enabled=false` refuses the expiry, as Java does (the table's
files may be shared with another table).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dvtool.errors import UsageError, WriteRefusedError

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.refs import SnapshotRef
    from pyiceberg.table.snapshots import Snapshot
    from pyiceberg.table.update import TableRequirement, TableUpdate

MAIN_BRANCH = "main"
MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
MAX_SNAPSHOT_AGE_MS_DEFAULT = 5 * 24 * 3600 * 1000
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
MIN_SNAPSHOTS_TO_KEEP_DEFAULT = 1
MAX_REF_AGE_MS = "history.expire.max-ref-age-ms"
GC_ENABLED = "gc.enabled"


@dataclass(frozen=True)
class ExpiryPolicy:
    """The table-wide expiry settings: snapshots older than `older_than_ms` may expire;
    each branch keeps at least `min_snapshots_to_keep`; refs older than `max_ref_age_ms`
    (None: no limit) other than main are removed. A ref's own settings override these."""

    now_ms: int
    older_than_ms: int
    min_snapshots_to_keep: int
    max_ref_age_ms: int | None = None


def int_property(properties: Mapping[str, str], name: str, default: int | None) -> int | None:
    """A table property read as an integer (Java's `PropertyUtil.propertyAsLong`);
    WriteRefusedError when it is set to something else: the expiry cannot be planned."""
    value = properties.get(name)
    if value is None:
        return default
    try:
        return int(value.strip())
    except ValueError:
        raise WriteRefusedError(
            f"table property {name}={value!r} is not an integer: the snapshot expiry "
            "cannot be planned",
            hint=f"Fix the property (ALTER TABLE ... SET TBLPROPERTIES ('{name}'=...)).",
        ) from None


def max_snapshot_age_ms(metadata: TableMetadata) -> int:
    """The table's snapshot retention, `history.expire.max-snapshot-age-ms` (5 days)."""
    age = int_property(metadata.properties, MAX_SNAPSHOT_AGE_MS, MAX_SNAPSHOT_AGE_MS_DEFAULT)
    assert age is not None
    return age


def table_policy(
    metadata: TableMetadata,
    now_ms: int,
    max_age_ms: int | None = None,
    retain_last: int | None = None,
) -> ExpiryPolicy:
    """The policy of the table's properties; `max_age_ms` and `retain_last` replace the
    table's age and minimum count (as Spark's `older_than` and `retain_last` do)."""
    require_gc_enabled(metadata)
    if retain_last is not None and retain_last < 1:
        raise UsageError(f"the number of snapshots to retain must be at least 1, not {retain_last}")
    age = max_snapshot_age_ms(metadata) if max_age_ms is None else max_age_ms
    minimum = retain_last
    if minimum is None:
        minimum = int_property(
            metadata.properties, MIN_SNAPSHOTS_TO_KEEP, MIN_SNAPSHOTS_TO_KEEP_DEFAULT
        )
        assert minimum is not None
    max_ref_age = int_property(metadata.properties, MAX_REF_AGE_MS, None)
    return ExpiryPolicy(now_ms, now_ms - age, minimum, max_ref_age)


def require_gc_enabled(metadata: TableMetadata) -> None:
    """WriteRefusedError when the table sets `gc.enabled=false` (Java refuses too)."""
    if metadata.properties.get(GC_ENABLED, "true").strip().lower() == "false":
        raise WriteRefusedError(
            "the table sets gc.enabled=false: its files may be shared with other tables, so "
            "snapshots are not expired and no file is deleted",
            hint="Set gc.enabled=true if the table owns its files.",
        )


@dataclass(frozen=True)
class ExpiryPlan:
    """What expires: snapshots (oldest first) and refs; the commit's updates and
    requirements (empty when nothing expires)."""

    expired_snapshot_ids: tuple[int, ...]
    kept_snapshot_ids: frozenset[int]
    expired_refs: tuple[str, ...]
    updates: tuple[TableUpdate, ...]
    requirements: tuple[TableRequirement, ...]

    @property
    def changes_table(self) -> bool:
        return bool(self.expired_snapshot_ids or self.expired_refs)


def plan_expiry(metadata: TableMetadata, policy: ExpiryPolicy) -> ExpiryPlan:
    """The refs and snapshots that expire under `policy` (the rules in the module
    docstring), with the updates that remove them and the requirements that the refs
    have not moved since `metadata` (else the plan is stale: refresh and plan again)."""
    snapshots = {s.snapshot_id: s for s in metadata.snapshots}
    refs = dict(metadata.refs)
    kept_refs = {name: ref for name, ref in refs.items() if _ref_kept(name, ref, snapshots, policy)}
    kept = {ref.snapshot_id for ref in kept_refs.values()}
    for ref in kept_refs.values():
        if _is_branch(ref):
            kept |= _branch_snapshots_kept(ref, snapshots, policy)
    kept |= _unreferenced_snapshots_kept(kept_refs.values(), snapshots, policy)
    if metadata.current_snapshot_id is not None:
        kept.add(metadata.current_snapshot_id)  # always main's; kept whatever the refs say
    expired = sorted(
        (s for s in metadata.snapshots if s.snapshot_id not in kept),
        key=lambda s: (s.timestamp_ms, s.snapshot_id),
    )
    expired_refs = tuple(sorted(set(refs) - set(kept_refs)))
    expired_ids = tuple(s.snapshot_id for s in expired)
    return ExpiryPlan(
        expired_snapshot_ids=expired_ids,
        kept_snapshot_ids=frozenset(kept & set(snapshots)),
        expired_refs=expired_refs,
        updates=_updates(metadata, expired_ids, expired_refs),
        requirements=_requirements(metadata),
    )


def _is_branch(ref: SnapshotRef) -> bool:
    return str(getattr(ref.snapshot_ref_type, "value", ref.snapshot_ref_type)) == "branch"


def _ref_kept(
    name: str, ref: SnapshotRef, snapshots: Mapping[int, Snapshot], policy: ExpiryPolicy
) -> bool:
    """Java's `computeRetainedRefs`: main always; another ref while its snapshot exists and
    is not older than the ref's maximum age."""
    if name == MAIN_BRANCH:
        return True
    snapshot = snapshots.get(ref.snapshot_id)
    if snapshot is None:
        return False
    max_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else policy.max_ref_age_ms
    return max_age is None or policy.now_ms - snapshot.timestamp_ms <= max_age


def ancestors(snapshot_id: int, snapshots: Mapping[int, Snapshot]) -> Iterator[Snapshot]:
    """The snapshot and its ancestors, newest first, while they exist in the metadata."""
    seen: set[int] = set()
    current = snapshots.get(snapshot_id)
    while current is not None and current.snapshot_id not in seen:
        seen.add(current.snapshot_id)
        yield current
        parent = current.parent_snapshot_id
        current = snapshots.get(parent) if parent is not None else None


def _branch_snapshots_kept(
    ref: SnapshotRef, snapshots: Mapping[int, Snapshot], policy: ExpiryPolicy
) -> set[int]:
    """Java's `computeBranchSnapshotsToRetain`: the branch's ancestors, newest first, until
    the first one beyond both the minimum count and the age."""
    older_than = (
        policy.now_ms - ref.max_snapshot_age_ms
        if ref.max_snapshot_age_ms is not None
        else policy.older_than_ms
    )
    minimum = (
        ref.min_snapshots_to_keep
        if ref.min_snapshots_to_keep is not None
        else policy.min_snapshots_to_keep
    )
    kept: set[int] = set()
    for ancestor in ancestors(ref.snapshot_id, snapshots):
        if len(kept) < minimum or ancestor.timestamp_ms >= older_than:
            kept.add(ancestor.snapshot_id)
        else:
            break
    return kept


def _unreferenced_snapshots_kept(
    kept_refs: Iterable[SnapshotRef], snapshots: Mapping[int, Snapshot], policy: ExpiryPolicy
) -> set[int]:
    """Java's `unreferencedSnapshotsToRetain`: snapshots in no kept branch's history and
    on no kept tag, not older than the table's cutoff."""
    referenced: set[int] = set()
    for ref in kept_refs:
        if _is_branch(ref):
            referenced |= {s.snapshot_id for s in ancestors(ref.snapshot_id, snapshots)}
        else:
            referenced.add(ref.snapshot_id)
    return {
        sid
        for sid, s in snapshots.items()
        if sid not in referenced and s.timestamp_ms >= policy.older_than_ms
    }


def _updates(
    metadata: TableMetadata, expired: tuple[int, ...], expired_refs: tuple[str, ...]
) -> tuple[TableUpdate, ...]:
    """The refs removed first (pyiceberg refuses to remove a ref whose snapshot is gone),
    the statistics of the expired snapshots (Java's builder drops them with the
    snapshots; pyiceberg forgets the partition statistics), then the snapshots."""
    from pyiceberg.table.update import (
        RemovePartitionStatisticsUpdate,
        RemoveSnapshotRefUpdate,
        RemoveSnapshotsUpdate,
        RemoveStatisticsUpdate,
    )

    gone = set(expired)
    updates: list[TableUpdate] = [
        RemoveSnapshotRefUpdate.model_validate({"ref-name": name}) for name in expired_refs
    ]
    stats = {f.snapshot_id for f in metadata.statistics} & gone
    partition_stats = {f.snapshot_id for f in metadata.partition_statistics} & gone
    updates += [
        RemoveStatisticsUpdate.model_validate({"snapshot-id": sid}) for sid in sorted(stats)
    ]
    updates += [
        RemovePartitionStatisticsUpdate.model_validate({"snapshot-id": sid})
        for sid in sorted(partition_stats)
    ]
    if expired:
        updates.append(RemoveSnapshotsUpdate.model_validate({"snapshot-ids": list(expired)}))
    return tuple(updates)


def _requirements(metadata: TableMetadata) -> tuple[TableRequirement, ...]:
    """The same table, and every ref where the plan saw it: a ref moved since (a commit,
    a rollback to an old snapshot) changes what must be kept."""
    from pyiceberg.table.update import AssertRefSnapshotId, AssertTableUUID

    requirements: list[TableRequirement] = [AssertTableUUID(uuid=metadata.table_uuid)]
    requirements += [
        AssertRefSnapshotId.model_validate({"ref": name, "snapshot-id": ref.snapshot_id})
        for name, ref in sorted(metadata.refs.items())
    ]
    return tuple(requirements)
