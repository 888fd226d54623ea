"""`dvtool maintain` on a Paimon table: the health inspection, then the vacuum.

Per table, in this order:

1. inspect (`dvtool.commands.maintain.paimon_health`): the latest snapshot measured as
   `dvtool inspect --check` measures it (deleted ratio, level-0 files, small files); when a
   gate fails, the table's `recommendation` is Paimon's full compaction. It only reads, so
   a dry run runs it too;
2. vacuum (`run_vacuum_paimon`, never forced): the orphan files and the leftovers of failed
   commits older than a day (or a longer `--retain`), as `dvtool vacuum` deletes them; a
   dry run lists them, on every branch, and inside the table folder only (external data
   paths are Paimon's to clean). A table `dvtool vacuum` refuses (a branch without a
   schema, on which Paimon's cleaner aborts too) has the step `not-applicable` with the
   refusal as its reason.

Purge, compaction and checkpoint are `not-applicable`: Paimon's writers own compaction
(and every commit writes its snapshot file); so is log cleanup: snapshot expiry is
Paimon's own (`snapshot.num-retained.*`, `snapshot.time-retained`), applied by its writers.
Nothing is committed: the plan's version is the latest snapshot id, `versions` stays empty.

| threshold | flag | table option | default |
|---|---|---|---|
| deleted ratio | `--purge-ratio` | `dvtool.maintain.purgeRatio` | 0.2 |
| small file size | `--target-size` | `target-file-size` | 128 MiB (primary key), 256 MiB (append) |
| orphan file age | `--retain` (only to lengthen) | - | 1 day |
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dvtool.commands.maintain.outcome import (
    DONE,
    NOTHING,
    PLANNED,
    Budget,
    StepOutcome,
    StepRunner,
    TableOutcome,
    counted,
    deletes_failed,
    run_steps,
)
from dvtool.commands.maintain.paimon_health import inspect_health, level0_limit
from dvtool.commands.maintain.plan import (
    MaintainRequest,
    PlannedStep,
    Setting,
    TablePlan,
    TableSettings,
    purge_ratio_setting,
)
from dvtool.commands.vacuum.paimon import run_vacuum_paimon
from dvtool.commands.vacuum.retention import format_duration
from dvtool.errors import WriteRefusedError
from dvtool.paimon.orphan_files import DEFAULT_ORPHAN_RETENTION_MS, check_supported
from dvtool.paimon.protocol.schema import TARGET_FILE_SIZE

if TYPE_CHECKING:
    from dvtool.paimon.protocol.schema import TableSchema
    from dvtool.paimon.tables import PaimonTable

WRITERS_COMPACT = "not applicable to a Paimon table: Paimon's writers own compaction"
PAIMON_ONLY_REASONS = {
    "purge": f"{WRITERS_COMPACT} (the inspect step says when to run its full compaction)",
    "compaction": f"{WRITERS_COMPACT} (the inspect step says when to run its full compaction)",
    "checkpoint": f"{WRITERS_COMPACT}, and every commit writes its snapshot file",
    "log-cleanup": "not applicable to a Paimon table: snapshot expiry is Paimon's own "
    "(snapshot.num-retained.*, snapshot.time-retained)",
}
PAIMON_STEPS = ("inspect", "purge", "compaction", "checkpoint", "vacuum", "log-cleanup")


def paimon_settings(schema: TableSchema, request: MaintainRequest) -> TableSettings:
    """The thresholds for a Paimon table (module docstring): flags, else table options,
    else defaults. UsageError for a purge ratio option that is no ratio."""
    options = dict(schema.options)
    if request.target_size is not None:
        size = Setting(request.target_size, "flag")
    elif TARGET_FILE_SIZE in options:
        size = Setting(schema.target_file_size, "property", TARGET_FILE_SIZE)
    else:
        size = Setting(schema.target_file_size, "default")
    retain = request.retain_ms
    if retain is not None and retain > DEFAULT_ORPHAN_RETENTION_MS:
        retention = Setting(retain, "flag")
    else:
        retention = Setting(DEFAULT_ORPHAN_RETENTION_MS, "default")
    return TableSettings(
        purge_ratio=purge_ratio_setting(options, request.purge_ratio),
        target_size=size,
        checkpoint_interval=Setting(None, "not-applicable"),
        retention_ms=retention,
    )


def plan_paimon(table: PaimonTable, settings: TableSettings) -> TablePlan:
    """The steps of a Paimon table: inspect and vacuum due, the others not applicable."""
    schema = table.latest_schema()
    ids = table.snapshot_ids()
    ratio, size = float(settings.purge_ratio.value), settings.target_size.value
    small = "no small file size" if size is None else f"below {size:,} bytes"
    inspect = PlannedStep(
        "inspect",
        True,
        f"full compaction due above a {ratio:.0%} deleted ratio, {level0_limit(schema):,} "
        f"level-0 files, or one small file ({small}) per bucket",
    )
    steps = [inspect, *(_not_applicable(step) for step in PAIMON_STEPS[1:4])]
    steps += [_vacuum_step(table, settings), _not_applicable("log-cleanup")]
    return TablePlan(ids[-1] if ids else 0, settings, steps)


def _not_applicable(step: str) -> PlannedStep:
    return PlannedStep(step, False, PAIMON_ONLY_REASONS[step], applicable=False)


def _vacuum_step(table: PaimonTable, settings: TableSettings) -> PlannedStep:
    """Due, unless `dvtool vacuum` refuses the table (its refusal is the reason)."""
    try:
        check_supported(table)
    except WriteRefusedError as refused:
        reason = f"not applicable: {refused.message}"
        return PlannedStep("vacuum", False, reason, applicable=False)
    age = format_duration(int(settings.retention_ms.value))
    reason = f"orphan files and leftovers of failed commits older than {age}"
    return PlannedStep("vacuum", True, reason)


def maintain_paimon(
    table: PaimonTable, request: MaintainRequest, outcome: TableOutcome, budget: Budget
) -> None:
    """Plan and run the steps on `table`, recording them on `outcome`; raises only while
    planning (the caller records it)."""
    settings = paimon_settings(table.latest_schema(), request)
    outcome.plan = plan_paimon(table, settings)
    run = _PaimonRun(table, outcome.plan, request.dry_run, outcome)
    run_steps(outcome, outcome.plan.steps, run.runners(), budget)


class _PaimonRun:
    """The steps of one Paimon table, each through its command."""

    def __init__(
        self, table: PaimonTable, plan: TablePlan, dry_run: bool, outcome: TableOutcome
    ) -> None:
        self.table = table
        self.plan = plan
        self.dry_run = dry_run
        self.outcome = outcome

    def runners(self) -> dict[str, StepRunner]:
        """The function running each step that applies to the table."""
        every: dict[str, StepRunner] = {"inspect": self._inspect, "vacuum": self._vacuum}
        return {s.step: every[s.step] for s in self.plan.steps if s.applicable}

    def _inspect(self, planned: PlannedStep) -> StepOutcome:
        settings = self.plan.settings
        health = inspect_health(
            self.table,
            float(settings.purge_ratio.value),
            settings.target_size.value,
            level0_limit(self.table.latest_schema()),
        )
        self.outcome.recommendation = health.recommendation()
        return StepOutcome("inspect", DONE, health.detail(), health.to_json())

    def _vacuum(self, planned: PlannedStep) -> StepOutcome:
        """One pass (no commit to spare an empty table, unlike Delta's and Iceberg's): a
        dry run lists, a run deletes."""
        retain_ms = int(self.plan.settings.retention_ms.value)
        result = run_vacuum_paimon(self.table, retain_ms, dry_run=self.dry_run)
        if not result.files:
            return StepOutcome("vacuum", NOTHING, "no orphan files", result.to_json())
        if self.dry_run:
            what = f"{counted(len(result.files), 'file')} ({result.num_bytes:,} bytes)"
            return StepOutcome("vacuum", PLANNED, f"would delete {what}", result.to_json())
        self.outcome.metrics["vacuumed_files"] = result.deleted_files
        self.outcome.metrics["vacuumed_bytes"] = result.deleted_bytes
        if result.failed:
            raise deletes_failed(result.failed, result.to_json())
        what = f"{counted(result.deleted_files, 'file')} ({result.deleted_bytes:,} bytes)"
        return StepOutcome("vacuum", DONE, f"deleted {what}", result.to_json())
