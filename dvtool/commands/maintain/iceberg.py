"""`dvtool maintain` on an Iceberg table: purge, rewrite of delete files, compaction, vacuum.

Per table, in this order (what is due: `dvtool.commands.maintain.iceberg_plan`):

1. purge of the files whose deleted ratio is at least the purge ratio
   (`run_optimize_iceberg`, operation `purge` with `min_deleted_ratio=R`: MERGE, keeping
   each file's data sequence number);
2. rewrite of the position deletes (operation `rewrite-deletes`: dangling ones dropped,
   v2's combined per partition, v3's turned into deletion vectors);
3. compaction of small files (operation `compact`, Iceberg's bin-pack thresholds, the
   target size as planned);
4. vacuum (`run_vacuum_iceberg`, never forced): snapshots expire by the table's
   `history.expire.*` properties (or a longer `--retain`), then the files only they reached
   and the orphan files older than the threshold go. A dry run lists them first; only when
   it finds something to expire or delete does the vacuum run, so a table with nothing to
   do gets no commit.

The checkpoint and log cleanup steps are Delta's: reported `not-applicable`.

Every step is the command's own function: its commit (`dvtool.iceberg.transaction`),
validation against concurrent commits and safety rules are the command's. After a step
that committed, the table is read again (`catalog_commit.refresh`), so the next step plans
and commits on the new head. `dry_run` runs each step's own dry run, each planned against
the table as it is (unlike Delta's, compaction is not planned as the purge would leave
the table: a file the purge would rewrite may be planned under both). The purge and the
compaction rewrite on the engine `engine_for(bytes)` chooses, as Delta's do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from dvtool.commands.maintain.iceberg_plan import iceberg_settings, plan_iceberg
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
    rewrite_detail,
    run_steps,
)
from dvtool.commands.optimize.iceberg import (
    IcebergOptimizeRequest,
    IcebergOptimizeResult,
    run_optimize_iceberg,
)
from dvtool.commands.vacuum.iceberg import (
    IcebergVacuumRequest,
    IcebergVacuumResult,
    run_vacuum_iceberg,
)

if TYPE_CHECKING:
    from dvtool.commands.maintain.plan import MaintainRequest, PlannedStep, TablePlan
    from dvtool.engines.base import Engine
    from dvtool.iceberg.tables import IcebergTable


def iceberg_metrics() -> dict[str, Any]:
    """The metrics of an Iceberg table before any step: Delta's keys (the Delta-only ones
    stay None and 0) and the Iceberg steps' own. `versions`: the sequence numbers of the
    snapshots committed."""
    return {
        "versions": [],
        "snapshot_ids": [],
        "purged_files": 0,
        "purged_rows": 0,
        "rewritten_delete_files": 0,
        "compacted_files": 0,
        "compaction_output_files": 0,
        "checkpoint_version": None,
        "expired_snapshots": 0,
        "vacuumed_files": 0,
        "vacuumed_bytes": 0,
        "deleted_log_files": 0,
    }


def maintain_iceberg(
    table: IcebergTable,
    request: MaintainRequest,
    outcome: TableOutcome,
    budget: Budget,
    storage_options: Mapping[str, str] | None = None,
    engine_for: Callable[[int], Engine] | None = None,
) -> None:
    """Plan and run the steps on `table`, recording them on `outcome`; raises only while
    planning (the caller records it). Rewrites run on `engine_for(bytes)` (default arrow)."""
    outcome.metrics = iceberg_metrics()
    outcome.plan = plan_iceberg(table, iceberg_settings(table.metadata, request))
    run = _IcebergRun(
        table, outcome.plan, request.dry_run, outcome.metrics, storage_options, engine_for
    )
    run_steps(outcome, outcome.plan.steps, run.runners(), budget)


class _IcebergRun:
    """The steps of one Iceberg table, each through its command, with the metrics they add
    up to; `table` follows the head as steps commit."""

    def __init__(
        self,
        table: IcebergTable,
        plan: TablePlan,
        dry_run: bool,
        metrics: dict[str, Any],
        storage_options: Mapping[str, str] | None,
        engine_for: Callable[[int], Engine] | None = None,
    ) -> None:
        self.table = table
        self.plan = plan
        self.dry_run = dry_run
        self.metrics = metrics
        self.storage_options = storage_options
        self.rewrote = False
        self.engine_for = engine_for

    def runners(self) -> dict[str, StepRunner]:
        """The function running each step that applies to the table."""
        every = {
            "purge": self._purge,
            "rewrite-deletes": self._rewrite_deletes,
            "compaction": self._compaction,
            "vacuum": self._vacuum,
        }
        return {s.step: every[s.step] for s in self.plan.steps if s.applicable}

    def _optimize(self, request: IcebergOptimizeRequest) -> IcebergOptimizeResult:
        result = run_optimize_iceberg(self.table, request, self.engine_for)
        if result.snapshot_id is not None:
            self._committed(result.snapshot_ids or [result.snapshot_id])
        return result

    def _committed(self, snapshot_ids: list[int]) -> None:
        """Follow the head after a commit; record the new snapshots' sequence numbers."""
        from dvtool.iceberg.catalog_commit import refresh

        self.table = refresh(self.table)
        for snapshot_id in snapshot_ids:
            snapshot = self.table.metadata.snapshot_by_id(snapshot_id)
            self.metrics["snapshot_ids"].append(snapshot_id)
            if snapshot is not None and snapshot.sequence_number is not None:
                self.metrics["versions"].append(int(snapshot.sequence_number))

    def _purge(self, planned: PlannedStep) -> StepOutcome:
        if not planned.due:
            return StepOutcome("purge", NOTHING, planned.reason)
        ratio = float(self.plan.settings.purge_ratio.value)
        request = IcebergOptimizeRequest("purge", self.dry_run, min_deleted_ratio=ratio)
        result = self._optimize(request)
        if not self.dry_run:
            self.metrics["purged_files"] = result.metrics["rewrittenDataFiles"]
            self.metrics["purged_rows"] = result.metrics["removedDeletedRows"]
        return self._rewrite_outcome("purge", result)

    def _compaction(self, planned: PlannedStep) -> StepOutcome:
        """Compaction; after a purge that committed it runs even when not planned."""
        if not planned.due and not self.rewrote:
            return StepOutcome("compaction", NOTHING, planned.reason)
        target = int(self.plan.settings.target_size.value)
        result = self._optimize(IcebergOptimizeRequest("compact", self.dry_run, None, target))
        if not self.dry_run:
            self.metrics["compacted_files"] = result.metrics["rewrittenDataFiles"]
            self.metrics["compaction_output_files"] = result.metrics.get("addedDataFiles", 0)
        return self._rewrite_outcome("compaction", result)

    def _rewrite_outcome(self, step: str, result: IcebergOptimizeResult) -> StepOutcome:
        m = result.metrics
        inputs, outputs = m["rewrittenDataFiles"], m["plannedDataFiles"]
        what = rewrite_detail(inputs, outputs, m["removedDeletedRows"])
        if m["removedDeleteFiles"]:
            what += f", removing {counted(m['removedDeleteFiles'], 'delete file')}"
        if not inputs and not m["removedDeleteFiles"]:
            return StepOutcome(step, NOTHING, "no files to rewrite", result.to_json())
        if result.dry_run:
            return StepOutcome(step, PLANNED, f"would rewrite {what}", result.to_json())
        if result.snapshot_id is None:  # planned again on a new head and found nothing
            return StepOutcome(step, NOTHING, "no files to rewrite", result.to_json())
        self.rewrote = self.rewrote or bool(inputs)
        detail = f"rewrote {what} (snapshot {result.snapshot_id})"
        return StepOutcome(step, DONE, detail, result.to_json())

    def _rewrite_deletes(self, planned: PlannedStep) -> StepOutcome:
        step = "rewrite-deletes"
        if not planned.due:
            return StepOutcome(step, NOTHING, planned.reason)
        result = self._optimize(IcebergOptimizeRequest(step, self.dry_run))
        removed = result.metrics["removedDeleteEntries"]
        rewritten = result.metrics["dataFilesWithNewDeletes"]
        what = (
            f"{counted(removed, 'delete file')}, writing the deletes of "
            f"{counted(rewritten, 'data file')}"
        )
        if not (removed or rewritten) or (not result.dry_run and result.snapshot_id is None):
            return StepOutcome(step, NOTHING, "no delete files to rewrite", result.to_json())
        if result.dry_run:
            return StepOutcome(step, PLANNED, f"would replace {what}", result.to_json())
        self.metrics["rewritten_delete_files"] = removed
        detail = f"replaced {what} (snapshot {result.snapshot_id})"
        return StepOutcome(step, DONE, detail, result.to_json())

    def _vacuum(self, planned: PlannedStep) -> StepOutcome:
        retention = self.plan.settings.retention_ms
        retain_ms = retention.value if retention.source == "flag" else None
        listed = self._run_vacuum(IcebergVacuumRequest(retain_ms=retain_ms, dry_run=True))
        if not (listed.files or listed.expired_snapshots or listed.expired_refs):
            return StepOutcome("vacuum", NOTHING, "nothing to expire or delete", listed.to_json())
        what = (
            f"expire {counted(len(listed.expired_snapshots), 'snapshot')} and delete "
            f"{counted(listed.num_files, 'file')} ({listed.num_bytes:,} bytes)"
        )
        if self.dry_run:
            return StepOutcome("vacuum", PLANNED, f"would {what}", listed.to_json())
        result = self._run_vacuum(IcebergVacuumRequest(retain_ms=retain_ms))
        if result.committed_metadata_location is not None:
            self._committed([])
        self.metrics["expired_snapshots"] = len(result.expired_snapshots)
        self.metrics["vacuumed_files"] = result.deleted_files
        self.metrics["vacuumed_bytes"] = result.deleted_bytes
        if result.failed:
            raise deletes_failed(result.failed, result.to_json())
        detail = (
            f"expired {counted(len(result.expired_snapshots), 'snapshot')}, deleted "
            f"{counted(result.deleted_files, 'file')} ({result.deleted_bytes:,} bytes)"
        )
        return StepOutcome("vacuum", DONE, detail, result.to_json())

    def _run_vacuum(self, request: IcebergVacuumRequest) -> IcebergVacuumResult:
        return run_vacuum_iceberg(self.table, request, storage_options=self.storage_options)
