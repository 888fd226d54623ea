"""Recording row deletes in the form a table's format version requires.

- v2: position delete files, per `write.delete.granularity`: `file` (Iceberg Spark's
  default: one file per data file, `referenced_data_file` set, so readers load only the
  deletes of the files they read) or `partition` (one file per partition per commit);
- v3: deletion vectors, one Puffin file per commit, one DV per data file; a data file's
  DV must hold every position deleted by position (its old DV, its position delete files
  and the new rows), since the spec allows one DV per data file; the entries it replaces
  (`file_scoped`) are removed in the same snapshot.

Callers choose the positions (`delete` writes only new rows on v2; rewriting position
deletes writes all of a partition's live positions) and record every file written in
`written` before it exists, so the commit path can delete it if the commit provably did
not land.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyroaring import BitMap64

from dvtool.iceberg.delete_files import (
    DataFileDeletes,
    FileNamer,
    parquet_codec,
    write_deletion_vectors,
    write_position_deletes,
)
from dvtool.iceberg.delete_index import AppliedDeletes, DeleteContent
from dvtool.iceberg.snapshot_producer import AddedFile
from dvtool.io_pool import map_io

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table.metadata import TableMetadata

    from dvtool.iceberg.live_files import LiveDataFile
    from dvtool.iceberg.transaction import Written

EntryKey = tuple[str, "int | None"]
"""A manifest entry to remove: (file_path, content_offset); DV blobs share a Puffin path."""


def file_scoped(applied: AppliedDeletes, data_path: str) -> set[EntryKey]:
    """The delete entries that apply to `data_path` alone: its DV, and position delete files
    whose `referenced_data_file` (or `file_path` bounds) name only it."""
    found: set[EntryKey] = set()
    dv = applied.deletion_vector
    if dv is not None:
        found.add((dv.path, dv.content_offset))
    for entry in applied.position:
        if entry.content is DeleteContent.POSITION and entry.target() == data_path:
            found.add((entry.path, entry.content_offset))
    return found


def write_dvs(
    io: FileIO, namer: FileNamer, files: Sequence[tuple[LiveDataFile, BitMap64]], written: Written
) -> list[AddedFile]:
    """One Puffin file with a DV per data file (the positions given are the whole DV)."""
    wanted = [(f, rows) for f, rows in files if len(rows)]
    if not wanted:
        return []
    deletes = [
        DataFileDeletes(f.path, f.entry.spec_id, f.record.partition, rows) for f, rows in wanted
    ]
    location = namer.location(len(namer.used) + 1, "", "-deletes.puffin")
    namer.used.append(location)
    written.add([location])
    return [AddedFile(record) for record in write_deletion_vectors(io, location, deletes)]


GRANULARITY_PROPERTY = "write.delete.granularity"
GRANULARITIES = ("file", "partition")


def delete_granularity(properties: Mapping[str, str]) -> str:
    """The table's `write.delete.granularity`; `file` (what Iceberg Spark writes) when
    unset or unknown."""
    value = properties.get(GRANULARITY_PROPERTY, "file").strip().lower()
    return value if value in GRANULARITIES else "file"


def write_position_files(
    io: FileIO,
    namer: FileNamer,
    metadata: TableMetadata,
    files: Sequence[tuple[LiveDataFile, BitMap64]],
    written: Written,
    granularity: str | None = None,
) -> list[AddedFile]:
    """Position delete files holding the given positions: one per data file or one per
    partition (`granularity`, default the table's `write.delete.granularity`)."""
    per_file = (granularity or delete_granularity(metadata.properties)) == "file"
    groups: dict[tuple[Any, ...], list[tuple[LiveDataFile, BitMap64]]] = {}
    for f, rows in files:
        if len(rows):
            key = (f.entry.spec_id, f.entry.partition) + ((f.path,) if per_file else ())
            groups.setdefault(key, []).append((f, rows))
    codec = parquet_codec(metadata.properties)
    jobs = []
    for (spec_id, *_), members in sorted(groups.items(), key=repr):
        partition = members[0][0].record.partition
        location = namer.location(
            len(namer.used) + 1, partition_path(metadata, spec_id, partition), "-deletes.parquet"
        )
        namer.used.append(location)
        written.add([location])  # named before any is written: a failure deletes them all
        deletes = [DataFileDeletes(f.path, spec_id, partition, rows) for f, rows in members]
        jobs.append((location, deletes))

    def write(job: tuple[str, list[DataFileDeletes]]) -> AddedFile:
        return AddedFile(write_position_deletes(io, job[0], job[1], codec))

    return map_io(write, jobs)  # on the IO threads (one file per data file by default)


def partition_path(metadata: TableMetadata, spec_id: int, partition: Any) -> str:
    """The partition's folder, as Iceberg writers name it (`spec.partition_to_path`)."""
    spec = metadata.specs()[spec_id]
    if not spec.fields:
        return ""
    return str(spec.partition_to_path(partition, metadata.schema()))
