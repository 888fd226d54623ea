"""`dvtool vacuum` on an Iceberg table: expire snapshots, then delete what only they
reached and the orphan files, as Iceberg Spark's `expire_snapshots` and
`remove_orphan_files` do.

1. Retention. Snapshots older than `--retain` (default: the table's
   `history.expire.max-snapshot-age-ms`, 5 days) expire, each branch keeping
   `--retain-last` (default `history.expire.min-snapshots-to-keep`, 1) and every snapshot a
   kept ref points at (`iceberg.snapshot_expiry`); orphan files must be older than
   `--retain` too (default 3 days, Java's). A `--retain` shorter than either default is
   refused unless forced: readers of recent snapshots and writers that have not committed
   yet could lose files.
2. The plan (`iceberg.reachable_files`, `iceberg.orphan_files`): the files reachable from the
   expired snapshots and from no kept one (manifest lists, manifests, data, delete and DV
   files, statistics), the metadata files the commit drops from the log when the table sets
   `write.metadata.delete-after-commit.enabled`, and the files under the table location
   that the table no longer reaches and that are older than the cutoff. A dry run
   stops here and lists them.
3. The commit (`catalog_commit.commit_updates`) removes the refs and snapshots; a conflict
   (the table changed) refreshes and plans again, with the table's `commit.retry.*` policy
   (`catalog_commit.retry_policy`: Java's retries and backoff).
   The files are planned again against what was committed.
4. Deleting (`iceberg_storage`), only after the commit landed: path tables through
   dvtool's storage (each file checked again to be inside the table folder, links
   resolved; Hadoop's `.crc` files go with theirs), catalog tables through the table's
   FileIO.

Never deleted: a file outside the table location (reported), the current metadata file,
`metadata/version-hint.text`. A path table whose metadata names another location than the
folder it was opened at (a byte copy of a table) is refused: its files are the original's.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from dvtool import interrupts
from dvtool.commands.result import CommandResult
from dvtool.commands.vacuum.delete import FailedDelete, Progress
from dvtool.commands.vacuum.iceberg_storage import (
    delete_planned,
    list_table_files,
    location_storage,
    relative_path,
)
from dvtool.commands.vacuum.plan import STALE_TEMP_FILE, TEMP_FILE_NAME
from dvtool.commands.vacuum.retention import format_duration
from dvtool.errors import CommitConflictError, WriteRefusedError
from dvtool.iceberg import reachable_files as reach
from dvtool.iceberg.orphan_files import (
    ORPHAN_RETENTION_MS_DEFAULT,
    ListedFile,
    OrphanScan,
    find_orphans,
    parse_location,
)
from dvtool.iceberg.snapshot_expiry import (
    MAX_SNAPSHOT_AGE_MS,
    ExpiryPlan,
    max_snapshot_age_ms,
    plan_expiry,
    require_gc_enabled,
    table_policy,
)

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata

    from dvtool.iceberg.tables import IcebergTable

ORPHAN = "orphan file"
OLD_METADATA = "old metadata file"
_EXPIRED_REASONS = {
    reach.DATA: "expired data file",
    reach.POSITION_DELETES: "expired position deletes",
    reach.EQUALITY_DELETES: "expired equality deletes",
    reach.DELETION_VECTORS: "expired DV file",
    reach.MANIFEST: "expired manifest",
    reach.MANIFEST_LIST: "expired manifest list",
    reach.STATISTICS: "expired statistics",
    reach.PARTITION_STATISTICS: "expired partition statistics",
    reach.METADATA: OLD_METADATA,
}


@dataclass(frozen=True)
class IcebergVacuumRequest:
    """What `dvtool vacuum` was asked on an Iceberg table. `retain_ms`: snapshots and
    orphan files younger than this stay (None: the table's snapshot age, 3 days for
    orphans); `retain_last`: snapshots each branch keeps at least (None: the table's);
    `force`: allow a retention shorter than the defaults."""

    retain_ms: int | None = None
    retain_last: int | None = None
    dry_run: bool = False
    force: bool = False


@dataclass(frozen=True)
class IcebergVacuumFile:
    """A file to delete: its location as the metadata or the listing names it, its path
    under the table location, size (None when unknown) and why it goes."""

    location: str
    path: str
    size: int | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class IcebergVacuumResult(CommandResult):
    """The outcome: the snapshots and refs expired, the files to delete (a dry run stops
    there) and what was deleted."""

    location: str
    metadata_location: str
    dry_run: bool
    retention_ms: int
    specified_retention_ms: int | None
    default_retention_ms: int
    orphan_retention_ms: int
    cutoff_ms: int
    orphan_cutoff_ms: int
    retain_last: int | None
    expired_snapshots: list[int]
    kept_snapshots: list[int]
    expired_refs: list[str]
    files: list[IcebergVacuumFile]
    listed_files: int = 0
    unreachable_too_new: int = 0
    outside_location: list[str] = field(default_factory=list)
    not_listed: list[str] = field(default_factory=list)
    committed_metadata_location: str | None = None
    deleted_files: int = 0
    deleted_bytes: int = 0
    failed: list[FailedDelete] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def num_files(self) -> int:
        return len(self.files)

    @property
    def num_bytes(self) -> int:
        return sum(f.size or 0 for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "iceberg",
            "location": self.location,
            "metadata_location": self.metadata_location,
            "dry_run": self.dry_run,
            "retention_ms": self.retention_ms,
            "specified_retention_ms": self.specified_retention_ms,
            "default_retention_ms": self.default_retention_ms,
            "orphan_retention_ms": self.orphan_retention_ms,
            "cutoff_ms": self.cutoff_ms,
            "orphan_cutoff_ms": self.orphan_cutoff_ms,
            "retain_last": self.retain_last,
            "expired_snapshots": list(self.expired_snapshots),
            "kept_snapshots": list(self.kept_snapshots),
            "expired_refs": list(self.expired_refs),
            "num_files": self.num_files,
            "num_bytes": self.num_bytes,
            "files": [f.to_json() for f in self.files],
            "listed_files": self.listed_files,
            "unreachable_too_new": self.unreachable_too_new,
            "outside_location": list(self.outside_location),
            "not_listed": list(self.not_listed),
            "committed_metadata_location": self.committed_metadata_location,
            "deleted_files": self.deleted_files,
            "deleted_bytes": self.deleted_bytes,
            "failed": [f.to_json() for f in self.failed],
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class _Window:
    retention_ms: int
    default_ms: int
    orphan_retention_ms: int
    now_ms: int

    @property
    def orphan_cutoff_ms(self) -> int:
        return max(self.now_ms - self.orphan_retention_ms, 0)


def retention_window(
    metadata: TableMetadata, retain_ms: int | None, force: bool, now_ms: int
) -> _Window:
    """The snapshot and orphan retentions; WriteRefusedError for a `--retain` shorter than
    the table's snapshot age or Java's 3-day orphan age, unless `force`."""
    default = max_snapshot_age_ms(metadata)
    if retain_ms is None:
        return _Window(default, default, ORPHAN_RETENTION_MS_DEFAULT, now_ms)
    if not force:
        for floor, what in (
            (default, f"the table's snapshot retention ({MAX_SNAPSHOT_AGE_MS})"),
            (ORPHAN_RETENTION_MS_DEFAULT, "the orphan file retention (Iceberg's default)"),
        ):
            if retain_ms < floor:
                raise WriteRefusedError(
                    f"--retain {format_duration(retain_ms)} is shorter than {what}, "
                    f"{format_duration(floor)}: files that readers of recent snapshots, or "
                    "writers that have not committed yet, still need could be deleted",
                    hint="Use a retention of at least that, or add --force if you are sure "
                    "no reader or writer needs those files.",
                )
    return _Window(retain_ms, default, retain_ms, now_ms)


def run_vacuum_iceberg(
    table: IcebergTable,
    request: IcebergVacuumRequest,
    progress: Progress | None = None,
    now_ms: int | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> IcebergVacuumResult:
    """Plan (and unless `dry_run`, commit and delete) the vacuum of `table`."""
    require_gc_enabled(table.metadata)
    _require_manifest_lists(table.metadata)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    from dvtool.iceberg.catalog_commit import retry_policy

    storage = location_storage(table, storage_options)
    policy = retry_policy(table.metadata)
    started = time.monotonic()
    listed: list[ListedFile] | None = None
    for attempt in range(policy.attempts):
        window = retention_window(table.metadata, request.retain_ms, request.force, now)
        expiry = plan_expiry(
            table.metadata,
            table_policy(table.metadata, now, window.retention_ms, request.retain_last),
        )
        if listed is None:
            listed, not_listed = list_table_files(storage, table.metadata)
        after = predicted_after(table, expiry)
        if request.dry_run or not expiry.changes_table:
            result = _result(table, request, window, expiry, after, None, listed, not_listed)
            return result if request.dry_run else delete_planned(table, storage, result, progress)
        try:
            committed = _commit(table, expiry)
        except CommitConflictError:
            if not policy.allows(attempt + 1, (time.monotonic() - started) * 1000):
                raise
            time.sleep(policy.delay_s(attempt + 1))
            table = _refresh(table)
            continue
        result = _result(
            table, request, window, expiry, committed.metadata, committed, listed, not_listed
        )
        return delete_planned(table, storage, result, progress)
    raise AssertionError("unreachable")


def _require_manifest_lists(metadata: TableMetadata) -> None:
    """WriteRefusedError for a snapshot without a manifest list (v1's inline manifests):
    its files could not be found, and would be taken for orphans."""
    missing = [s.snapshot_id for s in metadata.snapshots if not s.manifest_list]
    if missing:
        raise WriteRefusedError(
            f"snapshot {missing[0]} has no manifest list: dvtool cannot tell which files it "
            "reaches, so it deletes none",
            hint="Rewrite the table's manifests with an Iceberg engine first "
            "(rewrite_manifests), or expire that snapshot there.",
        )


def _commit(table: IcebergTable, expiry: ExpiryPlan) -> IcebergTable:
    """One commit attempt, signals deferred until its answer (as Delta's commits); a landed
    commit is marked so that an interrupt afterwards reports it."""
    from dvtool.iceberg.catalog_commit import commit_updates
    from dvtool.iceberg.metadata_files import metadata_number

    with interrupts.deferred():
        committed = commit_updates(table, expiry.requirements, expiry.updates)
        name = committed.metadata_location.rstrip("/").rsplit("/", 1)[-1]
        number = metadata_number(name)
        fallback = int(getattr(committed.metadata, "last_sequence_number", 0) or 0)
        interrupts.after_commit(number if number is not None else fallback)
    return committed


def _refresh(table: IcebergTable) -> IcebergTable:
    from dvtool.iceberg.catalog_commit import refresh

    return refresh(table)


def predicted_after(table: IcebergTable, expiry: ExpiryPlan) -> TableMetadata:
    """The metadata the expiry would commit (its metadata log as a commit leaves it)."""
    if not expiry.changes_table:
        return table.metadata
    from pyiceberg.table.update import update_table_metadata

    return update_table_metadata(
        table.metadata, expiry.updates, metadata_location=table.metadata_location
    )


def _result(
    table: IcebergTable,
    request: IcebergVacuumRequest,
    window: _Window,
    expiry: ExpiryPlan,
    after: TableMetadata,
    committed: IcebergTable | None,
    listed: list[ListedFile],
    not_listed: list[str],
) -> IcebergVacuumResult:
    """The files to delete when `after` is (or will be) the table's metadata."""
    reader = reach.ManifestReader(table.io, table.metadata.format_version)
    after_location = committed.metadata_location if committed else None
    expired = reach.expired_files(reader, table.metadata, expiry.expired_snapshot_ids, after)
    expired.update(
        reach.dropped_metadata_files(
            table.metadata, table.metadata_location, after, table.metadata.properties
        )
    )
    valid = reach.reachable_files(reader, after, after_location or table.metadata_location)
    valid[table.metadata_location] = reach.METADATA
    scan = find_orphans(listed, [*valid, *expired], table.location, window.orphan_cutoff_ms)
    sizes = {**reader.sizes, **reach.statistics_sizes(table.metadata)}
    files, outside = _files(table.location, expired, sizes, scan, protected=valid)
    return IcebergVacuumResult(
        location=table.location,
        metadata_location=table.metadata_location,
        dry_run=request.dry_run,
        retention_ms=window.retention_ms,
        specified_retention_ms=request.retain_ms,
        default_retention_ms=window.default_ms,
        orphan_retention_ms=window.orphan_retention_ms,
        cutoff_ms=window.now_ms - window.retention_ms,
        orphan_cutoff_ms=window.orphan_cutoff_ms,
        retain_last=request.retain_last,
        expired_snapshots=list(expiry.expired_snapshot_ids),
        kept_snapshots=sorted(expiry.kept_snapshot_ids),
        expired_refs=list(expiry.expired_refs),
        files=files,
        listed_files=scan.listed,
        unreachable_too_new=scan.too_new,
        outside_location=outside,
        not_listed=not_listed,
        committed_metadata_location=after_location,
    )


def _files(
    location: str,
    expired: Mapping[str, str],
    sizes: Mapping[str, int],
    scan: OrphanScan,
    protected: Mapping[str, str],
) -> tuple[list[IcebergVacuumFile], list[str]]:
    """The files to delete, each under the table location (the others are returned apart,
    never deleted); never a file the kept metadata reaches (the current metadata file and
    the version hint among them)."""
    table = parse_location(location)
    keep = {parse_location(p).path for p in protected}
    files: dict[str, IcebergVacuumFile] = {}
    outside: list[str] = []
    candidates = [(p, sizes.get(p), _EXPIRED_REASONS[k]) for p, k in expired.items()]
    candidates += [(o.location, o.size, _orphan_reason(o.location)) for o in scan.orphans]
    for path, size, reason in candidates:
        relative = relative_path(parse_location(path), table)
        if relative is None:
            outside.append(path)
        elif parse_location(path).path not in keep and relative not in files:
            files[relative] = IcebergVacuumFile(path, relative, size, reason)
    return sorted(files.values(), key=lambda f: f.path), sorted(outside)


def _orphan_reason(location: str) -> str:
    """An orphan's reason: a dvtool temp file (a write killed half-way) or an orphan."""
    return STALE_TEMP_FILE if TEMP_FILE_NAME.match(location.rpartition("/")[2]) else ORPHAN


def reasons_count(files: Iterable[IcebergVacuumFile]) -> dict[str, int]:
    """How many files go for each reason (the renderer's summary)."""
    out: dict[str, int] = {}
    for f in files:
        out[f.reason] = out.get(f.reason, 0) + 1
    return dict(sorted(out.items()))
