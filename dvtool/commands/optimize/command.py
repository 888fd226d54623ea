"""`dvtool optimize`: rewrite files to apply their DVs (`--purge`) or to compact small files.

- `--purge` is Delta's `REORG TABLE ... APPLY (PURGE)`: every live file with a DV (or, with
  `--min-deleted-ratio R`, every file whose deleted ratio is at least R) is rewritten without
  its deleted rows, one new file per input.
- Without `--purge` it is Delta's `OPTIMIZE` bin-packing: per partition, files smaller than
  the target size, and files whose deleted ratio exceeds 5%, are packed into bins of about the
  target size and each bin is rewritten as one file. Files that store variant columns
  differently (shredded or not, other shredding schemas) never share a bin.

Planning (which files, which bins) is `dvtool.commands.optimize.plan`. Rewrites run on an
engine (in-process pyarrow or Spark); only this module commits. Adds and
removes carry `dataChange=false`: the rows of the table do not change. Large jobs commit in
batches of bins, each batch its own transaction (`dvtool.delta.log.transaction`). If a concurrent
commit removed or changed an input (a delete wrote a new DV on it), that batch is not
committed and the files it wrote are deleted, so rows deleted concurrently stay deleted.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from dvtool import faults
from dvtool.arrays import arrow_values
from dvtool.commands.optimize import plan
from dvtool.commands.optimize.plan import (
    Bins,
    Candidate,
    OptimizeRequest,
    PlannedBin,
)
from dvtool.commands.result import CommandResult
from dvtool.commands.table_damage import explain_damage
from dvtool.data_files import WrittenFile
from dvtool.delta.dvstore import DVStore
from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.log.transaction import Outcome, Prepared, Written, commit_transaction
from dvtool.delta.log.writer import row_tracked, snapshot_commit_info
from dvtool.delta.protocol.actions import file_action_key
from dvtool.delta.protocol.commit import remove_actions_for_adds
from dvtool.delta.protocol.conflicts import ReadSet
from dvtool.delta.protocol.features import require_writable
from dvtool.engines.base import Engine, RewriteBin, TableLayout
from dvtool.errors import CommitConflictError, UsageError

__all__ = [
    "OptimizeRequest",
    "OptimizeResult",
    "PlannedBin",
    "Progress",
    "run_optimize",
]

Progress = Callable[[int], Callable[[int], None]]
EngineFactory = Callable[[int], Engine]


@dataclass(frozen=True)
class OptimizeResult(CommandResult):
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
        """As `dataclasses.asdict` (same keys, same order), each bin converted once."""
        return {
            "operation": self.operation,
            "read_version": self.read_version,
            "dry_run": self.dry_run,
            "engine": self.engine,
            "versions": list(self.versions),
            "bins": [b.to_json() for b in self.bins],
            "metrics": dict(self.metrics),
            "checkpoint_warnings": list(self.checkpoint_warnings),
        }


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
    with explain_damage(log.storage.root):
        candidates = plan.candidates(log, snapshot, request, store)
        bins = plan.bins(log, snapshot, request, candidates)
        planned = [plan.planned_bin(b, members) for b, members in bins]
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
    if request.target_size is not None and request.purge:
        raise UsageError(
            "--target-size applies to compaction; --purge rewrites each file with a deletion "
            "vector as one file, as Delta's REORG ... APPLY (PURGE) does",
            hint="Drop --target-size to purge, or run optimize without --purge to compact.",
        )
    if request.target_size is not None and request.target_size <= 0:
        raise UsageError(f"--target-size must be positive, not {request.target_size}")
    if request.batch_size is not None and request.batch_size <= 0:
        raise UsageError(f"--batch-size must be positive, not {request.batch_size}")
    if request.purged and (request.purge or not request.dry_run):
        # Planning a file as purged without purging it would resurrect its deleted rows.
        raise UsageError("files planned as purged apply to a dry-run compaction only")


# -- execution -------------------------------------------------------------------------------


def _execute(
    log: DeltaLog,
    snapshot: Snapshot,
    request: OptimizeRequest,
    operation: str,
    engine: Engine,
    bins: Bins,
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
        try:
            outcome = _commit_batch(
                log,
                snapshot,
                request,
                operation,
                engine,
                layout,
                batch,
                planned[start : start + size],
                advance,
            )
        except CommitConflictError as e:
            if versions:
                e.message += f"; earlier batches were committed as versions {versions}"
                e.args = (str(e),)
            raise
        assert outcome.commit is not None
        versions.append(outcome.commit.version)
        written_all += outcome.value
        warnings += outcome.warnings
    metrics = _metrics(planned, written_all, [c for _, members in bins for c in members])
    return OptimizeResult(
        operation, snapshot.version, False, engine.name, versions, planned, metrics, warnings
    )


def _commit_batch(
    log: DeltaLog,
    snapshot: Snapshot,
    request: OptimizeRequest,
    operation: str,
    engine: Engine,
    layout: TableLayout,
    batch: Sequence[tuple[RewriteBin, list[Candidate]]],
    planned: list[PlannedBin],
    advance: Callable[[int], None] | None,
) -> Outcome[list[WrittenFile | None]]:
    """Rewrite one batch of bins and commit it, planned on `snapshot` (a conflict is final:
    the batch's new files are deleted and the command stops)."""

    def prepare(snapshot: Snapshot, written: Written) -> Prepared[list[WrittenFile | None]]:
        config = snapshot.metadata.configuration
        files = engine.rewrite(layout, config, [b for b, _ in batch], advance)
        written.add(w.location for w in files if w is not None)
        faults.reached("data-files-written")
        now = int(time.time() * 1000)
        members = [c for _, group in batch for c in group]
        actions = _file_actions(snapshot, request, batch, files, now)
        info = snapshot_commit_info(
            snapshot,
            operation,
            _parameters(request, operation),
            _metrics(planned, files, members),
            txn_id=str(uuid.uuid4()),
            now_ms=now,
            copies_rows=True,
        )
        commit_actions = [info, *actions]
        keys = [file_action_key(c.row["path"], c.row["deletionVector"]) for c in members]
        read_set = ReadSet.for_actions(
            snapshot.version, commit_actions, read_keys=keys, root=snapshot.root
        )
        return Prepared(files, row_tracked(snapshot, commit_actions), read_set)

    def reworded(e: CommitConflictError) -> CommitConflictError:
        return CommitConflictError(
            f"{operation.lower()} did not commit: a concurrent commit changed its input files "
            f"({e.message})",
            hint="Nothing of this batch was committed and its new files were deleted; "
            "run the command again to rewrite the current files.",
        )

    return commit_transaction(log, prepare, snapshot=snapshot, plans=1, on_conflict=reworded)


def _file_actions(
    snapshot: Snapshot,
    request: OptimizeRequest,
    batch: Sequence[tuple[RewriteBin, list[Candidate]]],
    written: Sequence[WrittenFile | None],
    now: int,
) -> list[dict[str, Any]]:
    """Per bin, the removes of its inputs, then the add of its new file (if it has rows).

    The inputs' add rows are taken from the snapshot's file table in one `take` and their
    removes built column-wise (`remove_actions_for_adds`), not one table row at a time.
    """
    members = [c.index for _, group in batch for c in group]
    adds = snapshot.files.take(arrow_values.array(members, pa.int64()))
    removes = remove_actions_for_adds(adds, now, data_change=False)
    providers = adds.column("clusteringProvider").to_pylist()
    actions: list[dict[str, Any]] = []
    start = 0
    for (b, group), out in zip(batch, written, strict=True):
        end = start + len(group)
        actions += removes[start:end]
        if out is not None:
            provider = _clustering_provider(request, providers[start:end])
            actions.append(
                out.add_action(b.partition_values, data_change=False, clustering_provider=provider)
            )
        start = end
    return actions


def _clustering_provider(request: OptimizeRequest, providers: Sequence[str | None]) -> str | None:
    """The `clusteringProvider` of a rewritten file, given its inputs': a 1:1 purge keeps its
    input's (the rows and their order are unchanged); bin-packing output is not clustered
    by anyone, so it claims no provider (PROTOCOL.md "Clustered Table")."""
    if request.purge and len(providers) == 1:
        provider = providers[0]
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
    removed: Sequence[Candidate],
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
