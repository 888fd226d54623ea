"""Rewriting an Iceberg table's data files: MERGE (`--purge`) and compaction.

The two `dvtool optimize` operations that rewrite data files (Iceberg Spark's
`rewrite_data_files` is the reference), planned on the current snapshot and committed as one
`replace` snapshot (Java's `RewriteFiles`) through `dvtool.iceberg.transaction`:

- **MERGE** (`--purge`, the design text's "merge deletes"; Spark's `rewrite_data_files` with
  `delete-file-threshold=1`): every live data file that deletes apply to (its DV, position
  deletes, equality deletes), or with `--min-deleted-ratio R` only those whose deleted
  ratio is at least R, is rewritten 1:1 without its deleted rows, KEEPING its data sequence
  number (and, v3, its rows' `_row_id`/`_last_updated_sequence_number`). A file whose rows
  all go is removed without a replacement.
- **compaction** (plain `optimize`, `iceberg_binpack`): small files of a partition are
  bin-packed into files of about the target size, and files above the maximum size split
  into several, committed with the starting snapshot's sequence number (Java's
  `use-starting-sequence-number`, its default).

The new files are written by an engine (`write_rewrites`: arrow in this process, or Spark's
executors with `--engine spark`), each planned here and written from its plain plan
(`dvtool.iceberg.rewrite_job`); dvtool commits them here.
In both, the rows a rewritten file's deletes remove are left out, and the delete files that
apply to no remaining data file are removed in the same snapshot (`unused_deletes`): the
DVs and file-scoped position deletes of rewritten files, partition position deletes and
equality deletes all of whose data files were rewritten, and (MERGE) deletes that were
already dangling.

Validation of concurrent commits (`validate_rewrite`, Java's `BaseRewriteFiles.validate`
with a data sequence number set):

- a rewritten file removed meanwhile: its replacement would resurrect or duplicate rows;
- a position delete or DV added meanwhile for a rewritten file: the new file does not carry
  it, the delete would be lost;
- an equality delete added meanwhile is fine: it has a higher sequence number than the
  kept (MERGE) or starting (compaction) sequence number of the new files, so it applies to
  them as it applied to the files they replace (the design text's P1/P2 case);
- a delete file this plan removes that was removed meanwhile, or (when it removes equality
  deletes) a data file added meanwhile with a sequence number such deletes could apply to.

Each conflict makes the command plan again on the new head.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyroaring import BitMap64

from dvtool.errors import CommitConflictError
from dvtool.iceberg.data_file_rewrite import RewriteSource, new_data_location
from dvtool.iceberg.delete_index import DeleteContent, DeleteFileEntry
from dvtool.iceberg.deleted_rows import count_below
from dvtool.iceberg.live_files import Deleted, DeletedBefore, LiveDataFile
from dvtool.iceberg.rewrite_job import plan_rewrites, rewrite_job
from dvtool.iceberg.row_deletes import EntryKey
from dvtool.iceberg.snapshot_files import first_row_id
from dvtool.iceberg.snapshot_producer import AddedFile, SnapshotChanges

if TYPE_CHECKING:
    from dvtool.engines.base import Engine
    from dvtool.iceberg.concurrent_changes import ConcurrentChanges
    from dvtool.iceberg.live_files import LiveFiles
    from dvtool.iceberg.tables import IcebergTable
    from dvtool.iceberg.transaction import Written


@dataclass(frozen=True)
class Input:
    """A data file a rewrite reads, and the rows its deletes remove."""

    file: LiveDataFile
    deleted: Deleted

    @property
    def drop(self) -> BitMap64:
        """The positions left out of the new file."""
        return self.deleted.positional | self.deleted.by_equality

    @property
    def deleted_rows(self) -> int:
        return count_below(self.drop, self.file.entry.record_count)

    @property
    def records(self) -> int:
        return int(self.file.entry.record_count)

    def kept_between(self, start: int, stop: int) -> int:
        """The rows at positions `start` to `stop` (exclusive) the deletes keep."""
        drop = self.drop
        return stop - start - (count_below(drop, stop) - count_below(drop, start))

    def bytes_between(self, start: int, stop: int) -> int:
        """The file's bytes pro rata of the rows at positions `start` to `stop`."""
        return row_bytes(self.file.entry.file_size_in_bytes, self.records, start, stop)


@dataclass(frozen=True)
class Slice:
    """The rows at positions `start` to `stop` (exclusive) of a bin's input `index`: a new
    file's share of it."""

    index: int
    start: int
    stop: int


Output = tuple[Slice, ...]


@dataclass(frozen=True)
class RewriteBin:
    """The inputs of one or more new data files, all of one spec and partition;
    `sequence_number` the data sequence number every new file keeps (None: the commit's).

    `outputs` the new files, each its slices of the inputs in order (a compaction splits a
    large input over several); none: one new file of every input whole. No input of a bin
    has rows in another bin's files, so a bin is committed whole or not at all."""

    inputs: tuple[Input, ...]
    sequence_number: int | None
    outputs: tuple[Output, ...] = ()

    @property
    def spec_id(self) -> int:
        return self.inputs[0].file.entry.spec_id

    @property
    def partition(self) -> Any:
        return self.inputs[0].file.record.partition

    @property
    def input_bytes(self) -> int:
        return sum(i.file.entry.file_size_in_bytes for i in self.inputs)

    @property
    def remaining_rows(self) -> int:
        return sum(i.records - i.deleted_rows for i in self.inputs)

    def new_files(self) -> tuple[Output, ...]:
        """The slices of each new file (`outputs`, or every input whole in one)."""
        whole = tuple(Slice(n, 0, i.records) for n, i in enumerate(self.inputs))
        return self.outputs or (whole,)

    def kept_rows(self, output: Output) -> int:
        """The rows a new file gets: its slices' rows, but those the deletes remove."""
        return sum(self.inputs[s.index].kept_between(s.start, s.stop) for s in output)

    def to_json(self) -> dict[str, Any]:
        return {
            "spec_id": self.spec_id,
            "partition": list(self.inputs[0].file.entry.partition),
            "files": [i.file.path for i in self.inputs],
            "input_bytes": self.input_bytes,
            "rows": self.remaining_rows,
            "deleted_rows": sum(i.deleted_rows for i in self.inputs),
            "data_sequence_number": self.sequence_number,
            "outputs": [self._output_json(output) for output in self.new_files()],
        }

    def _output_json(self, output: Output) -> dict[str, Any]:
        """A planned new file: its rows, the deleted rows left out, the input bytes of its
        slices (pro rata for a part of a file) and each slice's file and positions."""
        slices = [(self.inputs[s.index], s) for s in output]
        rows = sum(s.stop - s.start for _, s in slices)
        kept = self.kept_rows(output)
        return {
            "rows": kept,
            "deleted_rows": rows - kept,
            "input_bytes": sum(i.bytes_between(s.start, s.stop) for i, s in slices),
            "sources": [{"file": i.file.path, "start": s.start, "stop": s.stop} for i, s in slices],
        }


@dataclass
class RewritePlan:
    """What a MERGE or compaction rewrites, and the delete entries it removes."""

    bins: list[RewriteBin] = field(default_factory=list)
    removed_deletes: list[DeleteFileEntry] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.bins and not self.removed_deletes

    @property
    def inputs(self) -> list[Input]:
        return [i for b in self.bins for i in b.inputs]

    def removed(self) -> set[EntryKey]:
        """Every manifest entry the snapshot removes."""
        keys: set[EntryKey] = {(i.file.path, None) for i in self.inputs}
        return keys | {(d.path, d.content_offset) for d in self.removed_deletes}


# -- MERGE ----------------------------------------------------------------------------------


def plan_purge(
    table: IcebergTable,
    live: LiveFiles,
    min_deleted_ratio: float | None,
    selected: Callable[[LiveDataFile], bool] | None = None,
    limit: int | None = None,
) -> RewritePlan:
    """MERGE: one bin per data file with deletes (deleted ratio >= `min_deleted_ratio`,
    among the `selected` files), keeping the file's data sequence number. Which delete
    files go is judged over every live file, selected or not.

    `limit` (a `--batch-size` batch): the deletes are read `limit` files at a time, until
    the plan has `limit` bins, so that a run in batches reads each file's deletes about
    once, not once per batch."""
    with_deletes = [
        f
        for f in live.data
        if (selected is None or selected(f)) and live.index.for_data_file(f.entry).files()
    ]
    plan = RewritePlan()
    deleted = DeletedBefore(table.io, live.index)
    step = max(1, limit) if limit is not None else max(1, len(with_deletes))
    for start in range(0, len(with_deletes), step):
        chunk = with_deletes[start : start + step]
        for f, before in zip(chunk, deleted.load(chunk), strict=True):
            source = Input(f, before)
            if min_deleted_ratio is None or _ratio_reached(source, min_deleted_ratio):
                plan.bins.append(RewriteBin((source,), f.entry.data_sequence_number))
        if limit is not None and len(plan.bins) >= limit:
            break
    plan.removed_deletes = unused_deletes(live, plan.inputs, dangling=True)
    return plan


def _ratio_reached(source: Input, ratio: float) -> bool:
    if source.records <= 0:
        return True
    return source.deleted_rows / source.records >= ratio


# -- shared ---------------------------------------------------------------------------------


def first_bins(plan: RewritePlan, live: LiveFiles, count: int, *, dangling: bool) -> RewritePlan:
    """The plan's first `count` bins (a batch of `--batch-size`), with the delete files that
    then apply to no kept file (`dangling`: and those that apply to none at all)."""
    if len(plan.bins) <= count:
        return plan
    batch = RewritePlan(plan.bins[:count])
    batch.removed_deletes = unused_deletes(live, batch.inputs, dangling=dangling)
    return batch


def unused_deletes(live: LiveFiles, inputs: Sequence[Input], *, dangling: bool) -> list[Any]:
    """The delete files that apply to no data file the rewrite keeps: every data file they
    apply to is rewritten (the new files hold none of the rows they delete; with a kept
    sequence number an equality delete still "applies" to the new file, deleting nothing).
    `dangling`: also those that already applied to no live data file."""
    rewritten = {i.file.path for i in inputs}
    used: set[EntryKey] = set()
    touched: set[EntryKey] = set()
    for f in live.data:
        keys = {(d.path, d.content_offset) for d in live.index.for_data_file(f.entry).files()}
        (touched if f.path in rewritten else used).update(keys)
    return [
        d
        for d in live.deletes
        if (key := (d.path, d.content_offset)) not in used and (dangling or key in touched)
    ]


def write_rewrites(
    table: IcebergTable,
    plan: RewritePlan,
    written: Written,
    operation: str = "replace",
    engine: Engine | None = None,
) -> SnapshotChanges:
    """Write each bin's new data files (none where no row remains) on `engine` (default
    arrow); the snapshot's changes: every new file of a bin keeps its sequence number.

    Each new file's location is chosen and recorded in `written` here, before the engine
    writes (so a failure deletes them all); each file is planned here and written by
    the engine (`dvtool.iceberg.rewrite_job`: in this process, or on Spark's executors)."""
    from dvtool.engines.arrow import ArrowEngine

    metadata = table.metadata
    owners: list[RewriteBin] = []
    work = []
    for rewrite in plan.bins:
        for output in rewrite.new_files():
            if not rewrite.kept_rows(output):
                continue
            partition = rewrite.partition
            location = new_data_location(metadata, spec_id=rewrite.spec_id, partition=partition)
            sources = [_source(rewrite.inputs[s.index], metadata.format_version, s) for s in output]
            work.append((location, rewrite.spec_id, partition, sources))
            owners.append(rewrite)
    written.add(location for location, *_ in work)
    planner, planned = plan_rewrites(written.io, metadata, work)
    job = rewrite_job(planner, [p.plan for p in planned])
    outputs = (engine or ArrowEngine()).run_writes(job, [p.plan for p in planned])
    added = [
        AddedFile(planner.data_file(p, new), rewrite.sequence_number)
        for rewrite, p, new in zip(owners, planned, outputs, strict=True)
    ]
    return SnapshotChanges(operation, tuple(added), frozenset(plan.removed()))


def _source(source: Input, format_version: int, part: Slice) -> RewriteSource:
    entry = source.file.entry
    row_id = first_row_id(source.file.record) if format_version >= 3 else None
    return RewriteSource(
        source.file.record,
        source.drop,
        entry.data_sequence_number,
        row_id,
        start=part.start,
        stop=part.stop,
    )


def added_bytes(changes: SnapshotChanges) -> int:
    return sum(int(a.data_file.file_size_in_bytes) for a in changes.added)


# -- validation -----------------------------------------------------------------------------


def validate_rewrite(plan: RewritePlan, changes: ConcurrentChanges) -> None:
    """CommitConflictError when what landed meanwhile invalidates the plan (module docstring)."""
    inputs = {i.file.path for i in plan.inputs}
    if inputs & changes.removed_data_paths():
        raise CommitConflictError(
            "a data file this rewrite replaces was removed by a concurrent commit"
        )
    removed = {(d.path, d.content_offset) for d in plan.removed_deletes}
    if removed & {(d.path, d.content_offset) for d in changes.removed_deletes}:
        raise CommitConflictError("a delete file this rewrite removes was removed concurrently")
    if any(positions_may_apply(d, inputs) for d in changes.added_deletes):
        raise CommitConflictError(
            "a concurrent commit added deletes to a data file this rewrite replaces"
        )
    equality = [d for d in plan.removed_deletes if d.content is DeleteContent.EQUALITY]
    newest = max((d.data_sequence_number for d in equality), default=None)
    if newest is not None and any(d.data_sequence_number < newest for d in changes.added_data):
        raise CommitConflictError(
            "a concurrent commit added data files that equality deletes this rewrite "
            "removes could apply to"
        )


def row_bytes(size: int, records: int, start: int, stop: int) -> int:
    """The bytes of a file of `size` bytes and `records` rows pro rata of the rows at
    positions `start` to `stop` (exclusive): the whole file's rows give its size."""
    if records <= 0:
        return size
    return stop * size // records - start * size // records


def positions_may_apply(delete: DeleteFileEntry, paths: Iterable[str]) -> bool:
    """Whether a position delete file or DV may delete rows of one of `paths`."""
    if delete.content is DeleteContent.EQUALITY:
        return False
    target = delete.target()
    if target is not None:
        return target in set(paths)
    return any(delete.may_reference(p) for p in paths)
