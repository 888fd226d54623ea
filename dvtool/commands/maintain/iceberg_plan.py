"""Planning of `dvtool maintain` on an Iceberg table: its settings, and which steps are due.

The steps, in the order they run: purge, rewrite of delete files, compaction, vacuum (the
Delta-only checkpoint and log cleanup are planned `not applicable`). The plan is made from
the manifests alone (`live_files`: no data or delete file is read); each due step then runs
its command, which plans exactly again, on the table as it is by then.

| threshold | flag | table property | default |
|---|---|---|---|
| purge ratio | `--purge-ratio` | `dvtool.maintain.purgeRatio` | 0.2 |
| target file size | `--target-size` | `write.target-file-size-bytes` | 512 MiB |
| snapshot age | `--retain` (only to lengthen) | `history.expire.max-snapshot-age-ms` | 5 days |

When each step is due:

- **purge** (MERGE, `dvtool optimize --purge --min-deleted-ratio R`): a live data file whose
  deleted ratio may reach R. The record counts of a file's file-scoped deletes (its DV, the
  position delete files naming only it) are its deleted rows; a file that partition-scoped
  position deletes or equality deletes apply to has a ratio known only once they are read,
  and is counted as a candidate (as Delta's plan counts files without `numRecords`). Equality
  deletes that apply to no live data file make it due too: the purge drops them.
- **rewrite deletes** (REWRITE, `dvtool optimize --rewrite-deletes`), modelled on Iceberg's
  `rewrite_position_delete_files` and its table maintenance guidance: due when (a) position
  deletes or DVs dangle, applying to no live data file (Java's `remove-dangling-deletes`):
  every reader plans them for nothing; (b) on a v2 table a live data file has more than one
  position delete file applying to it: every scan of it merges them all (Java bin-packs a
  partition's position deletes; the command combines them into one file per partition);
  (c) on a v3 table any Parquet position delete file is live: the spec keeps a data file's
  deletes in its one deletion vector, and Java's procedure turns position deletes into DVs on
  v3 tables (the path from v2 to v3).
- **compaction** (`dvtool optimize`): Iceberg's bin-pack thresholds, the command's own
  selection of file groups (`iceberg_binpack.file_groups`). In a run that purged, compaction
  also runs when not planned: the purge's new files may be small.
- **vacuum** (`dvtool vacuum`, never forced): always planned; the command's dry run decides
  whether there is anything to expire or delete. A table with `gc.enabled=false` is never
  vacuumed (its files may be shared): the step does not apply.

Equality deletes are left as they are: the loop does not convert them (the rewrite-deletes
step's reason counts them, naming `dvtool optimize --convert-equality`). Why:

- Iceberg's own maintenance does not convert them either: Spark has no such procedure, and
  for Flink's upsert tables the guidance is a periodic `rewrite_data_files`, which applies
  them while rewriting data files. That is what the purge step does: a file's deleted ratio
  counts the rows equality deletes remove, a file at or above the ratio is rewritten
  without them, and an equality delete file goes once no live data file is left for it.
- Tables with equality deletes are written by streaming upsert writers, which commit data
  files at every checkpoint. A conversion must be validated against every data file added
  or removed meanwhile (`validate_delete_rewrite`), so on such a table it would conflict and
  plan again run after run; the purge's validation lets concurrent appends and equality
  deletes through (their sequence numbers keep them right).
- A conversion writes position deletes or DVs for every data file an equality delete
  matches, however few rows it removes there; left alone, those rows are dropped when the
  purge or the compaction rewrites the file anyway.

v1 tables have no delete files and dvtool does not rewrite their data files: only the vacuum
applies. An Iceberg table's version in the plan is its current snapshot's sequence number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dvtool.commands.maintain.plan import (
    MaintainRequest,
    PlannedStep,
    Setting,
    TablePlan,
    TableSettings,
    purge_ratio_setting,
)
from dvtool.commands.optimize.iceberg_binpack import TARGET_FILE_SIZE, file_groups, target_size
from dvtool.commands.vacuum.retention import format_duration
from dvtool.errors import DvtoolError
from dvtool.iceberg.delete_index import DeleteContent, dangling_deletes
from dvtool.iceberg.live_files import live_files
from dvtool.iceberg.orphan_files import ORPHAN_RETENTION_MS_DEFAULT
from dvtool.iceberg.snapshot_expiry import (
    GC_ENABLED,
    MAX_SNAPSHOT_AGE_MS,
    MIN_SNAPSHOTS_TO_KEEP,
    max_snapshot_age_ms,
)

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata

    from dvtool.iceberg.live_files import LiveDataFile, LiveFiles
    from dvtool.iceberg.tables import IcebergTable

ICEBERG_STEPS = ("purge", "rewrite-deletes", "compaction", "checkpoint", "vacuum", "log-cleanup")
DELTA_ONLY = {
    "checkpoint": "not applicable to an Iceberg table: every commit writes its metadata file",
    "log-cleanup": "not applicable to an Iceberg table: vacuum drops old metadata files "
    "(write.metadata.delete-after-commit.enabled)",
}
V1_TABLE = (
    "not applicable to an Iceberg v1 table: it has no delete files, and dvtool rewrites the "
    "data files of v2 and v3 tables only"
)
GC_DISABLED = (
    "not applicable: the table sets gc.enabled=false (its files may be shared with other "
    "tables), so no snapshot expires and no file is deleted"
)


# -- settings --------------------------------------------------------------------------------


def iceberg_settings(metadata: TableMetadata, request: MaintainRequest) -> TableSettings:
    """The thresholds for an Iceberg table: flags, else properties, else defaults.
    UsageError for a purge ratio or target size property that is no valid value."""
    properties = dict(metadata.properties)
    sizes = target_size(properties, request.target_size)
    if request.target_size is not None:
        size = Setting(sizes.target, "flag")
    elif TARGET_FILE_SIZE in properties:
        size = Setting(sizes.target, "property", TARGET_FILE_SIZE)
    else:
        size = Setting(sizes.target, "default")
    return TableSettings(
        purge_ratio=purge_ratio_setting(properties, request.purge_ratio),
        target_size=size,
        checkpoint_interval=Setting(None, "not-applicable"),
        retention_ms=_retention(metadata, request.retain_ms),
    )


def _retention(metadata: TableMetadata, retain_ms: int | None) -> Setting:
    """The snapshot retention: the table's, or `--retain` where it is longer (never
    shorter). The vacuum uses `--retain` for orphan files too, so it is raised to
    Iceberg's 3-day orphan age if below (vacuum refuses a shorter one unless forced). A
    table whose retention property cannot be read keeps None: vacuum then refuses."""
    try:
        table_ms: int | None = max_snapshot_age_ms(metadata)
    except DvtoolError:
        table_ms = None
    if retain_ms is not None and table_ms is not None and retain_ms > table_ms:
        return Setting(max(retain_ms, ORPHAN_RETENTION_MS_DEFAULT), "flag")
    if MAX_SNAPSHOT_AGE_MS in metadata.properties:
        return Setting(table_ms, "property", MAX_SNAPSHOT_AGE_MS)
    return Setting(table_ms, "default")


# -- the plan --------------------------------------------------------------------------------


def plan_iceberg(table: IcebergTable, settings: TableSettings) -> TablePlan:
    """Which steps are due on `table`'s current snapshot (see the module docstring)."""
    metadata = table.metadata
    snapshot = metadata.current_snapshot()
    version = int(snapshot.sequence_number or 0) if snapshot is not None else 0
    if metadata.format_version < 2:
        rewrites = [
            PlannedStep(step, False, V1_TABLE, applicable=False)
            for step in ("purge", "rewrite-deletes", "compaction")
        ]
    else:
        live = live_files(table)
        sizes = target_size(dict(metadata.properties), int(settings.target_size.value))
        groups = file_groups(live, sizes)
        rewrites = [
            _purge_step(live, float(settings.purge_ratio.value)),
            _rewrite_deletes_step(live, metadata.format_version),
            PlannedStep(
                "compaction",
                bool(groups),
                f"{len(groups):,} groups of files to bin-pack (target {sizes.target:,} "
                f"bytes, files below {sizes.minimum:,} or above {sizes.maximum:,} bytes or "
                "deleting at least 30% of their rows)",
                sum(len(g) for g in groups),
            ),
        ]
    steps = [
        *rewrites,
        PlannedStep("checkpoint", False, DELTA_ONLY["checkpoint"], applicable=False),
        _vacuum_step(metadata, settings),
        PlannedStep("log-cleanup", False, DELTA_ONLY["log-cleanup"], applicable=False),
    ]
    return TablePlan(version, settings, steps)


def _purge_step(live: LiveFiles, ratio: float) -> PlannedStep:
    reached = unknown = 0
    for f in live.data:
        estimate = _deleted_ratio(f, live)
        if estimate is None:
            unknown += 1
        elif estimate >= ratio and live.index.for_data_file(f.entry).files():
            reached += 1
    dangling = [
        d
        for d in dangling_deletes(live.deletes, live.index, (f.entry for f in live.data))
        if d.content is DeleteContent.EQUALITY
    ]
    reason = (
        f"{reached:,} files delete at least {ratio:.0%} of their rows, {unknown:,} more have "
        "deletes counted only once read"
    )
    if dangling:
        reason += f"; {len(dangling):,} equality delete files apply to no live data file"
    return PlannedStep("purge", bool(reached or unknown or dangling), reason, reached + unknown)


def _deleted_ratio(f: LiveDataFile, live: LiveFiles) -> float | None:
    """A data file's deleted ratio by its deletes' record counts: exact for a DV, an upper
    bound for position delete files naming only this file; None when deletes whose count
    for this file is unknown apply (partition-scoped position deletes, equality deletes)."""
    applied = live.index.for_data_file(f.entry).files()
    if any(d.content is DeleteContent.EQUALITY or d.target() != f.path for d in applied):
        return None
    records = int(f.entry.record_count)
    if records <= 0:
        return 1.0 if applied else 0.0
    return min(sum(int(d.record_count) for d in applied), records) / records


def _rewrite_deletes_step(live: LiveFiles, format_version: int) -> PlannedStep:
    dangling = [
        d
        for d in dangling_deletes(live.deletes, live.index, (f.entry for f in live.data))
        if d.content is not DeleteContent.EQUALITY
    ]
    crowded = sum(1 for f in live.data if len(live.index.for_data_file(f.entry).position) > 1)
    parquet = sum(1 for d in live.deletes if d.content is DeleteContent.POSITION)
    equality = sum(1 for d in live.deletes if d.content is DeleteContent.EQUALITY)
    to_dvs = parquet if format_version >= 3 else 0
    parts = [f"{len(dangling):,} dangling delete files"]
    if format_version >= 3:
        parts.append(f"{to_dvs:,} position delete files to turn into deletion vectors")
    else:
        parts.append(f"{crowded:,} data files with more than one position delete file")
    reason = ", ".join(parts)
    if equality:
        reason += (
            f"; {equality:,} equality delete files left as they are "
            "(dvtool optimize --convert-equality converts them)"
        )
    due = bool(dangling or to_dvs or (format_version < 3 and crowded))
    return PlannedStep("rewrite-deletes", due, reason, len(dangling) + to_dvs + crowded)


def _vacuum_step(metadata: TableMetadata, settings: TableSettings) -> PlannedStep:
    if metadata.properties.get(GC_ENABLED, "true").strip().lower() == "false":
        return PlannedStep("vacuum", False, GC_DISABLED, applicable=False)
    retention = settings.retention_ms.value
    if retention is None:
        reason = f"{MAX_SNAPSHOT_AGE_MS} is no number of milliseconds: vacuum refuses"
    else:
        keep = metadata.properties.get(MIN_SNAPSHOTS_TO_KEEP, "1")
        orphans = retention if settings.retention_ms.source == "flag" else None
        reason = (
            f"snapshots older than {format_duration(retention)} (each branch keeping "
            f"{keep}), the files only they reach, orphan files older than "
            f"{format_duration(orphans or ORPHAN_RETENTION_MS_DEFAULT)}"
        )
    return PlannedStep("vacuum", True, reason)
