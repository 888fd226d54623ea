"""`dvtool optimize`: rewrite files to apply their DVs (`--purge`) or to compact small files.

- `--purge` is Delta's `REORG TABLE ... APPLY (PURGE)`: every live file with a DV (or, with
  `--min-deleted-ratio R`, every file whose deleted ratio is at least R) is rewritten without
  its deleted rows, one new file per input.
- Without `--purge` it is Delta's `OPTIMIZE` bin-packing: per partition, files smaller than
  the target size, and files whose deleted ratio exceeds 5%, are packed into bins of about the
  target size and each bin is rewritten as one file. Files that store variant columns
  differently (shredded or not, other shredding schemas) never share a bin.

Rewrites run on an engine (in-process pyarrow or Spark); only this module commits. Adds and
removes carry `dataChange=false`: the rows of the table do not change. Large jobs commit in
batches of bins, each batch its own transaction. If a concurrent commit removed or changed
an input (a delete wrote a new DV on it), that batch is not committed and the files it wrote
are deleted, so rows deleted concurrently stay deleted.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyroaring import BitMap64

from dvtool import faults
from dvtool.commands.manifest import refresh_manifests_after_commit
from dvtool.core import arrow_values
from dvtool.core.actions import file_action_key
from dvtool.core.commit import remove_for_add
from dvtool.core.conflicts import ReadSet
from dvtool.core.deletion_vector import DeletionVectorDescriptor, bitmap_rows
from dvtool.core.features import require_writable
from dvtool.core.file_layout import variant_columns
from dvtool.data_files import WrittenFile, footer_column_types, footer_row_count
from dvtool.dvstore import DVStore
from dvtool.engines.base import Engine, RewriteBin, RewriteInput, TableLayout
from dvtool.errors import CommitConflictError, CommitOutcomeUnknownError, UsageError
from dvtool.log.reader import DeltaLog
from dvtool.log.snapshot import Snapshot
from dvtool.log.table_root import require_inside_root
from dvtool.log.writer import LogWriter, row_tracked, snapshot_commit_info

if TYPE_CHECKING:  # imported only for --where: sqlglot and acero cost ~0.1 s at start-up
    from dvtool.predicate import Predicate

DEFAULT_TARGET_SIZE = 256 * 1024 * 1024
COMPACTION_DELETED_RATIO = 0.05
Progress = Callable[[int], Callable[[int], None]]
EngineFactory = Callable[[int], Engine]


@dataclass(frozen=True)
class OptimizeRequest:
    """What `dvtool optimize` was asked to do."""

    purge: bool = False
    min_deleted_ratio: float | None = None
    target_size: int | None = None
    where: str | None = None
    dry_run: bool = False
    batch_size: int | None = None


@dataclass(frozen=True)
class PlannedBin:
    """One output file of the plan: its inputs and what the rewrite drops."""

    directory: str
    inputs: list[str]
    input_bytes: int
    input_rows: int
    rows_dropped: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class OptimizeResult:
    """The outcome: committed versions (one per batch; empty for a dry run or no work)."""

    operation: str
    read_version: int
    dry_run: bool
    engine: str
    versions: list[int]
    bins: list[PlannedBin]
    metrics: dict[str, int]
    checkpoint_warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["bins"] = [b.to_json() for b in self.bins]
        return out


@dataclass
class _Candidate:
    index: int
    row: dict[str, Any]
    records: int
    drop: BitMap64 | None

    @property
    def deleted(self) -> int:
        return 0 if self.drop is None else len(self.drop)


def run_optimize(
    log: DeltaLog,
    request: OptimizeRequest,
    engine_for: EngineFactory,
    progress: Progress | None = None,
) -> OptimizeResult:
    """Plan and run the rewrite; `engine_for(bytes_to_rewrite)` picks the engine."""
    _check_request(request)
    snapshot = log.snapshot()
    operation = "REORG" if request.purge else "OPTIMIZE"
    command = "purge" if request.purge else "compaction"
    require_writable(snapshot.protocol, snapshot.metadata, command, snapshot.schema)
    snapshot.require_paths_live_once(operation)
    store = DVStore(log.storage)
    candidates = _candidates(log, snapshot, request, store)
    bins = _bins(log, snapshot, request, candidates)
    planned = [_planned(b, members) for b, members in bins]
    input_bytes = sum(p.input_bytes for p in planned)
    engine = engine_for(input_bytes)
    if request.dry_run or not bins:
        metrics = _metrics(planned, [], [])
        return OptimizeResult(
            operation, snapshot.version, request.dry_run, engine.name, [], planned, metrics
        )
    return _execute(log, snapshot, request, operation, engine, bins, planned, progress)


def _check_request(request: OptimizeRequest) -> None:
    ratio = request.min_deleted_ratio
    if ratio is not None and not 0 <= ratio <= 1:
        raise UsageError(f"--min-deleted-ratio must be between 0 and 1, not {ratio}")
    if ratio is not None and not request.purge:
        raise UsageError("--min-deleted-ratio applies to --purge only")
    if request.target_size is not None and request.target_size <= 0:
        raise UsageError(f"--target-size must be positive, not {request.target_size}")
    if request.batch_size is not None and request.batch_size <= 0:
        raise UsageError(f"--batch-size must be positive, not {request.batch_size}")


# -- planning --------------------------------------------------------------------------------


def _candidates(
    log: DeltaLog, snapshot: Snapshot, request: OptimizeRequest, store: DVStore
) -> list[_Candidate]:
    where = _partition_filter(snapshot, request.where)
    target = _target_size(snapshot, request)
    columns = [
        "path",
        "partitionValues",
        "size",
        "numRecords",
        "deletionVector",
        "baseRowId",
        "defaultRowCommitVersion",
    ]
    rows = snapshot.files.select(columns).to_pylist()
    out = []
    for index, row in enumerate(rows):
        partitions = dict(row["partitionValues"] or [])
        if where is not None and _excluded(where, partitions):
            continue
        dv = row["deletionVector"]
        if not _wanted(request, row, dv, target):
            continue
        require_inside_root(log.storage, [row], "REORG" if request.purge else "OPTIMIZE")
        records = row["numRecords"]
        if records is None:
            records = footer_row_count(log.storage, log.storage.resolve(row["path"]))
        drop = None
        if dv is not None:
            descriptor = DeletionVectorDescriptor.from_json(dv)
            drop = store.load(descriptor, data_file=row["path"], num_records=records)
        candidate = _Candidate(index, row, records, drop)
        if request.purge and not _purge_ratio_ok(request, candidate):
            continue
        if not request.purge and not _compaction_candidate(candidate, target):
            continue
        out.append(candidate)
    return out


def _wanted(request: OptimizeRequest, row: dict[str, Any], dv: Any, target: int) -> bool:
    """Cheap pre-filter before any DV is read."""
    if request.purge:
        return dv is not None
    return bool(row["size"] < target or dv is not None)


def _purge_ratio_ok(request: OptimizeRequest, c: _Candidate) -> bool:
    if request.min_deleted_ratio is None:
        return True
    ratio = c.deleted / c.records if c.records else 1.0
    return ratio >= request.min_deleted_ratio


def _compaction_candidate(c: _Candidate, target: int) -> bool:
    ratio = c.deleted / c.records if c.records else 0.0
    return bool(c.row["size"] < target or ratio > COMPACTION_DELETED_RATIO)


def _excluded(where: Predicate, partitions: dict[str, Any]) -> bool:
    """Whether the partition values prove that no row of the file matches `where`."""
    from dvtool.predicate import Match

    return where.file_match(partitions, None) is Match.NONE


def _partition_filter(snapshot: Snapshot, where: str | None) -> Predicate | None:
    if where is None:
        return None
    from dvtool.predicate import Predicate

    predicate = Predicate.parse(
        where, snapshot.schema, snapshot.metadata.partition_columns, snapshot.column_mapping_mode
    )
    if not predicate.references_only_partitions:
        columns = ", ".join(snapshot.metadata.partition_columns) or "none (unpartitioned)"
        raise UsageError(
            "--where must only use partition columns for optimize",
            hint=f"Partition columns: {columns}.",
        )
    return predicate


def _target_size(snapshot: Snapshot, request: OptimizeRequest) -> int:
    if request.target_size is not None:
        return request.target_size
    configured = snapshot.metadata.configuration.get("delta.targetFileSize")
    try:
        return int(configured) if configured else DEFAULT_TARGET_SIZE
    except ValueError:
        return DEFAULT_TARGET_SIZE


def _bins(
    log: DeltaLog, snapshot: Snapshot, request: OptimizeRequest, candidates: list[_Candidate]
) -> list[tuple[RewriteBin, list[_Candidate]]]:
    if request.purge:
        return [_bin(log, [c]) for c in candidates]
    target = _target_size(snapshot, request)
    variants = sorted(variant_columns(snapshot.schema, snapshot.column_mapping_mode))
    groups: dict[tuple[str, tuple[str, ...]], list[_Candidate]] = {}
    for c in candidates:
        layout = _variant_layout(log, c, variants)
        groups.setdefault((_directory(log, c.row["path"]), layout), []).append(c)
    out = []
    for members in groups.values():
        for group in _pack(sorted(members, key=lambda c: c.row["size"]), target):
            if len(group) > 1 or group[0].drop is not None:
                out.append(_bin(log, group))
    return out


def _variant_layout(log: DeltaLog, c: _Candidate, variants: Sequence[str]) -> tuple[str, ...]:
    """How the file of `c` stores its variant columns (their parquet group types), read from
    its footer. A rewrite copies variant values as stored, never re-encoding them, so only
    files storing them alike (shredded the same way, or not at all) share a bin."""
    if not variants:
        return ()
    return footer_column_types(log.storage, log.storage.resolve(c.row["path"]), variants)


def _pack(members: list[_Candidate], target: int) -> list[list[_Candidate]]:
    groups: list[list[_Candidate]] = []
    current: list[_Candidate] = []
    size = 0
    for c in members:
        if current and size + c.row["size"] > target:
            groups.append(current)
            current, size = [], 0
        current.append(c)
        size += c.row["size"]
    if current:
        groups.append(current)
    return groups


def _bin(log: DeltaLog, members: list[_Candidate]) -> tuple[RewriteBin, list[_Candidate]]:
    inputs = tuple(
        RewriteInput(
            c.row["path"],
            log.storage.resolve(c.row["path"]),
            None if c.drop is None else bitmap_rows(c.drop),
            c.row["baseRowId"],
            c.row["defaultRowCommitVersion"],
        )
        for c in members
    )
    first = members[0].row
    directory = _directory(log, first["path"])
    return RewriteBin(inputs, directory, dict(first["partitionValues"] or [])), members


def _directory(log: DeltaLog, path: str) -> str:
    relative = log.storage.relative_to_root(log.storage.resolve(path)) or ""
    return relative.rsplit("/", 1)[0] if "/" in relative else ""


def _planned(b: RewriteBin, members: list[_Candidate]) -> PlannedBin:
    return PlannedBin(
        directory=b.directory,
        inputs=[c.row["path"] for c in members],
        input_bytes=sum(c.row["size"] for c in members),
        input_rows=sum(c.records for c in members),
        rows_dropped=sum(c.deleted for c in members),
    )


# -- execution -------------------------------------------------------------------------------


def _execute(
    log: DeltaLog,
    snapshot: Snapshot,
    request: OptimizeRequest,
    operation: str,
    engine: Engine,
    bins: list[tuple[RewriteBin, list[_Candidate]]],
    planned: list[PlannedBin],
    progress: Progress | None,
) -> OptimizeResult:
    layout = TableLayout.of(log.storage, snapshot)
    size = request.batch_size or len(bins)
    versions: list[int] = []
    warnings: list[str] = []
    written_all: list[WrittenFile | None] = []
    advance = progress(len(bins)) if progress else None
    for start in range(0, len(bins), size):
        batch = bins[start : start + size]
        config = snapshot.metadata.configuration
        written = engine.rewrite(layout, config, [b for b, _ in batch], advance)
        try:
            faults.reached("data-files-written")
            version, batch_warnings = _commit_batch(
                log, snapshot, request, operation, batch, written, planned[start : start + size]
            )
        except CommitConflictError as e:
            _discard(log, written)
            if versions:
                e.message += f"; earlier batches were committed as versions {versions}"
                e.args = (str(e),)
            raise
        except CommitOutcomeUnknownError:
            raise  # the commit may have landed and name these files: they stay
        except BaseException:
            _discard(log, written)
            raise
        versions.append(version)
        written_all += written
        warnings += batch_warnings
    metrics = _metrics(planned, written_all, [c for _, members in bins for c in members])
    return OptimizeResult(
        operation, snapshot.version, False, engine.name, versions, planned, metrics, warnings
    )


def _discard(log: DeltaLog, written: Sequence[WrittenFile | None]) -> None:
    """Delete the files of an abandoned batch; a failure here must not hide the real error."""
    with contextlib.suppress(Exception):  # best effort: vacuum removes orphans later
        log.storage.delete_many([w.location for w in written if w is not None])


def _commit_batch(
    log: DeltaLog,
    snapshot: Snapshot,
    request: OptimizeRequest,
    operation: str,
    batch: Sequence[tuple[RewriteBin, list[_Candidate]]],
    written: Sequence[WrittenFile | None],
    planned: list[PlannedBin],
) -> tuple[int, list[str]]:
    now = int(time.time() * 1000)
    actions: list[dict[str, Any]] = []
    members = [c for _, group in batch for c in group]
    for (b, group), out in zip(batch, written, strict=True):
        rows = arrow_values.array([c.index for c in group], pa.int64())
        adds = snapshot.files.take(rows).to_pylist()
        actions += [remove_for_add(add, now, data_change=False) for add in adds]
        if out is not None:
            actions.append(
                out.add_action(
                    b.partition_values,
                    data_change=False,
                    clustering_provider=_clustering_provider(request, adds),
                )
            )
    metrics = _metrics(planned, written, members)
    info = snapshot_commit_info(
        snapshot,
        operation,
        _parameters(request, operation),
        metrics,
        txn_id=str(uuid.uuid4()),
        now_ms=now,
        copies_rows=True,
    )
    commit_actions = [info, *actions]
    keys = [file_action_key(c.row["path"], c.row["deletionVector"]) for c in members]
    read_set = ReadSet.for_actions(
        snapshot.version, commit_actions, read_keys=keys, root=snapshot.root
    )
    try:
        result = LogWriter(log).try_commit(
            snapshot.version,
            row_tracked(snapshot, commit_actions),
            read_set,
            metadata=snapshot.metadata,
        )
    except CommitConflictError as e:
        raise CommitConflictError(
            f"{operation.lower()} did not commit: a concurrent commit changed its input files "
            f"({e.message})",
            hint="Nothing of this batch was committed and its new files were deleted; "
            "run the command again to rewrite the current files.",
        ) from e
    refresh = refresh_manifests_after_commit(
        log, result.version, result.actions, metadata=snapshot.metadata
    )
    warnings = [result.checkpoint_warning, refresh.warning if refresh else None]
    return result.version, [w for w in warnings if w]


def _clustering_provider(request: OptimizeRequest, adds: Sequence[dict[str, Any]]) -> str | None:
    """The `clusteringProvider` of a rewritten file: a 1:1 purge keeps its input's (the rows
    and their order are unchanged); bin-packing output is not clustered by anyone, so it
    claims no provider (PROTOCOL.md "Clustered Table")."""
    if request.purge and len(adds) == 1:
        provider = adds[0].get("clusteringProvider")
        return str(provider) if provider else None
    return None


def _parameters(request: OptimizeRequest, operation: str) -> dict[str, Any]:
    predicate = [request.where] if request.where else []
    if operation == "REORG":
        return {"predicate": predicate, "applyPurge": "true"}
    return {"predicate": predicate, "zOrderBy": []}


def _metrics(
    planned: Sequence[PlannedBin],
    written: Sequence[WrittenFile | None],
    removed: Sequence[_Candidate],
) -> dict[str, int]:
    """Delta's OPTIMIZE/REORG operationMetrics, plus rows dropped."""
    sizes = sorted(w.size for w in written if w is not None)
    n = len(sizes)
    # As Delta's FileSizeStatsWithHistogram: sizes at index n/4, n/2, 3n/4 (no interpolation).
    return {
        "numAddedFiles": n,
        "numRemovedFiles": len(removed),
        "numAddedBytes": sum(sizes),
        "numRemovedBytes": sum(c.row["size"] for c in removed),
        "minFileSize": sizes[0] if sizes else 0,
        "p25FileSize": sizes[n // 4] if sizes else 0,
        "p50FileSize": sizes[n // 2] if sizes else 0,
        "p75FileSize": sizes[n * 3 // 4] if sizes else 0,
        "maxFileSize": sizes[-1] if sizes else 0,
        "numDeletionVectorsRemoved": sum(1 for c in removed if c.drop is not None),
        "numDeletionVectorRowsRemoved": sum(c.deleted for c in removed),
        "numPlannedBins": len(planned),
    }
