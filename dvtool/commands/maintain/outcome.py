"""What `dvtool maintain` reports: each step's outcome, each table's, the whole run's; and the
loop that runs a table's planned steps under the time budget.

Shared by the Delta loop (`dvtool.commands.maintain.command`), the Iceberg loop
(`dvtool.commands.maintain.iceberg`) and the Paimon loop (`dvtool.commands.maintain.paimon`),
so that all report the same statuses, the same document and the same exit codes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dvtool import interrupts
from dvtool.commands.maintain.plan import PlannedStep, TablePlan
from dvtool.commands.result import CommandResult, table_error_json
from dvtool.errors import DvtoolError, StorageError, exit_code_of, worst_kind

if TYPE_CHECKING:
    from dvtool.commands.vacuum.delete import FailedDelete

Clock = Callable[[], float]

# Step statuses: what a step did, or why it did nothing.
DONE, NOTHING, PLANNED, SKIPPED, FAILED, NOT_RUN, NOT_APPLICABLE = (
    "done",
    "nothing-to-do",
    "planned",
    "skipped",
    "failed",
    "not-run",
    "not-applicable",
)


@dataclass(frozen=True)
class StepOutcome:
    """One step on one table: its status, a line saying what happened, and the command's
    result document (None when the command did not run)."""

    step: str
    status: str
    detail: str
    result: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "status": self.status,
            "detail": self.detail,
            "result": self.result,
        }


def no_metrics() -> dict[str, Any]:
    """The metrics of a table, before any step: committed versions, files and rows."""
    return {
        "versions": [],
        "purged_files": 0,
        "purged_rows": 0,
        "compacted_files": 0,
        "compaction_output_files": 0,
        "checkpoint_version": None,
        "vacuumed_files": 0,
        "vacuumed_bytes": 0,
        "deleted_log_files": 0,
    }


@dataclass
class TableOutcome:
    """What maintain planned and did on one table, and the error that stopped it. `metrics`
    count what was done (a dry run does nothing: its plans are in `actions`). `format`:
    `delta`, `iceberg` or `paimon` (None when the table was not looked at).
    `recommendation`: what the table needs that dvtool leaves to its format's own tools (a
    Paimon table's full compaction), None when nothing."""

    location: str
    plan: TablePlan | None = None
    actions: list[StepOutcome] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=no_metrics)
    error: DvtoolError | None = None
    exception: Exception | None = None
    """A failure that is not a DvtoolError (a bug, exit 70), for `-v` to show."""
    format: str | None = None
    recommendation: dict[str, Any] | None = None

    @property
    def kind(self) -> str:
        """The error kind of this table (`ok` without error)."""
        if self.exception is not None:
            return "internal"
        return self.error.kind if self.error is not None else "ok"

    @property
    def exit_code(self) -> int:
        return exit_code_of(self.kind)

    @property
    def status(self) -> str:
        """`failed`, `skipped` (nothing started), `partial` (the budget ran out), or `ok`.
        Steps that do not apply to the table's format count for neither."""
        if self.kind != "ok":
            return "failed"
        statuses = {a.status for a in self.actions} - {NOT_APPLICABLE}
        if statuses == {SKIPPED}:
            return "skipped"
        return "partial" if SKIPPED in statuses else "ok"

    def record_failure(self, error: Exception) -> None:
        if isinstance(error, DvtoolError):
            self.error = error
        else:
            self.exception = error

    def to_json(self) -> dict[str, Any]:
        return {
            "location": self.location,
            "format": self.format,
            "status": self.status,
            "exit_code": self.exit_code,
            "plan": self.plan.to_json() if self.plan else None,
            "actions": [a.to_json() for a in self.actions],
            "metrics": dict(self.metrics),
            "error": table_error_json("maintain", self.location, self.error, self.exception),
            "recommendation": self.recommendation,
        }


@dataclass(frozen=True)
class MaintainResult(CommandResult):
    """Every table's outcome; `exit_code` is the worst of theirs."""

    dry_run: bool
    time_budget_ms: int | None
    tables: list[TableOutcome]

    @property
    def kind(self) -> str:
        return worst_kind(t.kind for t in self.tables)

    @property
    def exit_code(self) -> int:
        return exit_code_of(self.kind)

    def to_json(self) -> dict[str, Any]:
        statuses = [t.status for t in self.tables]
        return {
            "dry_run": self.dry_run,
            "time_budget_ms": self.time_budget_ms,
            "exit_code": self.exit_code,
            "kind": self.kind,
            "num_tables": len(self.tables),
            "num_failed": statuses.count("failed"),
            "num_skipped": statuses.count("skipped"),
            "tables": [t.to_json() for t in self.tables],
        }


class Budget:
    """The time budget: spent once `clock()` reaches the deadline (never without a budget)."""

    def __init__(self, budget_ms: int | None, clock: Clock) -> None:
        self.clock = clock
        self.deadline = None if budget_ms is None else clock() + budget_ms / 1000

    def spent(self) -> bool:
        return self.deadline is not None and self.clock() >= self.deadline


class StepFailed(Exception):
    """A step that ran but failed, with the command's result document to report."""

    def __init__(self, error: DvtoolError, result: dict[str, Any]) -> None:
        super().__init__(error.message)
        self.error = error
        self.result = result


StepRunner = Callable[[PlannedStep], StepOutcome]


def deletes_failed(failed: Sequence[FailedDelete], result: dict[str, Any]) -> StepFailed:
    """The failure of a vacuum step that could not delete some files (every format's)."""
    first = failed[0]
    error = StorageError(
        f"vacuum could not delete {len(failed):,} files, e.g. {first.path}: {first.error}",
        hint="Check the storage's permissions; run maintain again to retry.",
    )
    return StepFailed(error, result)


def run_steps(
    outcome: TableOutcome,
    steps: Iterable[PlannedStep],
    runners: dict[str, StepRunner],
    budget: Budget,
) -> None:
    """Run each planned step with its runner, in order: once one fails the later ones are
    `not-run`, once the budget is spent they are `skipped`. A step without a runner does
    not apply to the table (`not-applicable`, its plan's reason saying why)."""
    for planned in steps:
        runner = runners.get(planned.step)
        if runner is None:
            outcome.actions.append(StepOutcome(planned.step, NOT_APPLICABLE, planned.reason))
        elif outcome.kind != "ok":
            outcome.actions.append(StepOutcome(planned.step, NOT_RUN, "an earlier step failed"))
        elif budget.spent():
            outcome.actions.append(StepOutcome(planned.step, SKIPPED, "time budget spent"))
        else:
            outcome.actions.append(_run_step(outcome, planned, runner))


def _run_step(outcome: TableOutcome, planned: PlannedStep, runner: StepRunner) -> StepOutcome:
    """Run one step; a failure is recorded on `outcome` and reported as `failed`."""
    try:
        # A signal stops the step even after an earlier step's commit landed.
        with interrupts.interruptible():
            return runner(planned)
    except StepFailed as failed:
        outcome.record_failure(failed.error)
        return StepOutcome(planned.step, FAILED, failed.error.message, failed.result)
    except Exception as e:
        outcome.record_failure(e)
        message = e.message if isinstance(e, DvtoolError) else f"{type(e).__name__}: {e}"
        return StepOutcome(planned.step, FAILED, message)


def counted(n: int, noun: str) -> str:
    """`1 file`, `2,953 files` (nouns taking an `s`)."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def rewrite_detail(inputs: int, outputs: int, rows: int) -> str:
    """`N files into M, dropping R deleted rows`: what a purge or compaction rewrites."""
    return f"{counted(inputs, 'file')} into {outputs:,}, dropping {counted(rows, 'deleted row')}"
