"""`dvtool maintain`: the maintenance loop of a cron job, on tables or every table under a prefix.

Per Delta table, in this order (what is due: `dvtool.commands.maintain.plan`):

1. purge of the files whose deleted ratio is at least the purge ratio (`run_optimize` with
   `purge=True, min_deleted_ratio=R`);
2. compaction of small files (`run_optimize`, target size as planned);
3. a checkpoint, when the commits since the last one reach the checkpoint interval
   (`dvtool.commands.checkpoint.run_checkpoint`);
4. vacuum at the table's retention, or a longer `--retain` (`run_vacuum`, never forced). A
   dry run lists the files first; only when it finds some does the vacuum run, so a table
   with nothing to delete gets no VACUUM START/END commits every night;
5. log cleanup (`dvtool.commands.log_cleanup.run_log_cleanup`).

Every step is the command's own function: its commits, conflict checks and safety rules
are the command's. `dry_run` runs each step's own dry run (the purge and compaction plans,
the vacuum list, the log cleanup list; a due checkpoint is only reported) and writes
nothing; each is planned against the table as it is, not as the steps before would leave it,
except compaction: it plans the files the purge would rewrite as purged (no deleted rows, no
DV), so the rows a purge drops are not reported again under compaction.

An Iceberg table (found under a prefix, named, or with `catalog` named in that catalog) runs
the Iceberg loop instead (`dvtool.commands.maintain.iceberg`): purge, rewrite of delete
files, compaction, vacuum; the Delta-only steps are reported `not-applicable`. A Paimon
table runs the Paimon loop (`dvtool.commands.maintain.paimon`): a health inspection that
says when Paimon's full compaction is due (the table's `recommendation`), and the vacuum of
its orphan files; compaction and snapshot expiry stay Paimon's (`not-applicable`).

One table's failure does not stop the others: the first step that fails ends that table's
run (its error recorded, the later steps `not-run`). The time budget stops starting new work:
once spent, no further step or table starts and each is reported `skipped`. The result's exit
code is the worst of the tables' (by `dvtool.errors.SEVERITY`); skipped work is not a failure.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dvtool.commands.maintain.outcome import (
    DONE,
    NOTHING,
    PLANNED,
    SKIPPED,
    Budget,
    Clock,
    MaintainResult,
    StepFailed,
    StepOutcome,
    StepRunner,
    TableOutcome,
    deletes_failed,
    rewrite_detail,
    run_steps,
)
from dvtool.commands.maintain.plan import (
    MENDING,
    STEPS,
    MaintainRequest,
    PlannedStep,
    TablePlan,
    plan_table,
    table_settings,
)
from dvtool.commands.optimize.command import OptimizeRequest, OptimizeResult, run_optimize
from dvtool.commands.table_discovery import discover_tables
from dvtool.commands.vacuum.command import VacuumRequest, run_vacuum
from dvtool.delta.log.reader import DeltaLog, open_log
from dvtool.engines.base import Engine
from dvtool.errors import StorageError, UsageError
from dvtool.table import detect_format

__all__ = [
    "MaintainRequest",
    "MaintainResult",
    "StepOutcome",
    "TableOutcome",
    "parse_option_duration",
    "run_maintain",
]

EngineFactory = Callable[[int], Engine]
Progress = Callable[[int], Callable[[int], None]]


def run_maintain(
    targets: Sequence[str],
    request: MaintainRequest,
    *,
    recursive: bool = False,
    storage_options: Mapping[str, str] | None = None,
    engine_for: EngineFactory | None = None,
    progress: Progress | None = None,
    clock: Clock = time.monotonic,
    catalog: str | None = None,
) -> MaintainResult:
    """Maintain the tables `targets` name (with `recursive`, every table under them; with
    `catalog`, the Iceberg tables of that catalog `targets` name as `namespace.table`).

    `engine_for(bytes)` picks the engine of each rewrite (default: in-process arrow);
    `progress(total)` returns the callback advanced once per table; `clock` (seconds)
    measures the time budget.
    """
    _check_request(request)
    if not targets:
        raise UsageError("maintain needs at least one TABLE_OR_PREFIX")
    if catalog is not None and recursive:
        raise UsageError(
            "--catalog cannot be used with --recursive: a catalog names each table",
            hint="Give the catalog's tables as namespace.table, or the prefixes of path tables.",
        )
    budget = Budget(request.time_budget_ms, clock)
    found = discover_tables(targets, storage_options, recursive)
    outcomes = [TableOutcome(prefix, error=e) for prefix, e in found.failed]
    advance = progress(len(found.tables)) if progress else None
    engines = engine_for or _arrow_engine
    for location in found.tables:
        table = _Target(location, dict(storage_options or {}), catalog)
        outcomes.append(_maintain_table(table, request, engines, budget))
        if advance:
            advance(1)
    return MaintainResult(request.dry_run, request.time_budget_ms, outcomes)


def _check_request(request: MaintainRequest) -> None:
    ratio = request.purge_ratio
    if ratio is not None and not 0 <= ratio <= 1:
        raise UsageError(f"--purge-ratio must be between 0 and 1, not {ratio}")
    if request.target_size is not None and request.target_size <= 0:
        raise UsageError(f"--target-size must be positive, not {request.target_size}")
    if request.checkpoint_interval is not None and request.checkpoint_interval <= 0:
        raise UsageError(
            f"--checkpoint-interval must be positive, not {request.checkpoint_interval}"
        )
    for name, ms in (("--retain", request.retain_ms), ("--time-budget", request.time_budget_ms)):
        if ms is not None and ms < 0:
            raise UsageError(f"{name} must not be negative ({ms} ms)")


def parse_option_duration(text: str, option: str) -> int:
    """Milliseconds of a duration option (`--time-budget 30m`, `--retain 7d`), read as
    vacuum's `--retain` (`parse_duration`); UsageError naming `option` otherwise."""
    from dvtool.commands.vacuum.retention import parse_duration

    try:
        return parse_duration(text)
    except UsageError as e:
        raise UsageError(
            e.message.replace("--retain", option, 1),
            hint="Give a duration of 0 or more: a number and a unit, e.g. 30m, 2h, 90s, 7d.",
        ) from None


def _arrow_engine(_bytes: int) -> Engine:
    from dvtool.engines.arrow import ArrowEngine

    return ArrowEngine()


# -- one table -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    """A table to maintain: its location (or, with `catalog`, its identifier there)."""

    location: str
    storage_options: dict[str, str]
    catalog: str | None


def _maintain_table(
    target: _Target, request: MaintainRequest, engine_for: EngineFactory, budget: Budget
) -> TableOutcome:
    """Plan and run the steps on one table; a failure is recorded, never raised."""
    outcome = TableOutcome(target.location)
    if budget.spent():  # the table is not even looked at
        outcome.actions = [StepOutcome(s, SKIPPED, "time budget spent") for s in STEPS]
        return outcome
    try:
        options = target.storage_options
        found = "iceberg" if target.catalog is not None else detect_format(target.location, options)
        if found == "paimon":
            from dvtool.commands.maintain.paimon import maintain_paimon
            from dvtool.paimon.tables import open_paimon
            from dvtool.storage.table_storage import Storage

            outcome.format = "paimon"
            paimon = open_paimon(Storage.for_table(target.location, options))
            maintain_paimon(paimon, request, outcome, budget)
            return outcome
        if found == "iceberg":
            from dvtool.commands.maintain.iceberg import maintain_iceberg
            from dvtool.iceberg.tables import open_iceberg

            outcome.format = "iceberg"
            table = open_iceberg(target.location, options, target.catalog)
            maintain_iceberg(table, request, outcome, budget, options, engine_for)
            return outcome
        outcome.format = "delta"
        log = open_log(target.location, options)
        snapshot = log.snapshot()
        settings = table_settings(dict(snapshot.metadata.configuration), request)
        outcome.plan = plan_table(snapshot, settings)
    except Exception as e:
        outcome.record_failure(e)
        return outcome
    run = _TableRun(log, outcome.plan, request, engine_for, outcome.metrics)
    run_steps(outcome, outcome.plan.steps, run.runners(), budget)
    return outcome


class _TableRun:
    """The steps of one table, each through its command, with the metrics they add up to."""

    def __init__(
        self,
        log: DeltaLog,
        plan: TablePlan,
        request: MaintainRequest,
        engine_for: EngineFactory,
        metrics: dict[str, Any],
    ) -> None:
        self.log = log
        self.plan = plan
        self.dry_run = request.dry_run
        self.engine_for = engine_for
        self.rewrote = False
        self.metrics = metrics
        self.purged: frozenset[str] = frozenset()
        """The files a dry-run purge planned to rewrite (compaction plans them as purged)."""

    def runners(self) -> dict[str, StepRunner]:
        """The function running each step."""
        return {
            "purge": self._purge,
            "compaction": self._compaction,
            "checkpoint": self._checkpoint,
            "vacuum": self._vacuum,
            "log-cleanup": self._log_cleanup,
        }

    def _purge(self, planned: PlannedStep) -> StepOutcome:
        if not planned.due:
            return StepOutcome("purge", NOTHING, planned.reason)
        ratio = float(self.plan.settings.purge_ratio.value)
        request = OptimizeRequest(purge=True, min_deleted_ratio=ratio, dry_run=self.dry_run)
        result = run_optimize(self.log, request, self.engine_for)
        if self.dry_run:
            self.purged = frozenset(path for b in result.bins for path in b.inputs)
        self.metrics["purged_files"] = result.metrics["numRemovedFiles"]
        self.metrics["purged_rows"] = result.metrics["numDeletionVectorRowsRemoved"]
        return self._rewrite_outcome("purge", result)

    def _compaction(self, planned: PlannedStep) -> StepOutcome:
        """Compaction after the purge; a dry run plans it on the table as the planned purge
        would leave it (its files without deleted rows), never counting those rows twice."""
        if not planned.due and not self.rewrote and not self.purged:
            return StepOutcome("compaction", NOTHING, planned.reason)
        target = int(self.plan.settings.target_size.value)
        request = OptimizeRequest(target_size=target, dry_run=self.dry_run, purged=self.purged)
        result = run_optimize(self.log, request, self.engine_for)
        self.metrics["compacted_files"] = result.metrics["numRemovedFiles"]
        self.metrics["compaction_output_files"] = result.metrics["numAddedFiles"]
        return self._rewrite_outcome("compaction", result)

    def _rewrite_outcome(self, step: str, result: OptimizeResult) -> StepOutcome:
        inputs = sum(len(b.inputs) for b in result.bins)
        rows = sum(b.rows_dropped for b in result.bins)
        what = rewrite_detail(inputs, len(result.bins), rows)
        if not result.bins:
            return StepOutcome(step, NOTHING, "no files to rewrite", result.to_json())
        if result.dry_run:
            return StepOutcome(step, PLANNED, f"would rewrite {what}", result.to_json())
        self.rewrote = True
        self.metrics["versions"] += result.versions
        versions = ", ".join(str(v) for v in result.versions)
        return StepOutcome(step, DONE, f"rewrote {what} (version {versions})", result.to_json())

    def _checkpoint(self, planned: PlannedStep) -> StepOutcome:
        due, reason = planned.due, planned.reason
        if self.rewrote:  # commits since the plan (which may have checkpointed): look again
            from dvtool.commands.inspect.summary import latest_log_position

            since = latest_log_position(self.log).commits_since_checkpoint
            mending = MENDING in reason  # the damage is still there: no commit mends it
            due = mending or since >= int(self.plan.settings.checkpoint_interval.value)
            reason = f"{since:,} commits since the last checkpoint" + (
                reason[reason.index(MENDING) - 2 :] if mending else ""
            )
        if not due:
            return StepOutcome("checkpoint", NOTHING, reason)
        if self.dry_run:
            return StepOutcome("checkpoint", PLANNED, f"would write one: {reason}")
        from dvtool.commands.checkpoint import run_checkpoint

        result = run_checkpoint(self.log)
        self.metrics["checkpoint_version"] = result.version
        if result.log_cleanup is not None:
            self.metrics["deleted_log_files"] += result.log_cleanup.deleted_files
        detail = f"wrote the checkpoint of version {result.version}"
        return StepOutcome("checkpoint", DONE, detail, result.to_json())

    def _vacuum(self, planned: PlannedStep) -> StepOutcome:
        retention = self.plan.settings.retention_ms
        retain_ms = retention.value if retention.source == "flag" else None
        listed = run_vacuum(self.log, VacuumRequest(retain_ms=retain_ms, dry_run=True))
        if not listed.files:
            return StepOutcome("vacuum", NOTHING, "no files to delete", listed.to_json())
        what = f"{listed.num_files:,} files ({listed.num_bytes:,} bytes)"
        if self.dry_run:
            return StepOutcome("vacuum", PLANNED, f"would delete {what}", listed.to_json())
        result = run_vacuum(self.log, VacuumRequest(retain_ms=retain_ms))
        self.metrics["vacuumed_files"] = result.deleted_files
        self.metrics["vacuumed_bytes"] = result.deleted_bytes
        self.metrics["versions"] += [
            v for v in (result.start_version, result.end_version) if v is not None
        ]
        if result.failed:
            raise deletes_failed(result.failed, result.to_json())
        detail = f"deleted {result.deleted_files:,} files ({result.deleted_bytes:,} bytes)"
        return StepOutcome("vacuum", DONE, detail, result.to_json())

    def _log_cleanup(self, planned: PlannedStep) -> StepOutcome:
        from dvtool.commands.log_cleanup import LogCleanupRequest, run_log_cleanup

        result = run_log_cleanup(self.log, LogCleanupRequest(dry_run=self.dry_run))
        if not self.dry_run:
            self.metrics["deleted_log_files"] += result.deleted_files
        if result.error is not None:
            error = StorageError(f"log cleanup stopped: {result.error}")
            raise StepFailed(error, result.to_json())
        what = f"{result.deleted_files:,} expired log files"
        if not result.deleted_files:
            reason = result.reason or "no expired log entries"
            return StepOutcome("log-cleanup", NOTHING, reason, result.to_json())
        if self.dry_run:
            return StepOutcome("log-cleanup", PLANNED, f"would delete {what}", result.to_json())
        return StepOutcome("log-cleanup", DONE, f"deleted {what}", result.to_json())
