"""`dvtool inspect PREFIX... --recursive`: the health of every table under prefixes, for CI.

Every table (Delta, Iceberg or Paimon) at or under each prefix
(`dvtool.commands.table_discovery`, as `dvtool maintain --recursive` finds them) is inspected
as `dvtool inspect TABLE` would: its summary (`run_inspect`, `run_inspect_iceberg`,
`run_inspect_paimon`), optionally `--verify` and `--count-rows`,
and the `--check` gates. The report has `dvtool maintain`'s shape: one outcome per table
with its status, error kind and exit code, and the worst of them (by
`dvtool.errors.SEVERITY`) for the whole run.

The gates (`parse_gates`) are checked once, before any table is read: a name no format has
(a typo) or a bad limit is a usage error of the whole run (exit 2). A gate that exists for
some formats only (`max-log-files`: Delta; `max-dangling-deletes`: Iceberg;
`max-level0-files`: Paimon) is reported *not applicable* on the tables of the other formats
and does not fail them: one gate list serves a lake of every format, as a CI job over a
whole lake needs. A gate that cannot be
measured on a table (Iceberg's deleted-rows gates with equality deletes and no
`--count-rows`, a table property that is no size) fails that table with its usage error
(exit 2) and the hint to fix it; its other gates are still evaluated.

One table's failure (a damaged log, unreadable metadata, a bug) is recorded on its outcome
and never stops the others. A prefix that holds no table is an outcome of its own
(not-found, exit 5). Tables are inspected one after the other: one table's state is in
memory at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from dvtool.commands.inspect.checks import CHECK_NAMES, evaluate_checks, parse_check
from dvtool.commands.inspect.command import InspectRequest, InspectResult, run_inspect
from dvtool.commands.result import CommandResult, table_error_json
from dvtool.commands.table_discovery import discover_tables
from dvtool.errors import DvtoolError, UsageError, exit_code_of, worst_kind

if TYPE_CHECKING:
    from dvtool.commands.inspect.iceberg import IcebergInspectResult
    from dvtool.commands.inspect.iceberg_summary import IcebergSummary
    from dvtool.commands.inspect.paimon import PaimonInspectResult
    from dvtool.commands.inspect.paimon_summary import PaimonSummary
    from dvtool.commands.inspect.summary import TableSummary

__all__ = [
    "Gate",
    "GateOutcome",
    "InspectTablesResult",
    "TableInspection",
    "check_recursive_request",
    "parse_gates",
    "run_inspect_tables",
]

PASSED, FAILED, NOT_APPLICABLE, UNMEASURED = "passed", "failed", "not-applicable", "error"
Progress = Callable[[int], Callable[[int], None]]


# -- the gates ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gate:
    """One `--check NAME=LIMIT` as each format reads it: `limits[format]` is the limit on
    that format's tables, absent where the format has no such gate."""

    name: str
    limits: Mapping[str, float]

    @property
    def limit(self) -> float:
        return next(iter(self.limits.values()))


def parse_gates(texts: Sequence[str]) -> list[Gate]:
    """Each `NAME=LIMIT` read by every format that has the gate; UsageError for a name no
    format has, or a limit its format cannot read (nothing is inspected then)."""
    from dvtool.commands.inspect.iceberg_checks import ICEBERG_CHECK_NAMES, parse_iceberg_check
    from dvtool.commands.inspect.paimon_checks import PAIMON_CHECK_NAMES, parse_paimon_check

    gates = []
    for text in texts:
        name = text.partition("=")[0].strip()
        limits: dict[str, float] = {}
        if name in CHECK_NAMES:
            limits["delta"] = parse_check(text)[1]
        if name in ICEBERG_CHECK_NAMES:
            limits["iceberg"] = parse_iceberg_check(text)[1]
        if name in PAIMON_CHECK_NAMES:
            limits["paimon"] = parse_paimon_check(text)[1]
        if not limits:
            known = ", ".join(sorted({*CHECK_NAMES, *ICEBERG_CHECK_NAMES, *PAIMON_CHECK_NAMES}))
            raise UsageError(
                f"invalid --check {text!r}: no table format has a gate {name!r}",
                hint=f"Available checks: {known}.",
            )
        gates.append(Gate(name, limits))
    return gates


@dataclass(frozen=True)
class GateOutcome:
    """One gate on one table: `passed`, `failed`, `not-applicable` (the table's format has
    no such gate: not a failure) or `error` (it could not be measured: `detail` says why)."""

    name: str
    limit: float
    status: str
    actual: float | None = None
    detail: str | None = None

    @property
    def passed(self) -> bool | None:
        """True or False as `inspect --check` reports it; None when not evaluated."""
        return None if self.status in (NOT_APPLICABLE, UNMEASURED) else self.status == PASSED

    def to_json(self) -> dict[str, Any]:
        """The single-table `checks` entry (`name`, `limit`, `actual`, `passed`) with the
        status and, when not evaluated, why."""
        return {
            "name": self.name,
            "limit": self.limit,
            "actual": self.actual,
            "passed": self.passed,
            "status": self.status,
            "detail": self.detail,
        }


def _not_applicable(gate: Gate, fmt: str) -> GateOutcome:
    others = " and ".join(f.capitalize() for f in gate.limits)
    detail = f"{gate.name} is a gate of {others} tables only; this is {fmt.capitalize()}"
    return GateOutcome(gate.name, gate.limit, NOT_APPLICABLE, detail=detail)


# -- one table ---------------------------------------------------------------------------------


@dataclass
class TableInspection:
    """What `inspect` found on one table: its format, the single-table result (summary,
    verify report; None when the table could not be read), the gates, and the error that
    stopped it or a gate."""

    location: str
    format: str | None = None
    result: InspectResult | IcebergInspectResult | PaimonInspectResult | None = None
    checks: list[GateOutcome] = field(default_factory=list)
    error: DvtoolError | None = None
    exception: Exception | None = None
    """A failure that is not a DvtoolError (a bug, exit 70), for `-v` to show."""

    @property
    def summary(self) -> TableSummary | IcebergSummary | PaimonSummary | None:
        return self.result.summary if self.result is not None else None

    @property
    def kind(self) -> str:
        """The worst of: the error, the verify report (integrity), a failed gate."""
        if self.exception is not None:
            return "internal"
        kinds = [self.error.kind] if self.error is not None else []
        verify = self.result.verify if self.result is not None else None
        if verify is not None and not verify.ok:
            kinds.append("integrity")
        if any(c.status == FAILED for c in self.checks):
            kinds.append("check-failed")
        return worst_kind(kinds)

    @property
    def exit_code(self) -> int:
        return exit_code_of(self.kind)

    @property
    def status(self) -> str:
        """`ok`, or `failed` (`kind` says why: a gate, a problem, an error)."""
        return "ok" if self.kind == "ok" else "failed"

    def to_json(self) -> dict[str, Any]:
        verify = self.result.verify if self.result is not None else None
        return {
            "location": self.location,
            "format": self.format,
            "status": self.status,
            "kind": self.kind,
            "exit_code": self.exit_code,
            "summary": _summary_json(self.result),
            "checks": [c.to_json() for c in self.checks],
            "verify": verify.to_json() if verify is not None else None,
            "error": self._error_json(),
        }

    def _error_json(self) -> dict[str, Any] | None:
        return table_error_json("inspect", self.location, self.error, self.exception)


def _summary_json(
    result: InspectResult | IcebergInspectResult | PaimonInspectResult | None,
) -> dict[str, Any] | None:
    """The document `dvtool inspect TABLE --json` prints (no `--verify`, no `--check`)."""
    if result is None or result.summary is None:
        return None
    return replace(result, verify=None, checks=None).to_json()


def inspect_table(
    location: str,
    request: InspectRequest,
    gates: Sequence[Gate],
    storage_options: Mapping[str, str] | None = None,
) -> TableInspection:
    """Inspect one table and evaluate the gates on it; a failure is recorded, never raised
    (a KeyboardInterrupt still stops the run)."""
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.storage.table_storage import Storage
    from dvtool.table import format_at

    outcome = TableInspection(location)
    try:
        storage = Storage.for_table(location, dict(storage_options or {}))
        outcome.format = format_at(storage)  # known even when the table cannot be read
        if outcome.format == "delta":
            outcome.result = run_inspect(DeltaLog(storage), request)
        elif outcome.format == "paimon":
            from dvtool.paimon.tables import open_paimon

            table = open_paimon(storage)  # before the reading modules import pyiceberg

            from dvtool.commands.inspect.paimon import run_inspect_paimon

            outcome.result = run_inspect_paimon(table, request)
        else:
            from dvtool.commands.inspect.iceberg import run_inspect_iceberg
            from dvtool.iceberg.tables import open_at

            outcome.result = run_inspect_iceberg(open_at(storage), request)
        _evaluate(outcome, gates)
    except DvtoolError as e:
        outcome.error = e
    except Exception as e:
        outcome.exception = e
    return outcome


def _evaluate(outcome: TableInspection, gates: Sequence[Gate]) -> None:
    """Each gate on the table's summary, one at a time: a gate that cannot be measured is
    the table's error (the first such), the others are still evaluated."""
    fmt, result = outcome.format, outcome.result
    assert fmt is not None and result is not None and result.summary is not None
    for gate in gates:
        if fmt not in gate.limits:
            outcome.checks.append(_not_applicable(gate, fmt))
            continue
        limit = gate.limits[fmt]
        try:
            passed, actual = _measure(result, gate.name, limit)
        except UsageError as e:
            outcome.error = outcome.error or e
            outcome.checks.append(GateOutcome(gate.name, limit, UNMEASURED, detail=e.message))
            continue
        outcome.checks.append(GateOutcome(gate.name, limit, PASSED if passed else FAILED, actual))


def _measure(
    result: InspectResult | IcebergInspectResult | PaimonInspectResult, name: str, limit: float
) -> tuple[bool, float]:
    """Whether the gate holds on the result's summary, and the value it measured."""
    from dvtool.commands.inspect.paimon import PaimonInspectResult

    if isinstance(result, InspectResult):
        assert result.summary is not None
        [checked] = evaluate_checks(result.summary, [(name, limit)])
    elif isinstance(result, PaimonInspectResult):
        from dvtool.commands.inspect.paimon_checks import evaluate_paimon_checks

        assert result.summary is not None
        [checked] = evaluate_paimon_checks(result.summary, [(name, limit)])
    else:
        from dvtool.commands.inspect.iceberg_checks import evaluate_iceberg_checks

        assert result.summary is not None
        [checked] = evaluate_iceberg_checks(result.summary, [(name, limit)])
    return checked.passed, checked.actual


# -- the run -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class InspectTablesResult(CommandResult):
    """Every table's inspection; `exit_code` is the worst of theirs."""

    tables: list[TableInspection]
    gates: list[Gate] = field(default_factory=list)
    verify: bool = False
    count_rows: bool = False

    @property
    def kind(self) -> str:
        return worst_kind(t.kind for t in self.tables)

    @property
    def exit_code(self) -> int:
        return exit_code_of(self.kind)

    def unused_gates(self) -> list[Gate]:
        """The gates that applied to no table read (a gate of the other format only):
        a CI job should know that they gated nothing."""
        formats = {t.format for t in self.tables if t.format is not None}
        return [g for g in self.gates if formats and not formats & set(g.limits)]

    def to_json(self) -> dict[str, Any]:
        statuses = [t.status for t in self.tables]
        return {
            "exit_code": self.exit_code,
            "kind": self.kind,
            "num_tables": len(self.tables),
            "num_failed": statuses.count("failed"),
            "checks": [{"name": g.name, "limits": dict(g.limits)} for g in self.gates],
            "verify": self.verify,
            "count_rows": self.count_rows,
            "tables": [t.to_json() for t in self.tables],
        }


# The single-table options that have no meaning over many tables.
_SINGLE_TABLE = (
    ("version", "--version"),
    ("timestamp_ms", "--timestamp"),
    ("files", "--files"),
    ("history", "--history"),
)


def check_recursive_request(request: InspectRequest) -> None:
    """UsageError naming the first option of `request` that inspects one table only."""
    for attribute, option in _SINGLE_TABLE:
        if getattr(request, attribute) not in (None, False):
            raise UsageError(
                f"{option} cannot be used with --recursive: it reads one table",
                hint=f"Inspect that table alone: dvtool inspect TABLE {option} ...",
            )


def run_inspect_tables(
    prefixes: Sequence[str],
    *,
    checks: Sequence[str] = (),
    verify: bool = False,
    count_rows: bool = False,
    recursive: bool = True,
    storage_options: Mapping[str, str] | None = None,
    progress: Progress | None = None,
) -> InspectTablesResult:
    """Inspect every table at or under `prefixes` (without `recursive`, the tables they
    name) with the `--check` gates `checks` (`NAME=LIMIT` texts); `progress(total)`
    returns the callback advanced once per table."""
    if not prefixes:
        raise UsageError("inspect --recursive needs at least one PREFIX")
    gates = parse_gates(checks)
    request = InspectRequest(verify=verify, count_rows=count_rows)
    found = discover_tables(prefixes, storage_options, recursive)
    outcomes = [TableInspection(prefix, error=e) for prefix, e in found.failed]
    advance = progress(len(found.tables)) if progress else None
    for location in found.tables:
        outcomes.append(inspect_table(location, request, gates, storage_options))
        if advance:
            advance(1)
    return InspectTablesResult(outcomes, gates, verify, count_rows)
