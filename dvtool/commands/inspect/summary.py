"""The default view of `dvtool inspect`: counts, sizes, DV health and the deleted-ratio histogram.

The per-file totals have two evaluations of one definition:

- column-wise over the snapshot's file table (pyarrow, `dvtool.commands.inspect.columns`),
  for tables of any size and whenever footers were read (`--count-rows`);
- over the add actions as parsed from JSON, for a small table whose state comes from JSON
  commits alone (no checkpoint) and whose actions hold plain JSON values. Such an `inspect`
  then never imports pyarrow, whose import is most of what it would cost (start-up goals of
  scripts/bench_startup.py).

tests/commands/inspect/test_inspect_summary.py holds the two equal on every golden table and on
generated file actions. Everything else in the summary comes from the snapshot's protocol
and metadata, once; the log's health (the checkpoint the snapshot was replayed from and the
commits replayed after it) from the snapshot itself (`snapshot_position`).

Small files are those below the table's compaction target size
(`dvtool.delta.protocol.target_file_size`: `delta.targetFileSize`, else 256 MiB), the files
`dvtool optimize` compacts; a file without a size counts as small, as there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from dvtool.delta.protocol.actions import ADD_FIELDS, REMOVE_FIELDS, has_plain_values
from dvtool.delta.protocol.features import reader_features, writer_features
from dvtool.delta.protocol.log_files import complete_checkpoints
from dvtool.delta.protocol.schema import StructType, type_string
from dvtool.delta.protocol.stats import num_records_of
from dvtool.delta.protocol.target_file_size import target_file_size
from dvtool.errors import UsageError

if TYPE_CHECKING:
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.delta.log.snapshot import Snapshot
    from dvtool.delta.protocol.log_damage import DamagedCheckpoint, LastCheckpointProblem

RATIO_BUCKETS = 10
# Above this many JSON file actions, the column-wise evaluation is the faster one.
_MAX_ACTIONS_SUMMED_AS_JSON = 20_000


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
    small_file_size: int | None
    """The compaction target size: files below it are small (None: the property is no size)."""
    small_files: int | None
    avg_file_size: int
    """Bytes per live file, rounded down (0 for a table without files)."""
    checkpoint_version: int | None
    """The newest complete checkpoint at or below `version` (None: none, or not looked up)."""
    commits_since_checkpoint: int | None
    """The commits a reader replays after that checkpoint (all of them without one)."""
    damaged_checkpoints: list[dict[str, Any]] = field(default_factory=list)
    """Checkpoints from `checkpoint_version` on that cannot be used (`DamagedCheckpoint` as
    JSON), newest first: the state was replayed without them."""
    last_checkpoint_problem: dict[str, Any] | None = None
    """What is wrong with `_last_checkpoint` (`LastCheckpointProblem` as JSON), if anything."""
    log_warnings: list[str] = field(default_factory=list)
    """The two above as sentences for a person, each saying what the state was read from."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LogPosition:
    """Where a version stands in its log: the newest complete checkpoint at or below it, and
    how many commits after that checkpoint a reader must replay to reach it."""

    version: int
    checkpoint_version: int | None
    commits_since_checkpoint: int
    damaged_checkpoints: tuple[DamagedCheckpoint, ...] = ()
    """Newer checkpoints the reader passed over (known only from a snapshot)."""
    last_checkpoint_problem: LastCheckpointProblem | None = None

    @property
    def warnings(self) -> list[str]:
        """The damage a reader passed over, each with what the state was read from instead."""
        if self.checkpoint_version is None:
            instead = "the state was read from the JSON commits instead"
        else:
            instead = f"the state was read from the checkpoint of version {self.checkpoint_version}"
        mend = "`dvtool checkpoint` writes a good one"
        out = [f"{d.message}; {instead} ({mend})" for d in self.damaged_checkpoints]
        if self.last_checkpoint_problem is not None:
            out.append(
                f"{self.last_checkpoint_problem.message}; dvtool listed the whole log instead "
                "(`dvtool checkpoint` rewrites it)"
            )
        return out


def snapshot_position(snapshot: Snapshot) -> LogPosition:
    """The log position of a snapshot: the checkpoint its state was replayed from, as the
    reader chose it (no second listing of the log), and the damage it passed over."""
    checkpoint = snapshot.checkpoint_version
    since = snapshot.version - (-1 if checkpoint is None else checkpoint)
    return LogPosition(
        snapshot.version,
        checkpoint,
        since,
        snapshot.damaged_checkpoints,
        snapshot.last_checkpoint_problem,
    )


def latest_log_position(log: DeltaLog) -> LogPosition:
    """The log position of the latest version without replaying it: one listing of
    `_delta_log` from the `_last_checkpoint` hint on when that checkpoint is complete (as the
    log reader lists), else of the whole log."""
    hint = log.last_checkpoint_hint()
    files = None
    if hint is not None:
        files = log.list_files(start_after=f"{hint:020d}")
        if hint not in complete_checkpoints(files):
            files = None
    if files is None:
        files = log.list_files()
    version = max(f.version for f in files)
    checkpoint = max(complete_checkpoints(files), default=None)
    since = version - (-1 if checkpoint is None else checkpoint)
    return LogPosition(version, checkpoint, since)


@dataclass
class FooterCounts:
    """Row counts read from parquet footers for files whose stats lack numRecords."""

    counts: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class FileTotals:
    """What the summary sums over the live files; both evaluations produce one."""

    num_files: int
    size_bytes: int
    physical_rows: int
    deleted_rows: int
    files_with_dvs: int
    files_without_stats: int
    dv_storage: DVStorage
    ratio_buckets: tuple[int, ...]
    """Files with a DV and rows, per deleted-ratio bucket of 10% (the last one takes >= 90%)."""


def summarize(
    snapshot: Snapshot,
    row_counts: FooterCounts | None = None,
    position: LogPosition | None = None,
) -> TableSummary:
    """Counts, sizes, DV health, the deleted-ratio histogram and the log position (when
    given; `run_inspect` always looks it up) of a snapshot."""
    small_file_size = _small_file_size(snapshot)
    as_json = row_counts is None and summed_as_json(snapshot)
    if as_json:
        totals = totals_from_actions(snapshot.state.live_files.actions)
        num_tombstones = len(snapshot.state.tombstones)
    else:
        totals = _totals_from_table(snapshot, row_counts)
        num_tombstones = snapshot.tombstones.num_rows
    small_files = None
    if small_file_size is not None:
        small_files = count_small_files(snapshot, small_file_size, as_json=as_json)
    protocol = snapshot.protocol
    physical, deleted = totals.physical_rows, totals.deleted_rows
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
        num_files=totals.num_files,
        size_bytes=totals.size_bytes,
        physical_rows=physical,
        logical_rows=physical - deleted,
        deleted_rows=deleted,
        deleted_ratio=deleted / physical if physical else 0.0,
        files_with_dvs=totals.files_with_dvs,
        files_without_stats=totals.files_without_stats,
        row_counts_exact=totals.files_without_stats == 0 or row_counts is not None,
        dv_storage=totals.dv_storage,
        deleted_ratio_histogram=_histogram(totals),
        num_tombstones=num_tombstones,
        small_file_size=small_file_size,
        small_files=small_files,
        avg_file_size=totals.size_bytes // totals.num_files if totals.num_files else 0,
        checkpoint_version=position.checkpoint_version if position else None,
        commits_since_checkpoint=position.commits_since_checkpoint if position else None,
        damaged_checkpoints=[d.to_json() for d in position.damaged_checkpoints] if position else [],
        last_checkpoint_problem=_problem_json(position),
        log_warnings=position.warnings if position else [],
    )


def _problem_json(position: LogPosition | None) -> dict[str, Any] | None:
    problem = position.last_checkpoint_problem if position else None
    return problem.to_json() if problem else None


def _small_file_size(snapshot: Snapshot) -> int | None:
    """The table's compaction target size; None when `delta.targetFileSize` is no size
    (the summary still shows; the gate `max-small-files` reports the property)."""
    try:
        return target_file_size(snapshot.metadata.configuration)
    except UsageError:
        return None


def count_small_files(snapshot: Snapshot, small_file_size: int, *, as_json: bool) -> int:
    """The live files smaller than `small_file_size` bytes (no size: small, as compaction
    takes them), over the JSON actions (`as_json`, see `summed_as_json`) or column-wise."""
    if as_json:
        adds = snapshot.state.live_files.actions
        return sum(1 for add in adds if (add.get("size") or 0) < small_file_size)
    import pyarrow as pa
    import pyarrow.compute as pc

    from dvtool.arrays import arrow_values

    bound = arrow_values.scalar(min(small_file_size, 2**63 - 1), pa.int64())
    small = pc.fill_null(pc.less(snapshot.files.column("size"), bound), arrow_values.TRUE)
    return int(pc.sum(small).as_py() or 0)


def summed_as_json(snapshot: Snapshot) -> bool:
    """Whether the totals come from the JSON actions: few, from commits only, all plain.

    Actions that are not plain (`has_plain_values`) go through the file table, whose
    conversion accepts or rejects them (LogError naming the log file) as every command does.
    """
    live, tombstones = snapshot.state.live_files, snapshot.state.tombstones
    return (
        live.json_only
        and tombstones.json_only
        and len(live.actions) + len(tombstones.actions) <= _MAX_ACTIONS_SUMMED_AS_JSON
        and has_plain_values(live.actions, ADD_FIELDS)
        and has_plain_values(tombstones.actions, REMOVE_FIELDS)
    )


def totals_from_actions(adds: Iterable[Mapping[str, Any]]) -> FileTotals:
    """The totals of plain JSON add actions (`has_plain_values`), one pass in Python."""
    num_files = size = physical = deleted = with_dvs = without_stats = 0
    kinds = {"u": 0, "i": 0, "p": 0}
    dv_paths: set[str | None] = set()
    dv_bytes = 0
    buckets = [0] * RATIO_BUCKETS
    for add in adds:
        num_files += 1
        size += add.get("size") or 0
        records = num_records_of(add.get("stats"))
        if records is None:
            without_stats += 1
            records = 0
        physical += records
        dv = add.get("deletionVector")
        if dv is None:
            continue
        with_dvs += 1
        cardinality = dv.get("cardinality") or 0
        deleted += cardinality
        kind = dv.get("storageType")
        if kind in kinds:
            kinds[kind] += 1
        if kind == "u":
            dv_paths.add(dv.get("pathOrInlineDv"))
        dv_bytes += dv.get("sizeInBytes") or 0
        if records > 0:
            bucket = _bucket(float(cardinality) / float(records))
            if bucket >= 0:
                buckets[bucket] += 1
    storage = DVStorage(len(dv_paths), kinds["u"], kinds["i"], kinds["p"], dv_bytes)
    return FileTotals(
        num_files, size, physical, deleted, with_dvs, without_stats, storage, tuple(buckets)
    )


def _bucket(ratio: float) -> int:
    """The histogram bucket of a deleted ratio, as the column-wise evaluation computes it."""
    return min(math.floor(ratio * float(RATIO_BUCKETS)), RATIO_BUCKETS - 1)


def _totals_from_table(snapshot: Snapshot, footers: FooterCounts | None) -> FileTotals:
    from dvtool.commands.inspect.columns import totals_from_table

    return totals_from_table(snapshot, footers)


def _histogram(totals: FileTotals) -> list[dict[str, Any]]:
    """Files per deleted-ratio bucket of 10%; files without a DV are a bucket of their own."""
    width = 100 // RATIO_BUCKETS
    rows = [{"bucket": "no DV", "files": totals.num_files - totals.files_with_dvs}]
    rows += [
        {"bucket": f"{b * width}-{(b + 1) * width}%", "files": n}
        for b, n in enumerate(totals.ratio_buckets)
    ]
    return rows


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
