"""A snapshot's live files as writers plan with them, and the rows their deletes remove.

`live_files` reads the current snapshot's manifests once: every live data file with its
manifest record (partition, spec id, column metrics: what a writer needs to add delete files
for it or rewrite it) and the index of its delete files (`DeleteIndex`: the spec's scope
rules). `DeletedBefore` reads, for the data files a command works on, the rows deleted
before it: by the file's DV or its position delete files (positions), and by its equality
deletes (key columns read only for these files).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyroaring import BitMap64

from dvtool.iceberg.delete_index import AppliedDeletes, DataFileEntry, DeleteFileEntry, DeleteIndex
from dvtool.iceberg.manifest_writers import read_manifest_list
from dvtool.iceberg.snapshot_files import (
    data_entry,
    delete_entry,
    manifest_entries,
    unpartitioned_specs,
)

if TYPE_CHECKING:
    from pyiceberg.io import FileIO

    from dvtool.iceberg.tables import IcebergTable


@dataclass(frozen=True)
class LiveDataFile:
    """A live data file: its entry (scope rules) and manifest record (partition, metrics)."""

    entry: DataFileEntry
    record: Any

    @property
    def path(self) -> str:
        return self.entry.path


@dataclass
class LiveFiles:
    """A snapshot's live data files and its delete files, indexed."""

    data: list[LiveDataFile]
    deletes: list[DeleteFileEntry]
    index: DeleteIndex


def live_files(table: IcebergTable) -> LiveFiles:
    """The current snapshot's live data files (with their records) and delete files."""
    metadata = table.metadata
    snapshot = metadata.current_snapshot()
    data: list[LiveDataFile] = []
    deletes: list[DeleteFileEntry] = []
    if snapshot is not None:
        # With the table version's schema: v3 manifests' `first_row_id` (pyiceberg drops it).
        manifests = read_manifest_list(table.io, snapshot.manifest_list, metadata.format_version)
        for manifest in manifests:
            for entry in manifest_entries(manifest, table.io, metadata.format_version):
                if int(entry.data_file.content) == 0:
                    data.append(LiveDataFile(data_entry(entry), entry.data_file))
                else:
                    deletes.append(delete_entry(entry))
    index = DeleteIndex(deletes, unpartitioned_specs(metadata))
    return LiveFiles(data, deletes, index)


@dataclass(frozen=True)
class Deleted:
    """The deletes that apply to a data file and the rows they remove: `positional` (its DV,
    or the positions of its position delete files, dangling ones included) and
    `by_equality` (rows its equality deletes match that are not in `positional`)."""

    applied: AppliedDeletes
    positional: BitMap64
    by_equality: BitMap64


@dataclass
class DeletedBefore:
    """Reads the rows deleted before a command, per data file."""

    io: FileIO
    index: DeleteIndex
    with_equality: bool = True

    def load(self, files: Sequence[LiveDataFile]) -> list[Deleted]:
        """Per file (in order), its applying deletes and the rows they remove."""
        from dvtool.iceberg.deleted_rows import dv_bitmap, position_bitmaps
        from dvtool.iceberg.equality_deletes import EqualityApplier

        applied = [(f.entry, self.index.for_data_file(f.entry)) for f in files]
        without_dv = [(d, a) for d, a in applied if a.deletion_vector is None]
        positions = position_bitmaps(without_dv, self.io)
        equality = EqualityApplier(self.io)
        out = []
        for data, deletes in applied:
            if deletes.deletion_vector is not None:
                positional = dv_bitmap(self.io, deletes.deletion_vector)
            else:
                positional = positions.get(data.path, BitMap64())
            by_equality = BitMap64()
            if deletes.equality and self.with_equality:
                matched = equality.deleted(data, deletes, BitMap64(positional))
                by_equality = matched - positional
            out.append(Deleted(deletes, positional, by_equality))
        return out


def all_rows(records: int) -> BitMap64:
    """Positions 0..records-1."""
    rows = BitMap64()
    if records > 0:
        rows.add_range(0, records)
    return rows
