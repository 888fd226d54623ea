"""Planning of `dvtool optimize`: which live files to rewrite, and into which bins.

A purge wants every live file with a DV (with `--min-deleted-ratio`, those deleting at least
that share of their rows); compaction wants files below the target size and files whose
DV deletes more than 5% of their rows, packed per partition (and variant layout) into bins
of about the target size. `--where` (partition columns only) narrows either.

Tables of thousands of small files make the per-file cost of planning count: the wanted
files are found column-wise on the snapshot's file table, only those become Python rows,
their paths are checked against the table root in one call, and a file's location is
resolved once. Reading the DVs (one ranged read each) is the per-file work left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from dvtool.arrays import arrow_values
from dvtool.data_files import footer_column_types, footer_row_count
from dvtool.deletion_vectors.codec import bitmap_rows
from dvtool.delta.dvstore import DVStore
from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.log.table_root import require_inside_root
from dvtool.delta.protocol.deletion_vector import DeletionVectorDescriptor
from dvtool.delta.protocol.file_layout import variant_columns
from dvtool.delta.protocol.target_file_size import target_file_size
from dvtool.engines.base import RewriteBin, RewriteInput
from dvtool.errors import UsageError

if TYPE_CHECKING:  # imported only for --where: sqlglot and acero cost ~0.1 s at start-up
    from dvtool.predicate import Predicate

COMPACTION_DELETED_RATIO = 0.05
Bins = list[tuple[RewriteBin, list["Candidate"]]]


@dataclass(frozen=True)
class OptimizeRequest:
    """What `dvtool optimize` was asked to do."""

    purge: bool = False
    min_deleted_ratio: float | None = None
    target_size: int | None = None
    where: str | None = None
    dry_run: bool = False
    batch_size: int | None = None
    now: datetime | None = None
    """What current_date()/current_timestamp() mean in `where`; None: when planning."""
    purged: frozenset[str] = frozenset()
    """Dry-run compaction only: the paths a purge planned before it rewrites. They are
    planned as that purge leaves them, without their deleted rows and DV, so that the plan
    does not drop (nor count) the same rows twice (`dvtool maintain --dry-run`)."""


@dataclass(frozen=True)
class PlannedBin:
    """One output file of the plan: its inputs and what the rewrite drops."""

    directory: str
    inputs: list[str]
    input_bytes: int
    input_rows: int
    rows_dropped: int

    def to_json(self) -> dict[str, Any]:
        """As `dataclasses.asdict`, without its deep copy (thousands of bins per result)."""
        return {
            "directory": self.directory,
            "inputs": list(self.inputs),
            "input_bytes": self.input_bytes,
            "input_rows": self.input_rows,
            "rows_dropped": self.rows_dropped,
        }


@dataclass
class Candidate:
    """A file to rewrite: its index in the snapshot's file table, plan row, rows and DV."""

    index: int
    row: dict[str, Any]
    records: int
    drop: BitMap64 | None

    @property
    def deleted(self) -> int:
        return 0 if self.drop is None else len(self.drop)


def candidates(
    log: DeltaLog, snapshot: Snapshot, request: OptimizeRequest, store: DVStore
) -> list[Candidate]:
    """The live files to rewrite, with their deleted rows; in the snapshot's file order.

    The files the request could want (a DV for a purge; a DV or a small size for
    compaction) are found column-wise on the snapshot's file table first, and only those
    become Python rows: most files of a large table are never converted. All of them are
    checked to lie inside the table root in one call, before any DV is read.
    """
    where = _partition_filter(snapshot, request.where, request.now)
    target = _target_size(snapshot, request)
    indexes, rows = _prefiltered_rows(snapshot.files, request, target)
    wanted = [
        (index, row)
        for index, row in zip(indexes, rows, strict=True)
        if (where is None or not _excluded(where, dict(row["partitionValues"] or [])))
        and _wanted(request, row, row["deletionVector"], target)
    ]
    require_inside_root(
        log.storage, [row for _, row in wanted], "REORG" if request.purge else "OPTIMIZE"
    )
    out = []
    for index, row in wanted:
        candidate = _candidate(log, store, index, row)
        if row["path"] in request.purged:  # as the purge before leaves it: no deleted rows
            candidate = Candidate(index, row, candidate.records - candidate.deleted, None)
        if request.purge and not _purge_ratio_ok(request, candidate):
            continue
        if not request.purge and not _compaction_candidate(candidate, target):
            continue
        out.append(candidate)
    return out


_INT64_MAX = 2**63 - 1
_PLAN_COLUMNS = (
    "path",
    "partitionValues",
    "size",
    "numRecords",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
)


def _prefiltered_rows(
    files: pa.Table, request: OptimizeRequest, target: int
) -> tuple[list[int], list[dict[str, Any]]]:
    """The indexes and plan rows (`_PLAN_COLUMNS`) of the files `_wanted` may keep.

    Column-wise and conservative: it leaves out only files that `_wanted` refuses (no DV
    for a purge; no DV and a size of at least `target` for compaction).
    """
    has_dv = pc.is_valid(files.column("deletionVector"))
    if request.purge:
        mask = has_dv
    else:
        bound = arrow_values.scalar(min(target, _INT64_MAX), pa.int64())  # sizes are int64
        small = pc.less(files.column("size"), bound)
        mask = pc.or_(pc.fill_null(small, arrow_values.TRUE), has_dv)
    indexes = pc.indices_nonzero(mask)
    rows = files.select(list(_PLAN_COLUMNS)).take(indexes).to_pylist()
    return indexes.to_pylist(), rows


def _candidate(log: DeltaLog, store: DVStore, index: int, row: dict[str, Any]) -> Candidate:
    """The file at `index` with its row count (from the footer without stats) and DV."""
    records = row["numRecords"]
    if records is None:
        records = footer_row_count(log.storage, log.storage.resolve(row["path"]))
    drop = None
    dv = row["deletionVector"]
    if dv is not None:
        descriptor = DeletionVectorDescriptor.from_json(dv)
        drop = store.load(descriptor, data_file=row["path"], num_records=records)
    return Candidate(index, row, records, drop)


def _wanted(request: OptimizeRequest, row: dict[str, Any], dv: Any, target: int) -> bool:
    """Cheap pre-filter before any DV is read."""
    if request.purge:
        return dv is not None
    return bool(row["size"] < target or dv is not None)


def _purge_ratio_ok(request: OptimizeRequest, c: Candidate) -> bool:
    """Whether `c` deletes at least `--min-deleted-ratio` of its rows (if one is given)."""
    if request.min_deleted_ratio is None:
        return True
    ratio = c.deleted / c.records if c.records else 1.0
    return ratio >= request.min_deleted_ratio


def _compaction_candidate(c: Candidate, target: int) -> bool:
    """Whether compaction rewrites `c`: small, or more than 5% of its rows deleted."""
    ratio = c.deleted / c.records if c.records else 0.0
    return bool(c.row["size"] < target or ratio > COMPACTION_DELETED_RATIO)


def _excluded(where: Predicate, partitions: dict[str, Any]) -> bool:
    """Whether the partition values prove that no row of the file matches `where`."""
    from dvtool.predicate import Match

    return where.file_match(partitions, None) is Match.NONE


def _partition_filter(
    snapshot: Snapshot, where: str | None, now: datetime | None
) -> Predicate | None:
    """The `--where` predicate; UsageError unless it reads partition columns only."""
    if where is None:
        return None
    from dvtool.predicate import Predicate

    predicate = Predicate.parse(
        where,
        snapshot.schema,
        snapshot.metadata.partition_columns,
        snapshot.column_mapping_mode,
        now=now,
    )
    if not predicate.references_only_partitions:
        columns = ", ".join(snapshot.metadata.partition_columns) or "none (unpartitioned)"
        raise UsageError(
            "--where must only use partition columns for optimize",
            hint=f"Partition columns: {columns}.",
        )
    return predicate


def _target_size(snapshot: Snapshot, request: OptimizeRequest) -> int:
    """`--target-size`, else the table's target file size (`core.target_file_size`)."""
    if request.target_size is not None:
        return request.target_size
    return target_file_size(snapshot.metadata.configuration)


def bins(
    log: DeltaLog, snapshot: Snapshot, request: OptimizeRequest, candidates: list[Candidate]
) -> Bins:
    """The bins to rewrite: one per candidate for a purge; for compaction, candidates
    packed per partition (partition values, as Delta's OPTIMIZE groups them: not per
    directory, since Delta Spark puts the files of column-mapping tables under random
    prefix directories) and variant layout, smallest first, leaving out single files
    without a DV (rewriting one alone would change nothing)."""
    if request.purge:
        return [_bin(log, [c]) for c in candidates]
    target = _target_size(snapshot, request)
    variants = sorted(variant_columns(snapshot.schema, snapshot.column_mapping_mode))
    groups: dict[tuple[tuple[tuple[str, str | None], ...], tuple[str, ...]], list[Candidate]]
    groups = {}
    for c in candidates:
        layout = _variant_layout(log, c, variants)
        partition = tuple(sorted(dict(c.row["partitionValues"] or []).items()))
        groups.setdefault((partition, layout), []).append(c)
    out = []
    for members in groups.values():
        for group in _pack(sorted(members, key=lambda c: c.row["size"]), target):
            if len(group) > 1 or group[0].drop is not None:
                out.append(_bin(log, group))
    return out


def _variant_layout(log: DeltaLog, c: Candidate, variants: Sequence[str]) -> tuple[str, ...]:
    """How the file of `c` stores its variant columns (their parquet group types), read from
    its footer. A rewrite copies variant values as stored, never re-encoding them, so only
    files storing them alike (shredded the same way, or not at all) share a bin."""
    if not variants:
        return ()
    return footer_column_types(log.storage, log.storage.resolve(c.row["path"]), variants)


def _pack(members: list[Candidate], target: int) -> list[list[Candidate]]:
    """`members` in order, cut into groups of at most `target` bytes (or one file)."""
    groups: list[list[Candidate]] = []
    current: list[Candidate] = []
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


def _bin(log: DeltaLog, members: list[Candidate]) -> tuple[RewriteBin, list[Candidate]]:
    """The rewrite of `members` into one file, in the directory of the first."""
    locations = [log.storage.resolve(c.row["path"]) for c in members]
    inputs = tuple(
        RewriteInput(
            c.row["path"],
            location,
            None if c.drop is None else bitmap_rows(c.drop),
            c.row["baseRowId"],
            c.row["defaultRowCommitVersion"],
        )
        for c, location in zip(members, locations, strict=True)
    )
    first = members[0].row
    directory = _directory(log, locations[0])
    return RewriteBin(inputs, directory, dict(first["partitionValues"] or [])), members


def _directory(log: DeltaLog, location: str) -> str:
    """The directory of a data file at `location`, relative to the root ('' at the root)."""
    relative = log.storage.relative_to_root(location) or ""
    return relative.rsplit("/", 1)[0] if "/" in relative else ""


def planned_bin(b: RewriteBin, members: list[Candidate]) -> PlannedBin:
    """What `dvtool optimize` reports of one bin."""
    return PlannedBin(
        directory=b.directory,
        inputs=[c.row["path"] for c in members],
        input_bytes=sum(c.row["size"] for c in members),
        input_rows=sum(c.records for c in members),
        rows_dropped=sum(c.deleted for c in members),
    )
