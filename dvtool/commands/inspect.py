"""`dvtool inspect`: what a table holds, how many rows its DVs delete, and whether it is sound.

Each function takes an opened table and returns a plain result object with `to_json()`; the
CLI decides how to show it. Summaries are computed column-wise over the snapshot's file table
so they stay fast for tables with hundreds of thousands of files.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.core import arrow_values
from dvtool.core.features import reader_features, require_readable, writer_features
from dvtool.core.schema import StructType, partition_physical_names, type_string
from dvtool.errors import DeletionVectorError, DvtoolError, StorageError, UsageError
from dvtool.io_pool import map_io

if TYPE_CHECKING:
    from dvtool.dvstore import DVStore
    from dvtool.log.reader import CommitRecord, DeltaLog
    from dvtool.log.snapshot import Snapshot

# The DV codec (dvtool.dvstore, dvtool.core.deletion_vector: pyroaring) and parquet footers
# (dvtool.data_files: pyarrow.parquet) are imported by the functions of --files, --verify and
# --count-rows only: the default summary reads neither, and on a small table start-up is
# most of its time.

Progress = Callable[[int], None]
_RATIO_BUCKETS = 10


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


# -- summary ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DVStorage:
    """How the live DVs are stored: separate DV files, inline in the log, absolute paths."""

    dv_files: int
    on_disk_dvs: int
    inline_dvs: int
    absolute_path_dvs: int
    dv_bytes: int


@dataclass(frozen=True)
class TableSummary:
    """The default view of `inspect`."""

    table_id: str
    name: str | None
    location: str
    version: int
    commit_timestamp: int | None
    operation: str | None
    protocol: dict[str, Any]
    reader_features: list[str]
    writer_features: list[str]
    configuration: dict[str, str]
    partition_columns: list[str]
    column_mapping_mode: str
    schema: list[dict[str, Any]]
    num_files: int
    size_bytes: int
    physical_rows: int
    logical_rows: int
    deleted_rows: int
    deleted_ratio: float
    files_with_dvs: int
    files_without_stats: int
    row_counts_exact: bool
    dv_storage: DVStorage
    deleted_ratio_histogram: list[dict[str, Any]]
    num_tombstones: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize(snapshot: Snapshot, row_counts: FooterCounts | None = None) -> TableSummary:
    """Counts, sizes, DV health and the deleted-ratio histogram of a snapshot."""
    files = snapshot.files
    records = _records(snapshot, row_counts)
    without_stats = _count(pc.is_null(files.column("numRecords")))
    deleted = snapshot.dv_cardinality
    physical = _sum(records)
    deleted_rows = _sum(deleted)
    protocol = snapshot.protocol
    return TableSummary(
        table_id=snapshot.metadata.id,
        name=snapshot.metadata.name,
        location=snapshot.root,
        version=snapshot.version,
        commit_timestamp=snapshot.commit.timestamp_ms,
        operation=(snapshot.commit.commit_info or {}).get("operation"),
        protocol=_protocol_json(snapshot),
        reader_features=sorted(reader_features(protocol)),
        writer_features=sorted(writer_features(protocol)),
        configuration=dict(snapshot.metadata.configuration),
        partition_columns=list(snapshot.metadata.partition_columns),
        column_mapping_mode=snapshot.column_mapping_mode,
        schema=_schema_json(snapshot.schema, snapshot.column_mapping_mode),
        num_files=files.num_rows,
        size_bytes=_sum(files.column("size")),
        physical_rows=physical,
        logical_rows=physical - deleted_rows,
        deleted_rows=deleted_rows,
        deleted_ratio=deleted_rows / physical if physical else 0.0,
        files_with_dvs=pc.sum(pc.is_valid(files.column("deletionVector"))).as_py() or 0,
        files_without_stats=without_stats,
        row_counts_exact=without_stats == 0 or row_counts is not None,
        dv_storage=_dv_storage(files.column("deletionVector")),
        deleted_ratio_histogram=_histogram(deleted, records, files.column("deletionVector")),
        num_tombstones=snapshot.tombstones.num_rows,
    )


def _protocol_json(snapshot: Snapshot) -> dict[str, Any]:
    p = snapshot.protocol
    return {
        "minReaderVersion": p.min_reader_version,
        "minWriterVersion": p.min_writer_version,
        "readerFeatures": None if p.reader_features is None else list(p.reader_features),
        "writerFeatures": None if p.writer_features is None else list(p.writer_features),
    }


def _schema_json(schema: StructType, mode: str) -> list[dict[str, Any]]:
    return [
        {
            "name": f.name,
            "type": type_string(f.type),
            "nullable": f.nullable,
            "physical_name": f.physical_name(mode),
        }
        for f in schema
    ]


def _sum(values: pa.Array | pa.ChunkedArray) -> int:
    return int(pc.sum(values).as_py() or 0)


def _dv_storage(dvs: pa.ChunkedArray) -> DVStorage:
    kinds = pc.struct_field(dvs, "storageType")
    on_disk = pc.equal(kinds, _string("u"))
    paths = pc.struct_field(dvs, "pathOrInlineDv").filter(pc.fill_null(on_disk, arrow_values.FALSE))
    return DVStorage(
        dv_files=len(pc.unique(paths)),
        on_disk_dvs=_count(on_disk),
        inline_dvs=_count(pc.equal(kinds, _string("i"))),
        absolute_path_dvs=_count(pc.equal(kinds, _string("p"))),
        dv_bytes=_sum(pc.struct_field(dvs, "sizeInBytes")),
    )


def _string(value: str) -> pa.Scalar:
    return arrow_values.scalar(value, pa.string())


def _count(mask: pa.Array | pa.ChunkedArray) -> int:
    return int(pc.sum(pc.fill_null(mask, arrow_values.FALSE)).as_py() or 0)


def _histogram(deleted: pa.Array, records: pa.Array, dvs: pa.ChunkedArray) -> list[dict[str, Any]]:
    """Files per deleted-ratio bucket of 10%; files without a DV are a bucket of their own."""
    has_dv = pc.is_valid(dvs)
    ratio = pc.divide(pc.cast(deleted, pa.float64()), pc.cast(records, pa.float64()))
    ratio = pc.filter(ratio, pc.and_(has_dv, pc.greater(records, _int64(0))))
    scaled = pc.multiply(ratio, arrow_values.scalar(float(_RATIO_BUCKETS), pa.float64()))
    bucket = pc.min_element_wise(pc.cast(pc.floor(scaled), pa.int64()), _int64(_RATIO_BUCKETS - 1))
    counts = {row["values"]: row["counts"] for row in pc.value_counts(bucket).to_pylist()}
    width = 100 // _RATIO_BUCKETS
    rows = [{"bucket": "no DV", "files": _count(pc.invert(has_dv))}]
    rows += [
        {"bucket": f"{b * width}-{(b + 1) * width}%", "files": counts.get(b, 0)}
        for b in range(_RATIO_BUCKETS)
    ]
    return rows


# -- row counts from footers -----------------------------------------------------------------


@dataclass
class FooterCounts:
    """Row counts read from parquet footers for files whose stats lack numRecords."""

    counts: dict[int, int] = field(default_factory=dict)


def count_missing_rows(snapshot: Snapshot, log: DeltaLog) -> FooterCounts:
    """Read the footer of every live file without `numRecords`, so row counts are exact.

    Only on request (`--count-rows`): by default counts come from the log alone, and
    `files_without_stats` says how many files they leave out.
    """
    from dvtool.data_files import footer_row_count

    missing = pc.indices_nonzero(pc.is_null(snapshot.files.column("numRecords"))).to_pylist()
    paths = snapshot.files.column("path")
    storage = log.storage

    def count(i: int) -> tuple[int, int]:
        return i, footer_row_count(storage, storage.resolve(paths[i].as_py()))

    return FooterCounts(dict(map_io(count, missing)))


def _records(snapshot: Snapshot, footers: FooterCounts | None) -> pa.Array:
    records = arrow_values.combined(snapshot.files.column("numRecords"))
    if not footers or not footers.counts:
        return pc.fill_null(records, _int64(0))
    values = records.to_pylist()
    for i, n in footers.counts.items():
        values[i] = n
    return pc.fill_null(arrow_values.array(values, pa.int64()), _int64(0))


def _int64(value: int) -> pa.Scalar:
    return arrow_values.scalar(value, pa.int64())


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


def list_files(snapshot: Snapshot, store: DVStore) -> list[FileEntry]:
    """Every live file with partition values (logical names), counts and DV location."""
    logical = _logical_partition_names(snapshot)
    columns = snapshot.files.select(
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
    from dvtool.core.deletion_vector import DeletionVectorDescriptor

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
        operation_metrics=dict(info.get("operationMetrics") or {}),
        engine_info=info.get("engineInfo"),
    )


# -- verify ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One thing `--verify` found wrong, with the files it concerns."""

    kind: str
    data_file: str
    message: str
    dv_file: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class VerifyReport:
    """What `--verify` read and the problems it found."""

    files_checked: int
    dvs_checked: int
    problems: list[Problem]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "files_checked": self.files_checked,
            "dvs_checked": self.dvs_checked,
            "problems": [p.to_json() for p in self.problems],
        }


def verify(snapshot: Snapshot, log: DeltaLog, progress: Progress | None = None) -> VerifyReport:
    """Read every data file footer and every DV; report each problem found."""
    from dvtool.dvstore import DVStore

    store = DVStore(log.storage)
    columns = snapshot.files.select(["path", "size", "numRecords", "deletionVector"]).to_pylist()

    def check(row: dict[str, Any]) -> list[Problem]:
        problems = _check_file(log, store, row)
        if progress:
            progress(1)
        return problems

    found = [p for problems in map_io(check, columns) for p in problems]
    dvs = sum(1 for row in columns if row["deletionVector"] is not None)
    return VerifyReport(len(columns), dvs, found)


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
    from dvtool.core.deletion_vector import DeletionVectorDescriptor

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


# -- checks ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckOutcome:
    """One `--check NAME=LIMIT` gate and whether the table passes it."""

    name: str
    limit: float
    actual: float
    passed: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_CHECKS: dict[str, Callable[[TableSummary], float]] = {
    "max-deleted-ratio": lambda s: s.deleted_ratio,
    "max-deleted-rows": lambda s: s.deleted_rows,
    "max-dv-files": lambda s: s.dv_storage.dv_files,
    "max-files-with-dvs": lambda s: s.files_with_dvs,
    "max-inline-dvs": lambda s: s.dv_storage.inline_dvs,
    "max-files": lambda s: s.num_files,
    "max-files-without-stats": lambda s: s.files_without_stats,
}
CHECK_NAMES = tuple(sorted(_CHECKS))


def parse_check(text: str) -> tuple[str, float]:
    """Parse `NAME=LIMIT` (e.g. `max-deleted-ratio=0.2`); UsageError when it is not valid."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or name not in _CHECKS:
        raise UsageError(
            f"invalid --check {text!r}: expected NAME=LIMIT",
            hint=f"Available checks: {', '.join(CHECK_NAMES)}.",
        )
    try:
        limit = float(value)
    except ValueError:
        raise UsageError(f"invalid --check {text!r}: {value!r} is not a number") from None
    if limit < 0:
        raise UsageError(f"invalid --check {text!r}: the limit must not be negative")
    return name, limit


def evaluate_checks(
    summary: TableSummary, checks: Sequence[tuple[str, float]]
) -> list[CheckOutcome]:
    """Evaluate each `max-*` gate: it passes when the actual value is at most the limit."""
    outcomes = []
    for name, limit in checks:
        actual = float(_CHECKS[name](summary))
        outcomes.append(CheckOutcome(name, limit, actual, actual <= limit))
    return outcomes


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


@dataclass(frozen=True)
class InspectResult:
    """Everything `inspect` computed; `exit_code` is 1 on verify problems, 3 on failed checks."""

    summary: TableSummary | None
    files: list[FileEntry] | None = None
    history: list[HistoryEntry] | None = None
    verify: VerifyReport | None = None
    checks: list[CheckOutcome] | None = None

    @property
    def exit_code(self) -> int:
        if self.verify is not None and not self.verify.ok:
            return 1
        if self.checks and not all(c.passed for c in self.checks):
            return 3
        return 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = self.summary.to_json() if self.summary else {}
        if self.files is not None:
            out["files"] = [f.to_json() for f in self.files]
        if self.history is not None:
            out["history"] = [h.to_json() for h in self.history]
        if self.verify is not None:
            out["verify"] = self.verify.to_json()
        if self.checks is not None:
            out["checks"] = [c.to_json() for c in self.checks]
        return out


def run_inspect(
    log: DeltaLog, request: InspectRequest, progress: Callable[[int], Progress] | None = None
) -> InspectResult:
    """Run `inspect`: `progress(total)` returns the callback `--verify` advances per file."""
    if request.history is not None and not (request.files or request.verify or request.checks):
        return InspectResult(None, history=history(log, request.history))
    snapshot = load_snapshot(log, request.version, request.timestamp_ms)
    footers = count_missing_rows(snapshot, log) if request.count_rows else None
    summary = summarize(snapshot, footers)
    files = None
    if request.files:
        from dvtool.dvstore import DVStore

        files = list_files(snapshot, DVStore(log.storage))
    hist = history(log, request.history) if request.history is not None else None
    report = None
    if request.verify:
        report = verify(snapshot, log, progress(snapshot.files.num_rows) if progress else None)
    checks = evaluate_checks(summary, request.checks) if request.checks else None
    return InspectResult(summary, files, hist, report, checks)
