"""`dvtool inspect`: what a table holds, how many rows its DVs delete, and whether it is sound.

Each function takes an opened table and returns a plain result object with `to_json()`; the
CLI decides how to show it. The default summary is `dvtool.commands.inspect.summary`, the
`--check` gates `dvtool.commands.inspect.checks`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from dvtool.commands.inspect.checks import CHECK_NAMES, CheckOutcome, evaluate_checks, parse_check
from dvtool.commands.inspect.outcome import inspect_document, inspect_exit_code
from dvtool.commands.inspect.summary import TableSummary, snapshot_position, summarize
from dvtool.commands.result import CommandResult
from dvtool.delta.protocol.features import require_readable
from dvtool.delta.protocol.schema import partition_physical_names
from dvtool.errors import (
    DeletionVectorError,
    DvtoolError,
    StorageError,
    UsageError,
)
from dvtool.io_pool import map_io

__all__ = [
    "CHECK_NAMES",
    "CheckOutcome",
    "FileEntry",
    "HistoryEntry",
    "InspectRequest",
    "InspectResult",
    "Problem",
    "VerifyReport",
    "evaluate_checks",
    "history",
    "list_files",
    "load_snapshot",
    "parse_check",
    "run_inspect",
    "verify",
]

if TYPE_CHECKING:
    from dvtool.delta.dvstore import DVStore
    from dvtool.delta.log.reader import CommitRecord, DeltaLog
    from dvtool.delta.log.snapshot import Snapshot

# The DV codec (dvtool.delta.dvstore, dvtool.delta.protocol.deletion_vector: pyroaring) and parquet
# footers
# (dvtool.data_files: pyarrow.parquet) are imported by the functions of --files, --verify and
# --count-rows only: the default summary reads neither, and on a small table start-up is
# most of its time.

Progress = Callable[[int], None]
LAST_CHECKPOINT = "_delta_log/_last_checkpoint"


# -- opening ---------------------------------------------------------------------------------


def load_snapshot(
    log: DeltaLog, version: int | None = None, timestamp_ms: int | None = None
) -> Snapshot:
    """The snapshot to inspect: latest, at `version`, or as of `timestamp_ms`."""
    if version is not None and timestamp_ms is not None:
        raise UsageError("--version and --timestamp cannot be used together")
    if timestamp_ms is not None:
        version = log.version_at(timestamp_ms)
    snapshot = log.snapshot(version)
    require_readable(snapshot.protocol)
    return snapshot


# -- files -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileEntry:
    """One live file as `inspect --files` shows it."""

    path: str
    partition_values: dict[str, str | None]
    size: int
    num_records: int | None
    deleted_rows: int
    deleted_ratio: float | None
    deletion_vector: dict[str, Any] | None
    dv_storage: str | None
    dv_location: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_DV_KIND = {"u": "file", "i": "inline", "p": "absolute"}


def list_files(snapshot: Snapshot, store: DVStore, limit: int | None = None) -> list[FileEntry]:
    """The live files (the first `limit`, or all) with partition values (logical names),
    counts and DV location."""
    logical = _logical_partition_names(snapshot)
    files = snapshot.files if limit is None else snapshot.files.slice(0, limit)
    columns = files.select(
        ["path", "partitionValues", "size", "numRecords", "deletionVector"]
    ).to_pydict()
    entries = []
    for path, parts, size, records, dv in zip(*columns.values(), strict=True):
        entries.append(_file_entry(path, parts, size, records, dv, logical, store))
    return entries


def _file_entry(
    path: str,
    parts: list[tuple[str, str | None]] | None,
    size: int,
    records: int | None,
    dv: dict[str, Any] | None,
    logical: dict[str, str],
    store: DVStore,
) -> FileEntry:
    from dvtool.delta.protocol.deletion_vector import DeletionVectorDescriptor

    descriptor = None if dv is None else DeletionVectorDescriptor.from_json(dv)
    deleted = 0 if descriptor is None else descriptor.cardinality
    return FileEntry(
        path=path,
        partition_values={logical.get(k, k): v for k, v in (parts or [])},
        size=size,
        num_records=records,
        deleted_rows=deleted,
        deleted_ratio=(deleted / records) if records else None,
        deletion_vector=None if descriptor is None else descriptor.to_json(),
        dv_storage=None if descriptor is None else _DV_KIND[descriptor.storage_type],
        dv_location=None if descriptor is None else store.location(descriptor),
    )


def _logical_partition_names(snapshot: Snapshot) -> dict[str, str]:
    """Physical partition key -> logical column name."""
    physical = partition_physical_names(
        snapshot.schema, snapshot.metadata.partition_columns, snapshot.column_mapping_mode
    )
    return {p: logical for logical, p in physical.items()}


# -- history ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryEntry:
    """One commit as `inspect --history` shows it."""

    version: int
    timestamp: int | None
    operation: str | None
    operation_parameters: dict[str, Any]
    operation_metrics: dict[str, Any]
    engine_info: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def history(log: DeltaLog, limit: int | None = None) -> list[HistoryEntry]:
    """The newest `limit` commits, newest first."""
    return [_history_entry(record) for record in log.history(limit)]


def _history_entry(record: CommitRecord) -> HistoryEntry:
    info = record.commit_info or {}
    return HistoryEntry(
        version=record.version,
        timestamp=record.timestamp_ms,
        operation=info.get("operation"),
        operation_parameters=dict(info.get("operationParameters") or {}),
        operation_metrics={k: _metric(v) for k, v in (info.get("operationMetrics") or {}).items()},
        engine_info=info.get("engineInfo"),
    )


_INTEGER = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?[0-9]+\.[0-9]+(?:[eE][-+]?[0-9]+)?")


def _metric(value: Any) -> Any:
    """An operation metric as a number: Delta writers log them as strings ("12", "0.5")."""
    if isinstance(value, str):
        if _INTEGER.fullmatch(value):
            return int(value)
        if _DECIMAL.fullmatch(value):
            return float(value)
    return value


# -- verify ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One thing `--verify` found wrong, with the files it concerns: a live data file (and
    its DV file), or for the log's checkpoints and `_last_checkpoint` (`data_file` None) the
    log file at fault, relative to the table root (`_delta_log/...`)."""

    kind: str
    data_file: str | None
    message: str
    dv_file: str | None = None
    log_file: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class VerifyReport:
    """What `--verify` read and the problems it found (the log's first)."""

    files_checked: int
    dvs_checked: int
    problems: list[Problem]
    checkpoints_checked: int = 0
    """The checkpoints the snapshot was read from or passed over."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "files_checked": self.files_checked,
            "dvs_checked": self.dvs_checked,
            "checkpoints_checked": self.checkpoints_checked,
            "problems": [p.to_json() for p in self.problems],
        }


def verify(snapshot: Snapshot, log: DeltaLog, progress: Progress | None = None) -> VerifyReport:
    """Check the log's checkpoints and `_last_checkpoint`, read every data file footer and
    every DV; report each problem found."""
    from dvtool.delta.dvstore import DVStore

    log_problems = log_damage_problems(snapshot, log)

    store = DVStore(log.storage)
    columns = snapshot.files.select(["path", "size", "numRecords", "deletionVector"]).to_pylist()

    def check(row: dict[str, Any]) -> list[Problem]:
        problems = _check_file(log, store, row)
        if progress:
            progress(1)
        return problems

    found = [p for problems in map_io(check, columns) for p in problems]
    dvs = sum(1 for row in columns if row["deletionVector"] is not None)
    checkpoints = len(snapshot.damaged_checkpoints) + (snapshot.checkpoint_version is not None)
    return VerifyReport(len(columns), dvs, log_problems + found, checkpoints)


def log_damage_problems(snapshot: Snapshot, log: DeltaLog) -> list[Problem]:
    """The checkpoints the snapshot's reader passed over (unreadable, a part or a sidecar
    missing: other readers fail on them) and what is wrong with `_last_checkpoint`, one
    problem per file at fault. The hint is looked up again: the snapshot records it only
    for the latest version, and it concerns the latest whatever version is inspected."""
    problems = [
        Problem(d.kind, None, d.message, log_file=f"_delta_log/{name}")
        for d in snapshot.damaged_checkpoints
        for name in d.files
    ]
    hint = log.last_checkpoint_problem()
    if hint is not None:
        problems.append(Problem(hint.kind, None, hint.message, log_file=LAST_CHECKPOINT))
    return problems


def _check_file(log: DeltaLog, store: DVStore, row: dict[str, Any]) -> list[Problem]:
    path = row["path"]
    problems, footer_rows = _check_data_file(log, log.storage.resolve(path), path, row)
    records = footer_rows if footer_rows is not None else row["numRecords"]
    return problems + _check_dv(store, row, path, records)


def _check_data_file(
    log: DeltaLog, location: str, path: str, row: dict[str, Any]
) -> tuple[list[Problem], int | None]:
    """Existence, size and footer row count of one data file; the footer count if read."""
    from dvtool.data_files import footer_row_count

    try:
        info = log.storage.info(location)
        if info is None:
            return [
                Problem("data-file-missing", path, f"data file {location} does not exist")
            ], None
        footer_rows = footer_row_count(log.storage, location)
    except DvtoolError as e:
        return [Problem("data-file-unreadable", path, str(e))], None
    problems = []
    if info.size != row["size"]:
        message = f"data file {location} has {info.size} bytes; the log says {row['size']}"
        problems.append(Problem("data-file-size", path, message))
    if row["numRecords"] not in (None, footer_rows):
        message = f"data file {location} has {footer_rows} rows; its stats say {row['numRecords']}"
        problems.append(Problem("num-records", path, message))
    if row["numRecords"] is None and row["deletionVector"] is not None:
        message = (
            f"data file {location} has a deletion vector but no numRecords in its stats, "
            f"which the protocol requires (it has {footer_rows} rows)"
        )
        problems.append(Problem("num-records", path, message))
    return problems, footer_rows


def _check_dv(store: DVStore, row: dict[str, Any], path: str, records: int | None) -> list[Problem]:
    from dvtool.delta.protocol.deletion_vector import DeletionVectorDescriptor

    dv = row["deletionVector"]
    if dv is None:
        return []
    try:
        descriptor = DeletionVectorDescriptor.from_json(dv)
        store.load(descriptor, data_file=path, num_records=records)
    except DeletionVectorError as e:
        return [Problem(_dv_problem_kind(e), path, str(e), e.dv_file)]
    except (DvtoolError, StorageError) as e:
        return [Problem("dv-unreadable", path, str(e))]
    return []


def _dv_problem_kind(error: DeletionVectorError) -> str:
    name = type(error).__name__.removesuffix("Error").removeprefix("DV")
    return "dv-" + "".join("-" + c.lower() if c.isupper() else c for c in name).lstrip("-")


# -- the command -----------------------------------------------------------------------------


@dataclass(frozen=True)
class InspectRequest:
    """What `dvtool inspect` was asked to show."""

    version: int | None = None
    timestamp_ms: int | None = None
    files: bool = False
    history: int | None = None
    verify: bool = False
    checks: tuple[tuple[str, float], ...] = ()
    count_rows: bool = False
    files_limit: int | None = None
    """With `files`: list only the first N live files (None: all), for human output."""


@dataclass(frozen=True)
class InspectResult(CommandResult):
    """Everything `inspect` computed; `exit_code` is 6 on verify problems, 3 on failed checks."""

    summary: TableSummary | None
    files: list[FileEntry] | None = None
    history: list[HistoryEntry] | None = None
    verify: VerifyReport | None = None
    checks: list[CheckOutcome] | None = None

    @property
    def exit_code(self) -> int:
        return inspect_exit_code(self.verify, self.checks)

    def to_json(self) -> dict[str, Any]:
        summary = {"format": "delta", **self.summary.to_json()} if self.summary else {}
        return inspect_document(summary, self.files, self.history, self.verify, self.checks)


def run_inspect(
    log: DeltaLog, request: InspectRequest, progress: Callable[[int], Progress] | None = None
) -> InspectResult:
    """Run `inspect`: `progress(total)` returns the callback `--verify` advances per file."""
    if request.history is not None and not (request.files or request.verify or request.checks):
        return InspectResult(None, history=history(log, request.history))
    snapshot = load_snapshot(log, request.version, request.timestamp_ms)
    footers = None
    if request.count_rows:
        from dvtool.commands.inspect.columns import count_missing_rows

        footers = count_missing_rows(snapshot, log)
    summary = summarize(snapshot, footers, snapshot_position(snapshot))
    files = None
    if request.files:
        from dvtool.delta.dvstore import DVStore

        files = list_files(snapshot, DVStore(log.storage), request.files_limit)
    hist = history(log, request.history) if request.history is not None else None
    report = None
    if request.verify:
        report = verify(snapshot, log, progress(snapshot.files.num_rows) if progress else None)
    checks = evaluate_checks(summary, request.checks) if request.checks else None
    return InspectResult(summary, files, hist, report, checks)
