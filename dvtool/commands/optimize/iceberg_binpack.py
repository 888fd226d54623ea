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
  the target): a file above the maximum is split over several new files.

How the rows go into those files. Java plans each group's `expectedOutputFiles` and a split
size of the group's bytes over that count plus 5 KiB (`inputSplitSize`); Spark
(`SparkBinPackFileRewriteRunner`) then reads the group in splits of that size, the files
cut at their row groups and packed first fit, and writes each split as one file, rolling
over to another whenever the writer's estimate of its size (bytes written plus the bytes
it buffers, checked every 1000 rows) passes the write maximum (target + half the way to the
maximum). dvtool writes the planned count: the group's files, in order, cut into
`expected_output_files` new files of near-equal input bytes (`split_group`: a large file cut
by rows, each row weighing its file's bytes over its rows, deleted rows included as in
Spark's splits; a file no larger than a new file's share never cut). So the count and sizes
are Java's plan: Spark's splits match it when the row groups are small against the split
size, but what Spark finally writes depends on its row groups (a file of one row group is
one split, cut only by the rolling writer) and on its writer's size estimate, which for
small files overshoots (with a target of a few KB it rolls every 1000 rows); dvtool does
not roll by bytes: the plan is fixed on the driver (its dry run lists every new file, and
the Spark engine writes each new file as its own task). The new files a large file is cut
over are one bin (committed together: a file is never half rewritten); each keeps its rows'
order.
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

import bisect
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
        count = sizes.expected_output_files(sum(f.entry.file_size_in_bytes for f in group))
        shapes = [(f.entry.file_size_in_bytes, int(f.entry.record_count)) for f in group]
        packed += _bins(group, split_group(shapes, count))
    if limit is not None:
        packed = packed[:limit]
    deleted = iter(DeletedBefore(table.io, live.index).load([f for b, _ in packed for f in b]))
    plan = RewritePlan()
    for members, outputs in packed:
        inputs = tuple(Input(f, next(deleted)) for f in members)
        plan.bins.append(RewriteBin(inputs, sequence, outputs))
    plan.removed_deletes = unused_deletes(live, plan.inputs, dangling=False)
    return plan


def split_group(files: Sequence[tuple[int, int]], count: int) -> list[Output]:
    """A group of files of (bytes, records), in order, as `count` new files of near-equal
    input bytes (module docstring): the group's bytes cut at each `k * bytes / count`, in a
    file by rows (its bytes pro rata of its rows), but a file of at most a new file's share
    is never cut (the cut moves to its nearer end). `Slice.index` is the file's index in
    `files`; fewer files only when a file has fewer rows than cuts."""
    total = sum(size for size, _ in files)
    starts = [0]
    for size, _ in files:
        starts.append(starts[-1] + size)
    points: list[tuple[int, int]] = []
    for k in range(1, count):
        point = _cut(files, starts, k * total // count, total / count)
        if (not points or point > points[-1]) and (0, 0) < point < (len(files), 0):
            points.append(point)
    return _slices(files, [*points, (len(files), 0)])


def _cut(
    files: Sequence[tuple[int, int]], starts: list[int], offset: int, share: float
) -> tuple[int, int]:
    """Where the group's bytes are cut at `offset`: (file index, row position); a file's
    start is (index, 0)."""
    index = max(0, bisect.bisect_right(starts, offset) - 1)
    if index >= len(files):
        return (len(files), 0)
    size, records = files[index]
    within = offset - starts[index]
    if size <= share or records <= 1:
        return (index, 0) if 2 * within < size else (index + 1, 0)
    row = min(records, round(within * records / size))
    return (index, row) if row < records else (index + 1, 0)


def _slices(files: Sequence[tuple[int, int]], ends: list[tuple[int, int]]) -> list[Output]:
    """The new files between consecutive cut points (`ends`: each new file's end)."""
    outputs: list[Output] = []
    position = (0, 0)
    for end in ends:
        output = []
        for index in range(position[0], min(end[0] + 1, len(files))):
            records = files[index][1]
            start = position[1] if index == position[0] else 0
            stop = end[1] if index == end[0] else records
            if stop > start or (records == 0 and index < end[0]):
                output.append(Slice(index, start, stop))
        outputs.append(tuple(output))
        position = end
    return outputs


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
