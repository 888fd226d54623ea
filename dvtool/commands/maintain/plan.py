"""Planning of `dvtool maintain` for one table: its settings, and which steps are due.

The steps, in the order they run: purge of the files whose deleted ratio is at least the
purge ratio, compaction of small files, a checkpoint if one is due, vacuum at the table's
retention, log cleanup. Each threshold is a flag, else a table property, else a default
(`TableSettings` records which):

| threshold | flag | table property | default |
|---|---|---|---|
| purge ratio | `--purge-ratio` | `dvtool.maintain.purgeRatio` | 0.2 |
| target file size | `--target-size` | `delta.targetFileSize` | 256 MiB |
| checkpoint interval | `--checkpoint-interval` | `delta.checkpointInterval` | 10 |
| retention | `--retain` (only to lengthen) | `delta.deletedFileRetentionDuration` | 7 days |

Log cleanup is always planned: it decides itself, by `delta.enableExpiredLogCleanup` and
`delta.logRetentionDuration` (`dvtool.commands.log_cleanup`). The plan is estimated from
the snapshot alone, column-wise (no DV or data file is read): the files a purge would take
(DV cardinality / numRecords at least the ratio; files without numRecords counted, as the
purge reads their footer), the small files compaction would take after it (below the target
size, or deleting more than 5% of their rows and not purged), the commits since the last
checkpoint. The commands
that run the steps plan exactly again, on the table as it is by then.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.arrays import arrow_values
from dvtool.commands.inspect.summary import snapshot_position
from dvtool.commands.optimize.plan import COMPACTION_DELETED_RATIO
from dvtool.commands.vacuum.retention import RETENTION_PROPERTY, format_duration
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.log.writer import checkpoint_interval
from dvtool.delta.protocol.retention import tombstone_retention_ms
from dvtool.delta.protocol.target_file_size import TARGET_SIZE_PROPERTY, target_file_size
from dvtool.errors import UsageError

PURGE_RATIO_PROPERTY = "dvtool.maintain.purgeRatio"
DEFAULT_PURGE_RATIO = 0.2
CHECKPOINT_INTERVAL_PROPERTY = "delta.checkpointInterval"
STEPS = ("purge", "compaction", "checkpoint", "vacuum", "log-cleanup")
# How a checkpoint step due to mend a damaged checkpoint or `_last_checkpoint` says so.
MENDING = "to mend:"


@dataclass(frozen=True)
class MaintainRequest:
    """What `dvtool maintain` was asked: thresholds given as flags (None: the table's),
    `dry_run`, and the time budget in ms (None: none)."""

    purge_ratio: float | None = None
    target_size: int | None = None
    checkpoint_interval: int | None = None
    retain_ms: int | None = None
    dry_run: bool = False
    time_budget_ms: int | None = None


@dataclass(frozen=True)
class Setting:
    """A threshold's value for one table and where it came from: `flag`, `property` (the
    table property `name`) or `default`."""

    value: Any
    source: str
    name: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TableSettings:
    """The thresholds maintain uses on one table."""

    purge_ratio: Setting
    target_size: Setting
    checkpoint_interval: Setting
    retention_ms: Setting
    """The vacuum retention: the table's, or `--retain` where it is longer."""

    def to_json(self) -> dict[str, Any]:
        return {
            "purge_ratio": self.purge_ratio.to_json(),
            "target_size": self.target_size.to_json(),
            "checkpoint_interval": self.checkpoint_interval.to_json(),
            "retention_ms": self.retention_ms.to_json(),
        }


@dataclass(frozen=True)
class PlannedStep:
    """One step of the plan: whether it is due, why, and how many files it would take."""

    step: str
    due: bool
    reason: str
    files: int | None = None
    applicable: bool = True
    """False for a step the table's format or settings rule out (an Iceberg table's
    checkpoint): never run, reported `not-applicable` with the reason."""

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "due": self.due, "reason": self.reason, "files": self.files}


@dataclass(frozen=True)
class TablePlan:
    """The plan of one table at `read_version`."""

    read_version: int
    settings: TableSettings
    steps: list[PlannedStep]

    def step(self, name: str) -> PlannedStep:
        return next(s for s in self.steps if s.step == name)

    def to_json(self) -> dict[str, Any]:
        return {
            "read_version": self.read_version,
            "settings": self.settings.to_json(),
            "steps": [s.to_json() for s in self.steps],
        }


# -- settings --------------------------------------------------------------------------------


def table_settings(configuration: dict[str, str], request: MaintainRequest) -> TableSettings:
    """The thresholds for a table with `configuration`: flags, else properties, else defaults.
    UsageError for a property that is not a valid value (naming it)."""
    return TableSettings(
        purge_ratio=purge_ratio_setting(configuration, request.purge_ratio),
        target_size=_target_size(configuration, request.target_size),
        checkpoint_interval=_checkpoint_interval(configuration, request.checkpoint_interval),
        retention_ms=_retention(configuration, request.retain_ms),
    )


def purge_ratio_setting(configuration: dict[str, str], flag: float | None) -> Setting:
    if flag is not None:
        return Setting(flag, "flag")
    text = configuration.get(PURGE_RATIO_PROPERTY)
    if text is None:
        return Setting(DEFAULT_PURGE_RATIO, "default")
    try:
        ratio = float(text)
    except ValueError:
        ratio = math.nan
    if not 0 <= ratio <= 1:
        raise UsageError(
            f"the table property {PURGE_RATIO_PROPERTY} is {text!r}, not a ratio from 0 to 1",
            hint="Fix the property, or pass --purge-ratio R.",
        )
    return Setting(ratio, "property", PURGE_RATIO_PROPERTY)


def _target_size(configuration: dict[str, str], flag: int | None) -> Setting:
    if flag is not None:
        return Setting(flag, "flag")
    if configuration.get(TARGET_SIZE_PROPERTY):
        return Setting(target_file_size(configuration), "property", TARGET_SIZE_PROPERTY)
    return Setting(target_file_size(configuration), "default")


def _checkpoint_interval(configuration: dict[str, str], flag: int | None) -> Setting:
    if flag is not None:
        return Setting(flag, "flag")
    value = checkpoint_interval(configuration)  # as the writer reads it: invalid -> 10
    try:
        configured = int(configuration.get(CHECKPOINT_INTERVAL_PROPERTY, "").strip())
    except ValueError:
        configured = None
    if configured == value:
        return Setting(value, "property", CHECKPOINT_INTERVAL_PROPERTY)
    return Setting(value, "default")


def _retention(configuration: dict[str, str], retain_ms: int | None) -> Setting:
    """The table's retention, or `--retain` when it is longer (never shorter). A table whose
    retention cannot be read keeps None: vacuum then refuses, as it does on its own."""
    table_ms = tombstone_retention_ms(configuration)
    if retain_ms is not None and (table_ms is None or retain_ms > table_ms):
        return Setting(retain_ms, "flag")
    if RETENTION_PROPERTY in configuration:
        return Setting(table_ms, "property", RETENTION_PROPERTY)
    return Setting(table_ms, "default")


# -- the plan --------------------------------------------------------------------------------


def plan_table(snapshot: Snapshot, settings: TableSettings) -> TablePlan:
    """Which steps are due on `snapshot`, estimated column-wise (see the module docstring)."""
    files = snapshot.files
    ratio = _deleted_ratio(snapshot)
    purged = _purge_mask(files, ratio, float(settings.purge_ratio.value))
    purge = _count(purged)
    target = int(settings.target_size.value)
    small, deleting, compacted = _compaction_counts(files, ratio, target, purged)
    position = snapshot_position(snapshot)
    interval = int(settings.checkpoint_interval.value)
    since = position.commits_since_checkpoint
    retention = settings.retention_ms.value
    steps = [
        PlannedStep(
            "purge",
            purge > 0,
            f"{purge:,} files delete at least {settings.purge_ratio.value:.0%} of their rows",
            purge,
        ),
        PlannedStep(
            "compaction",
            small > 1 or deleting > 0,  # two small files to pack, or rows to drop
            f"{small:,} files below {target:,} bytes, {deleting:,} deleting more than "
            f"{COMPACTION_DELETED_RATIO:.0%} of their rows",
            compacted,
        ),
        _checkpoint_step(snapshot, since, interval),
        PlannedStep(
            "vacuum",
            True,
            f"files unreferenced for longer than {format_duration(retention)}"
            if retention is not None
            else f"{RETENTION_PROPERTY} is no duration: vacuum refuses",
        ),
        PlannedStep(
            "log-cleanup",
            True,
            "log entries older than delta.logRetentionDuration, before a checkpoint that old",
        ),
    ]
    return TablePlan(snapshot.version, settings, steps)


def _checkpoint_step(snapshot: Snapshot, since: int, interval: int) -> PlannedStep:
    """Due after `interval` commits since the last checkpoint, or at once when the newest
    checkpoint cannot be read or `_last_checkpoint` is no valid hint (other readers fail
    on the table until `dvtool checkpoint` mends it)."""
    reason = f"{since:,} commits since the last checkpoint (interval {interval})"
    damage = [d.message for d in snapshot.damaged_checkpoints]
    if snapshot.last_checkpoint_problem is not None:
        damage.append(snapshot.last_checkpoint_problem.message)
    if damage:
        return PlannedStep("checkpoint", True, f"{reason}; {MENDING} {'; '.join(damage)}")
    return PlannedStep("checkpoint", since >= interval, reason)


def _deleted_ratio(snapshot: Snapshot) -> pa.Array:
    """Each live file's DV cardinality / numRecords (null without numRecords)."""
    records = pc.cast(arrow_values.combined(snapshot.files.column("numRecords")), pa.float64())
    return pc.divide(pc.cast(snapshot.dv_cardinality, pa.float64()), records)


def _purge_mask(files: pa.Table, ratio: pa.Array, threshold: float) -> pa.Array:
    """Files with a DV whose ratio is at least `threshold` (or unknown: no numRecords)."""
    at_least = pc.greater_equal(ratio, arrow_values.scalar(threshold, pa.float64()))
    has_dv = pc.is_valid(files.column("deletionVector"))
    return pc.and_(has_dv, pc.fill_null(at_least, arrow_values.TRUE))


def _compaction_counts(
    files: pa.Table, ratio: pa.Array, target: int, purged: pa.Array
) -> tuple[int, int, int]:
    """The files below the target size (no size: small, as compaction takes them), those
    deleting more than 5% of their rows that the purge before leaves (`purged`: it drops
    their deleted rows itself; the same rows are not counted twice), and the files in
    either group."""
    bound = arrow_values.scalar(min(target, 2**63 - 1), pa.int64())
    small = pc.fill_null(pc.less(files.column("size"), bound), arrow_values.TRUE)
    over = pc.greater(ratio, arrow_values.scalar(COMPACTION_DELETED_RATIO, pa.float64()))
    deleting = pc.and_(pc.fill_null(over, arrow_values.FALSE), pc.invert(purged))
    return _count(small), _count(deleting), _count(pc.or_(small, deleting))


def _count(mask: pa.Array | pa.ChunkedArray) -> int:
    return int(pc.sum(pc.fill_null(mask, arrow_values.FALSE)).as_py() or 0)
