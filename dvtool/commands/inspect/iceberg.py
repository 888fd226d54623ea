"""`dvtool inspect` on an Iceberg table: summary, files, history, verify and checks.

The same request as Delta's (`dvtool.commands.inspect.command.InspectRequest`: `--version` is a
snapshot id, `--timestamp` the snapshot current then) and a result of the same shape; the
figures are `dvtool.commands.inspect.iceberg_summary`'s, the gates
`dvtool.commands.inspect.iceberg_checks`'. `--verify` is `dvtool.iceberg.verify`'s
`verify_snapshot`, called from `_verify` only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from dvtool.commands.inspect.checks import CheckOutcome
from dvtool.commands.inspect.iceberg_checks import evaluate_iceberg_checks
from dvtool.commands.inspect.iceberg_summary import (
    IcebergSummary,
    SnapshotDeletes,
    snapshot_deletes,
    summarize,
)
from dvtool.commands.inspect.outcome import inspect_document, inspect_exit_code
from dvtool.commands.result import CommandResult
from dvtool.iceberg.snapshots import SnapshotEntry, history, select_snapshot

if TYPE_CHECKING:
    from pyiceberg.table.snapshots import Snapshot

    from dvtool.commands.inspect.command import InspectRequest
    from dvtool.iceberg.tables import IcebergTable
    from dvtool.iceberg.verify import IcebergVerifyReport

Progress = Callable[[int], None]


@dataclass(frozen=True)
class IcebergFileEntry:
    """One live data file as `inspect --files` shows it, with the deletes applying to it."""

    path: str
    partition_values: dict[str, Any]
    size: int
    num_records: int
    deleted_rows: int | None
    """None when equality deletes apply and rows were not counted (`--count-rows`)."""
    deleted_ratio: float | None
    data_sequence_number: int
    deletes: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class IcebergInspectResult(CommandResult):
    """Everything `inspect` computed on an Iceberg table; `exit_code` as Delta's: 6 on
    verify problems, 3 on failed checks."""

    summary: IcebergSummary | None
    files: list[IcebergFileEntry] | None = None
    history: list[SnapshotEntry] | None = None
    verify: IcebergVerifyReport | None = None
    checks: list[CheckOutcome] | None = None

    @property
    def exit_code(self) -> int:
        return inspect_exit_code(self.verify, self.checks)

    def to_json(self) -> dict[str, Any]:
        summary = self.summary.to_json() if self.summary else {}
        return inspect_document(summary, self.files, self.history, self.verify, self.checks)


def run_inspect_iceberg(
    table: IcebergTable,
    request: InspectRequest,
    progress: Callable[[int], Progress] | None = None,
) -> IcebergInspectResult:
    """Run `inspect` on an Iceberg table: `progress(total)` returns the callback `--verify`
    advances."""
    hist = history(table.metadata, request.history) if request.history is not None else None
    if hist is not None and not (request.files or request.verify or request.checks):
        return IcebergInspectResult(None, history=hist)
    snapshot = select_snapshot(table.metadata, request.version, request.timestamp_ms)
    figures = snapshot_deletes(table, snapshot, request.count_rows)
    summary = summarize(table, snapshot, figures)
    files = list_files(table, figures, request.files_limit) if request.files else None
    report = _verify(table, snapshot, figures, progress) if request.verify else None
    checks = evaluate_iceberg_checks(summary, request.checks) if request.checks else None
    return IcebergInspectResult(summary, files, hist, report, checks)


def _verify(
    table: IcebergTable,
    snapshot: Snapshot | None,
    figures: SnapshotDeletes,
    progress: Callable[[int], Progress] | None,
) -> IcebergVerifyReport:
    """`--verify`: the one call of `dvtool.iceberg.verify.verify_snapshot`, its progress bar
    sized by the live files (data and delete files)."""
    from dvtool.iceberg.verify import verify_snapshot

    advance = progress(len(figures.data) + len(figures.deletes)) if progress else None
    return verify_snapshot(table.metadata, snapshot, table.io, advance)


def list_files(
    table: IcebergTable, figures: SnapshotDeletes, limit: int | None = None
) -> list[IcebergFileEntry]:
    """The live data files (the first `limit`, or all) with the deletes applying to each."""
    applied = figures.applied if limit is None else figures.applied[:limit]
    specs = table.metadata.specs()
    out = []
    for data, deletes in applied:
        spec = specs.get(data.spec_id)
        names = [f.name for f in spec.fields] if spec is not None else []
        known = figures.exact or not deletes.equality
        deleted = figures.deleted.get(data.path, 0) if known else None
        out.append(
            IcebergFileEntry(
                path=data.path,
                partition_values=dict(zip(names, data.partition, strict=False)),
                size=data.file_size_in_bytes,
                num_records=data.record_count,
                deleted_rows=deleted,
                deleted_ratio=deleted / data.record_count
                if deleted is not None and data.record_count
                else None,
                data_sequence_number=data.data_sequence_number,
                deletes=[
                    {
                        "path": e.path,
                        "kind": e.content.value,
                        "record_count": e.record_count,
                        "data_sequence_number": e.data_sequence_number,
                        "content_offset": e.content_offset,
                    }
                    for e in deletes.files()
                ],
            )
        )
    return out
