"""A Paimon snapshot's live files, read from its manifest lists, manifests and index
manifest (Avro, `dvtool.paimon.avro_files`), joined by `dvtool.paimon.protocol.table_files`.

The base and the delta manifest list together name the manifests of the table's files;
they are read in parallel (`map_io`) and merged in order. The index manifest names the
live table-index files (deletion files and hash indexes) with each DV's range and
cardinality. Nothing else is read: no data file, no deletion file.

`read_snapshot_files(..., strict=True)` (inspect) raises a LogError naming the first file
it cannot decode (a missing one is the storage layer's FileMissingError); with
`strict=False` (`--verify`) an unreadable file is recorded in `unreadable` and the rest is
still read, so verify reports every damaged metadata file and checks what it could read.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from dvtool.errors import DvtoolError, LogError, exception_text
from dvtool.io_pool import map_io
from dvtool.paimon.avro_files import decode_avro
from dvtool.paimon.protocol.manifests import (
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    index_manifest_entry,
    manifest_entry,
    manifest_file_meta,
    merge_entries,
)
from dvtool.paimon.protocol.schema import TableSchema
from dvtool.paimon.protocol.snapshots import Snapshot
from dvtool.paimon.protocol.table_files import TableFiles, table_files
from dvtool.paimon.tables import PaimonTable

_T = TypeVar("_T")
DECODE_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    EOFError,
    KeyError,
    IndexError,
    TypeError,
    struct.error,
)
"""What decoding a damaged Avro file raises in pyiceberg's reader."""


@dataclass(frozen=True)
class Unreadable:
    """A metadata file that could not be read: its kind (`manifest-list`, `manifest`,
    `index-manifest`), location and why."""

    kind: str
    location: str
    reason: str


@dataclass
class SnapshotFiles:
    """What a snapshot's metadata says: its schema, manifests, live files, and what did not
    add up or could not be read."""

    snapshot: Snapshot
    schema: TableSchema
    manifests: list[ManifestFileMeta] = field(default_factory=list)
    files: TableFiles = field(default_factory=TableFiles)
    unmatched_deletes: list[ManifestEntry] = field(default_factory=list)
    duplicate_adds: list[ManifestEntry] = field(default_factory=list)
    unmatched_index_deletes: list[IndexManifestEntry] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)


def read_snapshot_files(
    table: PaimonTable, snapshot: Snapshot, *, strict: bool = True
) -> SnapshotFiles:
    """The live files of `snapshot`: see the module docstring for `strict`."""
    out = SnapshotFiles(snapshot, table.schema(snapshot.schema_id))
    reader = _Reader(table, strict, out.unreadable)
    for name in snapshot.manifest_lists():
        out.manifests += reader.records(name, "manifest-list", manifest_file_meta)
    per_manifest = map_io(
        lambda m: reader.records(m.file_name, "manifest", manifest_entry), out.manifests
    )
    merged = merge_entries(e for entries in per_manifest for e in entries)
    out.unmatched_deletes = list(merged.unmatched_deletes)
    out.duplicate_adds = list(merged.duplicate_adds)
    index_live: list[IndexManifestEntry] = []
    if snapshot.index_manifest:
        index = merge_entries(
            reader.records(snapshot.index_manifest, "index-manifest", index_manifest_entry)
        )
        index_live = list(index.live)
        out.unmatched_index_deletes = list(index.unmatched_deletes)
    out.files = table_files(out.schema, list(merged.live), index_live)
    return out


@dataclass
class _Reader:
    """Reads one metadata file into records, strictly or recording what it cannot read."""

    table: PaimonTable
    strict: bool
    unreadable: list[Unreadable]

    def records(self, name: str, kind: str, parse: Callable[[dict[str, object]], _T]) -> list[_T]:
        location = self.table.manifest_path(name)
        try:
            return [parse(r) for r in decode_avro(self.table.storage.read(location), location)]
        except DECODE_ERRORS as e:
            if self.strict:
                raise LogError(
                    f"cannot read the Paimon {kind.replace('-', ' ')} {location}: "
                    f"{exception_text(e)}"
                ) from None
            self.unreadable.append(Unreadable(kind, location, exception_text(e)))
        except DvtoolError as e:
            if self.strict:
                raise
            self.unreadable.append(Unreadable(kind, location, e.message))
        return []
