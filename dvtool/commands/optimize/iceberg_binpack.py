"""Planning the compaction of an Iceberg table's data files, as Iceberg Java plans it.

Iceberg Spark's `rewrite_data_files` (bin-pack: `BinPackRewriteFilePlanner` over
`SizeBasedFileRewritePlanner`) with its default options is the reference:

- the target size is `write.target-file-size-bytes` (default 512 MiB; `--target-size`
  overrides it), files below 75% of it (`min-file-size-bytes`) or above 180%
  (`max-file-size-bytes`) are candidates, and so are files whose file-scoped deletes remove
  at least 30% of their rows (`delete-ratio-threshold`; `delete-file-threshold` is off by
  default);
- candidates are grouped per partition, in groups of at most 100 GB
  (`max-file-group-size-bytes`), and a group is rewritten when it has at least 5 files
  (`min-input-files`), more than one file and more bytes than the target, more bytes than
  the maximum, or a file with too many deletes;
- a group's bytes become `expected_output_files` files (Java's rounding: a remainder above
  the minimum size gets its own file, else it is spread when the files stay within 110% of
  the target), read in splits of the group's split size (`inputSplitSize`: the group's
  bytes over that count, plus 5 KiB, kept between the target and the write maximum): a file
  above the maximum is split over several new files.

How the rows go into those files. Spark (`SparkBinPackFileRewriteRunner`) reads a group in
splits of the split size (its files cut at their row groups, the pieces packed first fit)
and writes each split as one new file, rolling over to another whenever its writer's
estimate of the file's size (bytes written plus bytes buffered, checked every 1000 rows)
passes the write maximum (the target plus half the way to the maximum). dvtool does what the
splits do (`split_group`): the group's files, in order, into new files of at most the split
size of input bytes; a file no larger than the split size goes whole into the current new
file (or starts the next one), a larger one is cut by rows (each row weighing its file's
bytes over its rows, deleted rows included, as in Spark's split sizes), filling the current
new file first. So a group becomes `expected_output_files` new files, all but the last of
the split size, as Java plans it, whenever a new file's share of the group is more than 5
KiB times the number of the other new files (at a 512 MiB target: up to 100,000 files); with
a target of a few KB the 5 KiB overhead makes fewer, fuller files, as it makes Spark's
splits. Cut by rows rather than row groups, a file is split as planned whatever its row
groups; Spark reads a file of one row group in one split and only its rolling writer cuts
it, by its size estimate (which overshoots for small files: with a target of a few KB it
rolls every 1000 rows). dvtool does not roll by bytes written: the plan is fixed on the
driver (the dry run lists every new file with its rows and input bytes, and the Spark engine
writes each new file as its own task), and the new files hold about their input's bytes. The
new files a large file is cut over are one bin (committed together: a file is never half
rewritten); each keeps its rows' order.
In v3 every new file holds each row's `_row_id` (`first_row_id + position` of its source
file), so the `first_row_id`s the commit gives the new files, one range each, are inherited
only by rows whose source had none.

Where dvtool differs otherwise: a data file stays in its partition spec and partition (Java
moves files of older specs into the current spec).

The new files get the starting snapshot's sequence number (`use-starting-sequence-number`,
Java's default): the deletes the compaction applied (all older) no longer apply to them,
and equality deletes committed meanwhile (newer) still do.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dvtool.commands.optimize.iceberg_rewrites import (
    Input,
    Output,
    RewriteBin,
    RewritePlan,
    Slice,
    row_bytes,
    unused_deletes,
)
from dvtool.errors import UsageError
from dvtool.iceberg.delete_index import DeleteContent, partition_key
from dvtool.iceberg.live_files import DeletedBefore, LiveDataFile

if TYPE_CHECKING:
    from dvtool.iceberg.live_files import LiveFiles
    from dvtool.iceberg.tables import IcebergTable

TARGET_FILE_SIZE = "write.target-file-size-bytes"
DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024
MIN_FILE_SIZE_RATIO = 0.75
MAX_FILE_SIZE_RATIO = 1.80
MIN_INPUT_FILES = 5
DELETE_RATIO_THRESHOLD = 0.3
MAX_FILE_GROUP_SIZE = 100 * 1024 * 1024 * 1024
SPLIT_OVERHEAD = 5 * 1024


@dataclass(frozen=True)
class Sizes:
    """The size thresholds of a compaction (Java's `sizeThresholds`)."""

    target: int

    @property
    def minimum(self) -> int:
        return int(self.target * MIN_FILE_SIZE_RATIO)

    @property
    def maximum(self) -> int:
        return int(self.target * MAX_FILE_SIZE_RATIO)

    @property
    def write_maximum(self) -> int:
        """Java's `writeMaxFileSize`: halfway between the target and the maximum."""
        return int(self.target + (self.maximum - self.target) * 0.5)

    def expected_output_files(self, input_size: int) -> int:
        """Java's `expectedOutputFiles`: how many files a group of `input_size` bytes becomes."""
        if input_size < self.target:
            return 1
        with_remainder = math.ceil(input_size / self.target)
        without_remainder = input_size // self.target
        if input_size % self.target > self.minimum:
            return with_remainder
        if input_size // without_remainder < min(1.1 * self.target, self.write_maximum):
            return without_remainder
        return with_remainder

    def split_size(self, input_size: int) -> int:
        """Java's `inputSplitSize`: the bytes of input per output file."""
        estimated = input_size // self.expected_output_files(input_size) + SPLIT_OVERHEAD
        return self.target if estimated < self.target else min(estimated, self.write_maximum)


def target_size(properties: dict[str, str], requested: int | None) -> Sizes:
    """`requested`, else `write.target-file-size-bytes`, else 512 MiB."""
    if requested is not None:
        return Sizes(requested)
    value = properties.get(TARGET_FILE_SIZE)
    if value is None:
        return Sizes(DEFAULT_TARGET_FILE_SIZE)
    try:
        size = int(value.strip())
    except ValueError:
        size = 0
    if size <= 0:
        raise UsageError(
            f"the table property {TARGET_FILE_SIZE} is {value!r}, not a size in bytes",
            hint="Give the target size with --target-size, or fix the property.",
        )
    return Sizes(size)


def plan_compaction(
    table: IcebergTable,
    live: LiveFiles,
    sizes: Sizes,
    selected: Callable[[LiveDataFile], bool] | None = None,
    limit: int | None = None,
) -> RewritePlan:
    """The bins of a bin-pack compaction (module docstring) of the `selected` files (all by
    default), with the starting snapshot's sequence number; the first `limit` bins only
    (a `--batch-size` batch), whose files alone have their deletes read."""
    snapshot = table.metadata.current_snapshot()
    sequence = (snapshot.sequence_number or 0) if snapshot is not None else 0
    packed: list[tuple[list[LiveDataFile], tuple[Output, ...]]] = []
    for group in file_groups(live, sizes, selected):
        split = sizes.split_size(sum(f.entry.file_size_in_bytes for f in group))
        shapes = [(f.entry.file_size_in_bytes, int(f.entry.record_count)) for f in group]
        packed += _bins(group, split_group(shapes, split))
    if limit is not None:
        packed = packed[:limit]
    deleted = iter(DeletedBefore(table.io, live.index).load([f for b, _ in packed for f in b]))
    plan = RewritePlan()
    for members, outputs in packed:
        inputs = tuple(Input(f, next(deleted)) for f in members)
        plan.bins.append(RewriteBin(inputs, sequence, outputs))
    plan.removed_deletes = unused_deletes(live, plan.inputs, dangling=False)
    return plan


def split_group(files: Sequence[tuple[int, int]], split: int) -> list[Output]:
    """The new files of a group of files of (bytes, records), in order, each of about
    `split` input bytes (module docstring): a file of at most `split` bytes goes whole
    into the current new file, or starts the next one when it would overflow it; a larger
    file is cut by rows (its bytes pro rata of its rows), filling the current new file
    first. `Slice.index` is the file's index in `files`."""
    outputs: list[Output] = []
    current: list[Slice] = []
    used = 0
    for index, (size, records) in enumerate(files):
        if size <= split or records <= 1:
            if current and used + size > split:
                outputs.append(tuple(current))
                current, used = [], 0
            current.append(Slice(index, 0, records))
            used += size
            continue
        start = 0
        while start < records:
            stop = _rows_within(size, records, start, split - used)
            if stop == start and current:
                outputs.append(tuple(current))
                current, used = [], 0
                continue
            stop = max(stop, start + 1)  # a row heavier than the split: alone
            current.append(Slice(index, start, stop))
            used += row_bytes(size, records, start, stop)
            start = stop
    if current:
        outputs.append(tuple(current))
    return outputs


def _rows_within(size: int, records: int, start: int, room: int) -> int:
    """The furthest position `stop` (at most `records`) whose rows from `start` weigh at
    most `room` bytes (`row_bytes`)."""
    if room < 0:
        return start
    limit = room + start * size // records
    return max(start, min(records, ((limit + 1) * records - 1) // size))


def _bins(
    group: list[LiveDataFile], outputs: list[Output]
) -> list[tuple[list[LiveDataFile], tuple[Output, ...]]]:
    """The group's new files as bins: consecutive new files share a bin while a file's rows
    run on from one to the next (a bin is committed whole: never a file half rewritten);
    slices renumbered by the bin's inputs."""
    bins: list[tuple[list[LiveDataFile], tuple[Output, ...]]] = []
    pending: list[Output] = []
    for output in outputs:
        pending.append(output)
        last = output[-1]
        if last.stop >= int(group[last.index].entry.record_count):
            bins.append(_renumbered(group, pending))
            pending = []
    if pending:
        bins.append(_renumbered(group, pending))
    return bins


def _renumbered(
    group: list[LiveDataFile], outputs: list[Output]
) -> tuple[list[LiveDataFile], tuple[Output, ...]]:
    indexes = list(dict.fromkeys(s.index for output in outputs for s in output))
    local = {index: n for n, index in enumerate(indexes)}
    renumbered = tuple(
        tuple(Slice(local[s.index], s.start, s.stop) for s in output) for output in outputs
    )
    return [group[i] for i in indexes], renumbered


def file_groups(
    live: LiveFiles, sizes: Sizes, selected: Callable[[LiveDataFile], bool] | None = None
) -> list[list[LiveDataFile]]:
    """The groups of the `selected` data files (all by default) a compaction rewrites
    (candidates per partition, packed and filtered as Java does), from the manifests alone:
    no file is read. `dvtool maintain` plans its compaction step with it."""
    by_partition: dict[Any, list[LiveDataFile]] = {}
    for f in live.data:
        if (selected is None or selected(f)) and _candidate(f, live, sizes):
            key = partition_key(f.entry.spec_id, f.entry.partition)
            by_partition.setdefault(key, []).append(f)
    return [
        group
        for files in by_partition.values()
        for group in _pack(files, MAX_FILE_GROUP_SIZE)
        if _worth_rewriting(group, live, sizes)
    ]


def _candidate(f: LiveDataFile, live: LiveFiles, sizes: Sizes) -> bool:
    size = f.entry.file_size_in_bytes
    return size < sizes.minimum or size > sizes.maximum or _too_many_deleted(f, live)


def _too_many_deleted(f: LiveDataFile, live: LiveFiles) -> bool:
    """Java's `tooHighDeleteRatio`: the record counts of the file-scoped deletes (DVs,
    position delete files naming only this file) against the file's records."""
    records = f.entry.record_count
    if records <= 0:
        return False
    applied = live.index.for_data_file(f.entry).files()
    known = sum(
        d.record_count
        for d in applied
        if d.content is not DeleteContent.EQUALITY and d.target() == f.path
    )
    return min(known, records) / records >= DELETE_RATIO_THRESHOLD


def _worth_rewriting(group: list[LiveDataFile], live: LiveFiles, sizes: Sizes) -> bool:
    """Java's `filterFileGroups`: enough files, enough or too much content (a lone file
    above the maximum is split), a file with too many deletes."""
    size = sum(f.entry.file_size_in_bytes for f in group)
    return (
        len(group) >= MIN_INPUT_FILES
        or (len(group) > 1 and size > sizes.target)
        or size > sizes.maximum
        or any(_too_many_deleted(f, live) for f in group)
    )


def _pack(items: Iterable[Any], capacity: int, weight: Any = None) -> list[list[Any]]:
    """Java's `ListPacker` with a lookback of 1: items in order into a bin until the next
    one would overflow it (an item heavier than `capacity` gets a bin of its own)."""
    measure = weight or (lambda f: f.entry.file_size_in_bytes)
    bins: list[list[Any]] = []
    current: list[Any] = []
    used = 0
    for item in items:
        size = int(measure(item))
        if current and used + size > capacity:
            bins.append(current)
            current, used = [], 0
        current.append(item)
        used += size
    if current:
        bins.append(current)
    return bins
