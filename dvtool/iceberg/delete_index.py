"""Which delete files apply to which data file: the scope rules of Iceberg's spec, no IO.

spec.md "Scan Planning" decides, for a snapshot's live entries:

- a deletion vector (DV) applies to the data file its `referenced_data_file` names, when the
  data file's data sequence number is <= the DV's and the partitions (spec id and values)
  are equal;
- a position delete file applies when its `referenced_data_file`, if set, is the data file,
  the data sequence number is <= the delete file's, the partitions are equal, and no DV
  applies to the data file (a DV replaces the older position deletes of its file);
- an equality delete file applies when the data sequence number is strictly lower than the
  delete file's and the partitions are equal, or the delete file's spec is unpartitioned
  (a global delete).

pyiceberg's `DeleteFileIndex` covers position deletes only (no DV precedence, no equality
deletes); this index covers all three in the same shape, so it could go upstream. A
position delete file without `referenced_data_file` may still name a single file through
equal lower and upper bounds of its `file_path` column, or exclude a data file through them:
like Iceberg Java, the index uses those bounds to skip delete files that cannot hold
deletes for a data file (they would delete nothing there).

Partition values compare as the spec's note 3 says: floating point values by their IEEE 754
bits with NaNs normalized.
"""

from __future__ import annotations

import enum
import math
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dvtool.errors import DeletionVectorError

PartitionKey = tuple[int, tuple[Any, ...]]


class DeleteContent(enum.Enum):
    """A delete file's kind: manifest `content` 1 (Parquet/ORC/Avro or Puffin) and 2."""

    POSITION = "position"
    DELETION_VECTOR = "deletion_vector"
    EQUALITY = "equality"


@dataclass(frozen=True)
class DataFileEntry:
    """A live data file of a snapshot, as its manifest entry describes it."""

    path: str
    spec_id: int
    partition: tuple[Any, ...]
    data_sequence_number: int
    record_count: int
    file_size_in_bytes: int = 0


@dataclass(frozen=True)
class DeleteFileEntry:
    """A live delete file (or DV) of a snapshot, as its manifest entry describes it.

    `path_bounds` are the lower and upper bounds of a position delete file's `file_path`
    column (field 2147483546), when the manifest has them.
    """

    path: str
    content: DeleteContent
    spec_id: int
    partition: tuple[Any, ...]
    data_sequence_number: int
    record_count: int
    file_size_in_bytes: int = 0
    referenced_data_file: str | None = None
    content_offset: int | None = None
    content_size_in_bytes: int | None = None
    equality_ids: tuple[int, ...] = ()
    path_bounds: tuple[str, str] | None = None

    def target(self) -> str | None:
        """The one data file this delete file can apply to, if it names one."""
        if self.referenced_data_file is not None:
            return self.referenced_data_file
        if self.path_bounds is not None and self.path_bounds[0] == self.path_bounds[1]:
            return self.path_bounds[0]
        return None

    def may_reference(self, data_path: str) -> bool:
        """False when the `file_path` bounds exclude `data_path`."""
        if self.path_bounds is None:
            return True
        lower, upper = self.path_bounds
        return lower <= data_path <= upper


@dataclass(frozen=True)
class AppliedDeletes:
    """The deletes that apply to one data file."""

    deletion_vector: DeleteFileEntry | None = None
    position: tuple[DeleteFileEntry, ...] = ()
    equality: tuple[DeleteFileEntry, ...] = ()

    def files(self) -> tuple[DeleteFileEntry, ...]:
        dv = (self.deletion_vector,) if self.deletion_vector is not None else ()
        return dv + self.position + self.equality


def _normalized(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return ("float-bits", 0x7FF8000000000000)
        return ("float-bits", struct.unpack("<q", struct.pack("<d", value))[0])
    return value


def partition_key(spec_id: int, partition: Sequence[Any]) -> PartitionKey:
    """The key two partitions are equal by: spec id and values, floats by their bits."""
    return spec_id, tuple(_normalized(v) for v in partition)


@dataclass
class _BySequence:
    """Delete files sorted by data sequence number, for `>=` and `>` lookups."""

    entries: list[DeleteFileEntry] = field(default_factory=list)
    _seqs: list[int] = field(default_factory=list)

    def freeze(self) -> None:
        self.entries.sort(key=lambda e: e.data_sequence_number)
        self._seqs = [e.data_sequence_number for e in self.entries]

    def at_or_after(self, seq: int) -> list[DeleteFileEntry]:
        return self.entries[bisect_left(self._seqs, seq) :]

    def after(self, seq: int) -> list[DeleteFileEntry]:
        return self.entries[bisect_right(self._seqs, seq) :]


class DeleteIndex:
    """The live delete files of a snapshot, indexed to answer `for_data_file`."""

    def __init__(self, deletes: Iterable[DeleteFileEntry], unpartitioned_specs: set[int]):
        self._dvs: dict[str, list[DeleteFileEntry]] = {}
        self._positions_by_path: dict[str, _BySequence] = {}
        self._positions_by_partition: dict[PartitionKey, _BySequence] = {}
        self._equality_by_partition: dict[PartitionKey, _BySequence] = {}
        self._global_equality = _BySequence()
        for entry in deletes:
            self._add(entry, unpartitioned_specs)
        for group in self._groups():
            group.freeze()

    def _add(self, entry: DeleteFileEntry, unpartitioned_specs: set[int]) -> None:
        key = partition_key(entry.spec_id, entry.partition)
        if entry.content is DeleteContent.DELETION_VECTOR:
            if entry.referenced_data_file is None:
                raise DeletionVectorError(
                    "a deletion vector's manifest entry has no referenced_data_file",
                    dv_file=entry.path,
                )
            self._dvs.setdefault(entry.referenced_data_file, []).append(entry)
        elif entry.content is DeleteContent.POSITION:
            target = entry.target()
            if target is not None:
                self._positions_by_path.setdefault(target, _BySequence()).entries.append(entry)
            else:
                self._positions_by_partition.setdefault(key, _BySequence()).entries.append(entry)
        elif entry.spec_id in unpartitioned_specs:
            self._global_equality.entries.append(entry)
        else:
            self._equality_by_partition.setdefault(key, _BySequence()).entries.append(entry)

    def _groups(self) -> list[_BySequence]:
        return [
            *self._positions_by_path.values(),
            *self._positions_by_partition.values(),
            *self._equality_by_partition.values(),
            self._global_equality,
        ]

    def for_data_file(self, data: DataFileEntry) -> AppliedDeletes:
        """The deletes that apply to `data` by the spec's scope rules."""
        key = partition_key(data.spec_id, data.partition)
        seq = data.data_sequence_number
        equality = tuple(self._global_equality.after(seq))
        if key in self._equality_by_partition:
            equality += tuple(self._equality_by_partition[key].after(seq))
        dv = self._deletion_vector(data, key)
        if dv is not None:
            return AppliedDeletes(deletion_vector=dv, equality=equality)
        position: list[DeleteFileEntry] = []
        if data.path in self._positions_by_path:
            position += [
                e
                for e in self._positions_by_path[data.path].at_or_after(seq)
                if partition_key(e.spec_id, e.partition) == key and e.may_reference(data.path)
            ]
        if key in self._positions_by_partition:
            position += [
                e
                for e in self._positions_by_partition[key].at_or_after(seq)
                if e.may_reference(data.path)
            ]
        return AppliedDeletes(position=tuple(position), equality=equality)

    def _deletion_vector(self, data: DataFileEntry, key: PartitionKey) -> DeleteFileEntry | None:
        """The DV of `data`; several applying DVs break the spec's one-DV rule (the newest
        wins here; `--verify` reports the table)."""
        applying = [
            e
            for e in self._dvs.get(data.path, ())
            if e.data_sequence_number >= data.data_sequence_number
            and partition_key(e.spec_id, e.partition) == key
        ]
        return max(applying, key=lambda e: e.data_sequence_number, default=None)

    def deletion_vectors_of(self, data_path: str) -> list[DeleteFileEntry]:
        """Every live DV naming `data_path` (more than one breaks the spec)."""
        return list(self._dvs.get(data_path, ()))


def dangling_deletes(
    deletes: Iterable[DeleteFileEntry], index: DeleteIndex, data_files: Iterable[DataFileEntry]
) -> list[DeleteFileEntry]:
    """Delete files that apply to no live data file (they delete nothing; compaction or
    `rewrite_position_delete_files` would drop them)."""
    used: set[tuple[str, int | None]] = set()
    for data in data_files:
        for entry in index.for_data_file(data).files():
            used.add((entry.path, entry.content_offset))
    return [e for e in deletes if (e.path, e.content_offset) not in used]
