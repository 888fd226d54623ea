"""`dvtool inspect` on a Paimon table: summary, files, history, verify and checks.

The same request as Delta's (`dvtool.commands.inspect.command.InspectRequest`: `--version`
is a snapshot id, `--timestamp` the newest snapshot committed at or before it) and a result
of the same shape; the figures are `dvtool.commands.inspect.paimon_summary`'s, the gates
`dvtool.commands.inspect.paimon_checks`'. `--verify` is `dvtool.paimon.verify`'s
`verify_snapshot`. `--count-rows` changes nothing: the counts come from the manifests (and
the deletion files of DVs whose cardinality old writers did not record) and are exact
wherever Paimon's reads are defined by metadata.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from dvtool.commands.inspect.checks import CheckOutcome
from dvtool.commands.inspect.outcome import inspect_document, inspect_exit_code
from dvtool.commands.inspect.paimon_checks import evaluate_paimon_checks
from dvtool.commands.inspect.paimon_summary import PaimonSummary, summarize
from dvtool.commands.result import CommandResult
from dvtool.errors import DvtoolError
from dvtool.paimon.deletion_files import with_cardinalities
from dvtool.paimon.protocol.table_files import LiveDataFile, TableFiles
from dvtool.paimon.snapshot_files import read_snapshot_files

if TYPE_CHECKING:
    from dvtool.commands.inspect.command import InspectRequest
    from dvtool.paimon.protocol.snapshots import Snapshot
    from dvtool.paimon.tables import PaimonTable
    from dvtool.paimon.verify import PaimonVerifyReport

Progress = Callable[[int], None]


@dataclass(frozen=True)
class PaimonFileEntry:
    """One live data file as `inspect --files` shows it, with its DV."""

    path: str
    partition_values: dict[str, Any]
    bucket: int
    level: int
    size: int
    num_records: int
    deleted_rows: int
    deleted_ratio: float | None
    visible: bool
    """False for a primary-key table's level-0 file, which DV readers do not read yet."""
    deletion_file: str | None
    dv_offset: int | None
    dv_length: int | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PaimonSnapshotEntry:
    """One snapshot as `inspect --history` shows it."""

    snapshot_id: int
    schema_id: int
    timestamp: int
    commit_kind: str
    commit_user: str | None
    total_record_count: int | None
    delta_record_count: int | None
    changelog_record_count: int | None
    current: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PaimonInspectResult(CommandResult):
    """Everything `inspect` computed on a Paimon table; `exit_code` as Delta's: 6 on verify
    problems, 3 on failed checks."""

    summary: PaimonSummary | None
    files: list[PaimonFileEntry] | None = None
    history: list[PaimonSnapshotEntry] | None = None
    verify: PaimonVerifyReport | None = None
    checks: list[CheckOutcome] | None = None

    @property
    def exit_code(self) -> int:
        return inspect_exit_code(self.verify, self.checks)

    def to_json(self) -> dict[str, Any]:
        summary = self.summary.to_json() if self.summary else {}
        return inspect_document(summary, self.files, self.history, self.verify, self.checks)


def run_inspect_paimon(
    table: PaimonTable,
    request: InspectRequest,
    progress: Callable[[int], Progress] | None = None,
) -> PaimonInspectResult:
    """Run `inspect` on a Paimon table: `progress(total)` returns the callback `--verify`
    advances."""
    hist = history(table, request.history) if request.history is not None else None
    if hist is not None and not (request.files or request.verify or request.checks):
        return PaimonInspectResult(None, history=hist)
    snapshot = table.select(request.version, request.timestamp_ms)
    if snapshot is None:
        schema, files = table.latest_schema(), TableFiles()
    else:
        try:
            read = read_snapshot_files(table, snapshot)
        except DvtoolError:
            if not request.verify:
                raise
            # Metadata that cannot be read: no summary, but `--verify` names every file.
            return PaimonInspectResult(None, history=hist, verify=_verify(table, snapshot))
        schema, files = read.schema, with_cardinalities(table, read.files)
    summary = summarize(table, schema, snapshot, files)
    listed = list_files(files, request.files_limit) if request.files else None
    report = _verify(table, snapshot, progress, files) if request.verify else None
    checks = evaluate_paimon_checks(summary, request.checks) if request.checks else None
    return PaimonInspectResult(summary, listed, hist, report, checks)


def _verify(
    table: PaimonTable,
    snapshot: Snapshot | None,
    progress: Callable[[int], Progress] | None = None,
    files: TableFiles | None = None,
) -> PaimonVerifyReport:
    """`--verify`: the one call of `dvtool.paimon.verify.verify_snapshot`, its progress bar
    sized by the live data and deletion files (when they could be read)."""
    from dvtool.paimon.verify import verify_snapshot

    advance = None
    if progress is not None and files is not None:
        advance = progress(len(files.data) + len(files.deletion_files()))
    return verify_snapshot(table, snapshot, advance)


def list_files(files: TableFiles, limit: int | None = None) -> list[PaimonFileEntry]:
    """The live data files (the first `limit`, or all) with their DVs."""
    data = files.data if limit is None else files.data[:limit]
    return [_file_entry(f) for f in data]


def _file_entry(f: LiveDataFile) -> PaimonFileEntry:
    rows = f.meta.row_count
    return PaimonFileEntry(
        path=f.path,
        partition_values={k: _json_value(v) for k, v in f.partition.values.items()},
        bucket=f.bucket,
        level=f.meta.level,
        size=f.meta.file_size,
        num_records=rows,
        deleted_rows=f.deleted_rows,
        deleted_ratio=f.deleted_rows / rows if rows else None,
        visible=f.visible,
        deletion_file=f.dv_file.path if f.dv_file else None,
        dv_offset=f.dv.offset if f.dv else None,
        dv_length=f.dv.length if f.dv else None,
    )


def _json_value(value: Any) -> Any:
    """Partition values as JSON holds them: numbers as numbers (a non-finite float, a
    decimal as plain text: `-12.50`), binary as its UTF-8 text, dates, times and
    timestamps as ISO text."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return f"{value:f}"
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return str(value)


def history(table: PaimonTable, limit: int | None = None) -> list[PaimonSnapshotEntry]:
    """The newest `limit` snapshots (all when None), newest first."""
    snapshots = table.history(limit)
    latest = table.snapshot_ids()[-1] if table.snapshot_ids() else None
    return [
        PaimonSnapshotEntry(
            snapshot_id=s.id,
            schema_id=s.schema_id,
            timestamp=s.time_millis,
            commit_kind=s.commit_kind,
            commit_user=s.commit_user,
            total_record_count=s.total_record_count,
            delta_record_count=s.delta_record_count,
            changelog_record_count=s.changelog_record_count,
            current=s.id == latest,
        )
        for s in snapshots
    ]
