"""Storage for `dvtool vacuum` on Iceberg tables: the table location's storage (and the
refusal of a byte-copied path table), the listing for orphan files, and deleting the
planned files through dvtool's storage (path tables) or the table's FileIO (catalog
tables), each checked again to be inside the table location first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from dvtool import interrupts
from dvtool.commands.vacuum.delete import FailedDelete, Progress, remove_checksum_sidecars
from dvtool.commands.vacuum.delete import delete_files as delete_from_storage
from dvtool.commands.vacuum.plan import TEMP_FILE_NAME, VacuumFile
from dvtool.errors import DvtoolError, WriteRefusedError
from dvtool.iceberg.orphan_files import (
    FileUri,
    ListedFile,
    hidden_filter,
    parse_location,
    under_location,
    unlisted_folders,
)
from dvtool.io_pool import map_io
from dvtool.storage.table_storage import Storage

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata

    from dvtool.commands.vacuum.iceberg import IcebergVacuumFile, IcebergVacuumResult
    from dvtool.iceberg.tables import IcebergTable


def relative_path(uri: FileUri, table: FileUri) -> str | None:
    """The path of `uri` under the table location, or None when it is not inside."""
    if uri.scheme is None and uri.authority is None:
        uri = FileUri(table.scheme, table.authority, uri.path)
    if not under_location(uri, table):
        return None
    relative = uri.path[len(table.path.rstrip("/")) + 1 :]
    parts = relative.split("/")
    return None if any(p in ("", ".", "..") for p in parts) else relative


def location_storage(table: IcebergTable, options: Mapping[str, str] | None) -> Storage:
    """dvtool's storage rooted at the table location (listing, deleting, the in-location
    check). For a path table, WriteRefusedError when the metadata's location is not the
    folder the table was opened at: a byte copy still names the original's files."""
    folder = table.storage
    if folder is not None and options is None:
        options = folder.options
    storage = Storage.for_table(table.location, dict(options or {}))
    if folder is not None:
        mine = parse_location(storage.root)
        if relative_path(parse_location(folder.root.rstrip("/") + "/x"), mine) != "x":
            raise WriteRefusedError(
                f"the table's metadata names its location {table.location}, not "
                f"{folder.root} where it was opened: vacuum would delete the files of the "
                f"table at {table.location}",
                hint="Vacuum the table at its own location; a copied table needs its "
                "metadata rewritten for its new place (Iceberg's rewrite_table_path).",
            )
    return storage


def list_table_files(
    storage: Storage, metadata: TableMetadata
) -> tuple[list[ListedFile], list[str]]:
    """The files under the table location (Java's listing, hidden names left out, but for
    dvtool's own temp files: a dvtool killed mid-write leaves one, and no other cleaner
    takes a hidden name), and the data or metadata folders not listed because they are
    outside it."""
    names = {f.name for spec in metadata.partition_specs for f in spec.fields}
    hidden = hidden_filter(names)

    def listed_file(relative_path: str) -> bool:
        *folders, name = relative_path.split("/")
        visible = not hidden(name) or TEMP_FILE_NAME.match(name) is not None
        return visible and not any(hidden(p) for p in folders)

    listed = [
        ListedFile(entry.location, entry.size, entry.modification_time_ms)
        for entry in storage.walk(storage.root, lambda d: not hidden(d.rpartition("/")[2]))
        if entry.kind == "file" and listed_file(entry.relative_path)
    ]
    return listed, unlisted_folders(storage.root, metadata.properties)


def delete_planned(
    table: IcebergTable, storage: Storage, result: IcebergVacuumResult, progress: Progress | None
) -> IcebergVacuumResult:
    """Delete the result's files: through `storage` for path tables, the table's FileIO
    for catalog tables; failures are reported, not retried."""
    if not result.files:
        return result
    with interrupts.interruptible():
        if table.catalog is None and table.storage is not None:
            plan = [VacuumFile(f.path, f.size or 0, f.reason) for f in result.files]
            deleted, failed = delete_from_storage(storage, plan, progress)
            remove_checksum_sidecars(storage, deleted)
            gone = {f.path for f in deleted}
        else:
            gone, failed = _delete_with_io(table, storage, result.files, progress)
    deleted_bytes = sum(f.size or 0 for f in result.files if f.path in gone)
    return replace(result, deleted_files=len(gone), deleted_bytes=deleted_bytes, failed=failed)


def _delete_with_io(
    table: IcebergTable,
    storage: Storage,
    files: Sequence[IcebergVacuumFile],
    progress: Progress | None,
) -> tuple[set[str], list[FailedDelete]]:
    """Delete through the table's FileIO (catalog tables), each file checked first."""
    advance = progress(len(files)) if progress else None

    def delete(f: IcebergVacuumFile) -> FailedDelete | None:
        try:
            if storage.real_relative_to_root(storage.join(f.path)) != f.path:
                return FailedDelete(f.path, "not deleted: it is not inside the table location")
            table.io.delete(f.location)
            return None
        except (OSError, DvtoolError) as e:
            return FailedDelete(f.path, str(e))
        finally:
            if advance is not None:
                advance(1)

    outcomes = map_io(delete, list(files))
    failed = [o for o in outcomes if o is not None]
    failed_paths = {f.path for f in failed}
    return {f.path for f in files if f.path not in failed_paths}, failed
