"""Planning the compaction of an Iceberg table's small data files, as Iceberg Java plans it.

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
  the target).

Where dvtool differs: a data file stays in its partition spec and partition (Java moves
files of older specs into the current spec); a file is never split, so files above the
maximum size are not candidates and a group's files are dealt whole into its output files
(consecutively, each output closed once it reaches the group's split size); a group whose
single output would be its single input without deletes is left alone.

The new files get the starting snapshot's sequence number (`use-starting-sequence-number`,
Java's default): the deletes the compaction applied (all older) no longer apply to them,
and equality deletes committed meanwhile (newer) still do.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dvtool.commands.optimize.iceberg_rewrites import Input, RewriteBin, RewritePlan, unused_deletes
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
    packed: list[list[LiveDataFile]] = []
    for group in file_groups(live, sizes, selected):
        split = sizes.split_size(sum(f.entry.file_size_in_bytes for f in group))
        packed += _pack(group, split)
    if limit is not None:
        packed = packed[:limit]
    deleted = iter(DeletedBefore(table.io, live.index).load([f for b in packed for f in b]))
    plan = RewritePlan()
    for members in packed:
        plan.bins.append(RewriteBin(tuple(Input(f, next(deleted)) for f in members), sequence))
    plan.removed_deletes = unused_deletes(live, plan.inputs, dangling=False)
    return plan


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
    if size > sizes.maximum:
        return False  # dvtool does not split files
    return size < sizes.minimum or _too_many_deleted(f, live)


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
    """Java's `filterFileGroups` (enough files, enough or too much content, a file with
    too many deletes), and never a lone file without deletes (nothing would change)."""
    size = sum(f.entry.file_size_in_bytes for f in group)
    has_deletes = any(live.index.for_data_file(f.entry).files() for f in group)
    if len(group) == 1 and not has_deletes:
        return False
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
