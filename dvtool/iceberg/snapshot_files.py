"""A snapshot's live data and delete files, read with pyiceberg (manifest lists, manifests).

pyiceberg reads table metadata and Avro manifests well (with sequence-number inheritance);
this module turns its `ManifestEntry`s into the plain entries of `delete_index`
(`DataFileEntry`, `DeleteFileEntry`), so the scope rules stay pure and testable, and names
the unpartitioned specs (global equality deletes).

pyiceberg 0.12's `ManifestFile.fetch_manifest_entry` reads every manifest with the v2 entry
schema, which drops the v3 fields a deletion vector is found by (`referenced_data_file`,
`content_offset`, `content_size_in_bytes`), and the `referenced_data_file` Java writes in v2
manifests too. `manifest_entries` reads every manifest with the v3 schema instead (a
superset: fields a manifest lacks read as null; the same reader and inheritance otherwise;
a fix that belongs upstream), and `_v3_field` takes those fields from the record by
position.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from dvtool.iceberg.delete_index import DataFileEntry, DeleteContent, DeleteFileEntry

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot

# The reserved field id of a position delete file's `file_path` column (spec.md).
FILE_PATH_FIELD_ID = 2147483546


_V3_NAMES = (
    "first_row_id",
    "referenced_data_file",
    "content_offset",
    "content_size_in_bytes",
)


def _v3_positions() -> dict[str, int]:
    from pyiceberg.manifest import DATA_FILE_TYPE

    names = [f.name for f in DATA_FILE_TYPE[3].fields]
    return {name: names.index(name) for name in _V3_NAMES}


class _Positions(dict[str, int]):
    """The positions of the v3 fields in pyiceberg's data_file struct, looked up once."""

    def __missing__(self, key: str) -> int:
        self.update(_v3_positions())
        return self[key]


_V3_POSITION = _Positions()


def _v3_field(record: Any, name: str) -> Any:
    """A data_file field pyiceberg has no property for, by its position in the v3 struct."""
    position = _V3_POSITION[name]
    return record[position] if position < len(record) else None


def manifest_entries(
    manifest: Any, io: FileIO, format_version: int, *, deleted: bool = False
) -> list[Any]:
    """The live (not DELETED) entries of a manifest, read with the table version's schema;
    `deleted`: the DELETED entries too (what a snapshot removed)."""
    from pyiceberg.manifest import (
        MANIFEST_ENTRY_SCHEMAS,
        DataFile,
        DataFileContent,
        FileFormat,
        ManifestEntry,
        ManifestEntryStatus,
        _inherit_from_manifest,
    )

    # The v3 schema for every version: a superset whose fields a v2 manifest lacks read as
    # null, and which keeps the `referenced_data_file` Java writes in v2 manifests too.
    schema = MANIFEST_ENTRY_SCHEMAS[3]
    with cached_avro_file("manifest-entries")(
        io.new_input(manifest.manifest_path),
        schema,
        read_types={-1: ManifestEntry, 2: DataFile},
        read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
    ) as reader:
        entries = [_inherit_from_manifest(entry, manifest) for entry in reader]
    if format_version >= 3:
        from dvtool.iceberg.manifest_writers import manifest_first_row_id

        inherit_first_row_ids(entries, manifest_first_row_id(manifest))
    return [e for e in entries if deleted or e.status != ManifestEntryStatus.DELETED]


@functools.cache
def cached_avro_file(purpose: str) -> type[Any]:
    """pyiceberg's `AvroFile` with the reader tree cached by the file's Avro schema.

    pyiceberg parses a file's writer schema and resolves it against the read schema for
    every file (~3 ms each), though a table's manifests (and manifest lists) share a handful
    of writer schemas. The tree only decodes (it keeps no state between records or files),
    so files with the same schema text share one. One class per `purpose`, each used with
    one fixed read schema, types and enums, so the schema text is the whole key."""
    from pyiceberg.avro.decoder import new_decoder
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.avro.resolver import resolve_reader

    readers: dict[str, tuple[Any, Any]] = {}

    class CachedAvroFile(AvroFile[Any]):
        def __enter__(self) -> CachedAvroFile:
            with self.input_file.open() as f:
                self.decoder = new_decoder(f.read())
            self.header = self._read_header()
            key = self.header.meta.get("avro.schema", "")
            found = readers.get(key)
            if found is None:
                written = self.header.get_schema()
                read = self.read_schema or written
                reader = resolve_reader(written, read, self.read_types, self.read_enums)
                found = readers.setdefault(key, (written, reader))
            self.schema, self.reader = found
            return self

    CachedAvroFile.__qualname__ = f"CachedAvroFile[{purpose}]"
    return CachedAvroFile


def inherit_first_row_ids(entries: list[Any], first_row_id: int | None) -> None:
    """Set the `first_row_id` a v3 data file inherits (spec.md "First Row ID Inheritance"):
    the manifest's `first_row_id` plus the record counts of the earlier files in the
    manifest without one. A manifest without `first_row_id` (written before the table was
    v3) leaves them null: those rows have no row ids."""
    if first_row_id is None:
        return
    position = _V3_POSITION["first_row_id"]
    next_id = first_row_id
    for entry in entries:
        record = entry.data_file
        if int(record.content) != 0 or position >= len(record):
            continue
        if record[position] is None:
            record[position] = next_id
            next_id += record.record_count


def first_row_id(record: Any) -> int | None:
    """A v3 data file's (inherited) `first_row_id`, None when it has none."""
    value = _v3_field(record, "first_row_id")
    return None if value is None else int(value)


def _partition(record: Any) -> tuple[Any, ...]:
    partition = record.partition
    return tuple(partition[i] for i in range(len(partition))) if partition else ()


def _path_bounds(record: Any) -> tuple[str, str] | None:
    lower = (record.lower_bounds or {}).get(FILE_PATH_FIELD_ID)
    upper = (record.upper_bounds or {}).get(FILE_PATH_FIELD_ID)
    if lower is None or upper is None:
        return None
    try:
        return bytes(lower).decode("utf-8"), bytes(upper).decode("utf-8")
    except UnicodeDecodeError:
        return None


def _delete_content(record: Any) -> DeleteContent:
    if int(record.content) == 2:
        return DeleteContent.EQUALITY
    if str(record.file_format).upper().endswith("PUFFIN"):
        return DeleteContent.DELETION_VECTOR
    return DeleteContent.POSITION


def data_entry(entry: Any) -> DataFileEntry:
    record = entry.data_file
    return DataFileEntry(
        path=record.file_path,
        spec_id=record.spec_id or 0,
        partition=_partition(record),
        data_sequence_number=entry.sequence_number or 0,
        record_count=record.record_count,
        file_size_in_bytes=record.file_size_in_bytes,
    )


def delete_entry(entry: Any) -> DeleteFileEntry:
    record = entry.data_file
    content = _delete_content(record)
    return DeleteFileEntry(
        path=record.file_path,
        content=content,
        spec_id=record.spec_id or 0,
        partition=_partition(record),
        data_sequence_number=entry.sequence_number or 0,
        record_count=record.record_count,
        file_size_in_bytes=record.file_size_in_bytes,
        referenced_data_file=_v3_field(record, "referenced_data_file"),
        content_offset=_v3_field(record, "content_offset"),
        content_size_in_bytes=_v3_field(record, "content_size_in_bytes"),
        equality_ids=tuple(record.equality_ids or ()),
        path_bounds=_path_bounds(record),
    )


def live_files(
    metadata: TableMetadata, snapshot: Snapshot, io: FileIO
) -> tuple[list[DataFileEntry], list[DeleteFileEntry]]:
    """The snapshot's live (ADDED or EXISTING) data files and delete files."""
    data: list[DataFileEntry] = []
    deletes: list[DeleteFileEntry] = []
    for manifest in snapshot.manifests(io):
        for entry in manifest_entries(manifest, io, metadata.format_version):
            if int(entry.data_file.content) == 0:
                data.append(data_entry(entry))
            else:
                deletes.append(delete_entry(entry))
    return data, deletes


def unpartitioned_specs(metadata: TableMetadata) -> set[int]:
    """The ids of the table's partition specs without fields (global equality deletes)."""
    return {spec.spec_id for spec in metadata.partition_specs if not spec.fields}
