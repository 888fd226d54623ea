"""Commit to a path (Hadoop) table: the next `metadata/vN.metadata.json`, put-if-absent.

A table without a catalog is a folder whose `metadata/` holds `v1.metadata.json`,
`v2.metadata.json`, ... and a `version-hint.text` naming the newest N, as Iceberg Java's
`HadoopTableOperations` writes them. Its commit is what Java's does, with dvtool's storage:

1. the base must be the table's current metadata (`vN`, found as readers find it: the hint,
   else the listing); a newer one is a concurrent commit (`CommitConflictError`), or, for a
   table opened by an older `*.metadata.json` (`pinned`), a refusal: that file is not the
   table any more;
2. the requirements are checked against the base and the updates applied
   (`commit_rules`), the new metadata serialized as Java does (`metadata_json`);
3. `v{N+1}.metadata.json` (`v{N+1}.gz.metadata.json` with gzip) is created with
   `Storage.put_if_absent`, the put-if-absent of Delta commits (local disk: link of a
   synced temp file; object stores: conditional PUT). Of racing writers exactly one creates
   it; "exists" is a concurrent commit: `CommitConflictError`. SIGINT/SIGTERM are deferred
   during the put (`dvtool.interrupts`); fault step `commit` (`dvtool.faults`);
4. after it landed, best effort: `version-hint.text` is rewritten (readers list the folder
   when it lags, as Java's do) and, with `write.metadata.delete-after-commit.enabled`, the
   old metadata files the new log dropped are deleted.

A put whose answer is lost is resolved by reading `v{N+1}` back: our bytes mean it landed,
another writer's mean a conflict; a missing file on local disk means it did not land, on an
object store it may still land (`CommitOutcomeUnknownError`). Tables whose metadata files
are not `vN` named (a catalog's `00001-<uuid>.metadata.json`, opened by path) cannot be
committed by path: only their catalog knows which file is current.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from dvtool import interrupts
from dvtool.errors import (
    CommitOutcomeUnknownError,
    FileMissingError,
    StorageError,
    WriteRefusedError,
)
from dvtool.iceberg.commit_rules import (
    apply_updates,
    check_requirements,
    conflict,
    dropped_metadata_files,
    refuse_lossy,
    still_in_doubt,
    stop_if_signalled,
)
from dvtool.iceberg.metadata_files import VERSION_HINT
from dvtool.iceberg.metadata_json import file_extension, metadata_bytes
from dvtool.iceberg.tables import IcebergTable, current_metadata_location, parse_metadata

if TYPE_CHECKING:
    from pyiceberg.table.update import TableRequirement, TableUpdate

    from dvtool.storage.table_storage import Storage

_HADOOP_NAME = re.compile(r"^v(\d+)(?:\.gz)?\.metadata\.json(?:\.gz)?$")
_VARIANTS = ("{n}.metadata.json", "{n}.gz.metadata.json", "{n}.metadata.json.gz")


def hadoop_version(location: str) -> int | None:
    """N of a `vN.metadata.json` location (gzip variants too); None for another name."""
    match = _HADOOP_NAME.match(location.rstrip("/").rpartition("/")[2])
    return int(match[1]) if match else None


def commit_path_table(
    table: IcebergTable,
    requirements: Sequence[TableRequirement],
    updates: Sequence[TableUpdate],
) -> IcebergTable:
    """Commit `updates` on `table` (a path table, its metadata the base); see the module
    docstring. Returns the committed table (`table` itself when nothing changes)."""
    storage = _storage_of(table)
    version = _base_version(table)
    _require_home(table, storage)
    _require_current(table, storage)
    raw = storage.read(table.metadata_location)
    refuse_lossy(raw, table.metadata, table.metadata_location)
    check_requirements(table.metadata, requirements, storage.root)
    new = apply_updates(table.metadata, table.metadata_location, updates)
    if new is table.metadata:
        return table
    folder = table.metadata_location.rpartition("/")[0]
    location = f"{folder}/v{version + 1}{file_extension(new)}"
    _require_free(storage, folder, version + 1)
    data = metadata_bytes(new)
    _put(storage, location, data)
    _after_landing(storage, folder, version + 1, dropped_metadata_files(table.metadata, new))
    committed = parse_metadata(data, location)
    return replace(table, metadata=committed, metadata_location=location, pinned=False)


def refresh_path_table(table: IcebergTable) -> IcebergTable:
    """The table's current state (a pinned table stays the file it was opened by)."""
    if table.pinned:
        return table
    storage = _storage_of(table)
    location = current_metadata_location(storage)
    if location == table.metadata_location:
        return table
    metadata = parse_metadata(storage.read(location), location)
    return replace(table, metadata=metadata, metadata_location=location)


def _storage_of(table: IcebergTable) -> Storage:
    if table.storage is None:
        raise ValueError("a path table's IcebergTable must carry its storage")
    return table.storage


def _base_version(table: IcebergTable) -> int:
    """N of the base `vN.metadata.json`; WriteRefusedError for a catalog's file name."""
    version = hadoop_version(table.metadata_location)
    if version is None:
        raise WriteRefusedError(
            f"{table.metadata_location} is not a path table's vN.metadata.json: a catalog "
            "wrote this table, and only the catalog can commit to it atomically",
            hint="Open the table through its catalog: --catalog NAME namespace.table.",
        )
    return version


def _require_home(table: IcebergTable, storage: Storage) -> None:
    """The metadata's `location` must be the folder the table was opened at: a byte copy of
    a table still names the original's folder, where new files would then be written."""
    if _place(table.location) != _place(storage.root):
        raise WriteRefusedError(
            f"the table at {storage.root} says it lives at {table.location} (a copy made "
            "without rewriting its paths?): its new files would go there",
            hint="Write the table at its own location, or copy it with Iceberg's "
            "rewrite_table_path procedure first.",
        )


def _place(location: str) -> str:
    """A location in one spelling: no trailing slash, `file:` URIs as paths, `s3a://` and
    `s3n://` as `s3://`."""
    location = location.rstrip("/")
    if location.startswith("file:"):
        location = "/" + location[len("file:") :].lstrip("/")
    for alias in ("s3a://", "s3n://"):
        if location.startswith(alias):
            location = "s3://" + location[len(alias) :]
    return location


def _require_current(table: IcebergTable, storage: Storage) -> None:
    """The base must be the current metadata: else a conflict, or for a pinned table (opened
    by an older metadata file) a refusal."""
    current = current_metadata_location(storage)
    if current == table.metadata_location:
        return
    if table.pinned:
        raise WriteRefusedError(
            f"{table.metadata_location} is not the table's current metadata ({current}): "
            "dvtool writes only the table's current version",
            hint=f"Give the table folder ({storage.root}) instead of an older metadata file.",
        )
    raise conflict(storage.root, f"{current} replaced {table.metadata_location}")


def _require_free(storage: Storage, folder: str, version: int) -> None:
    """No metadata file of `version` in any codec's name (a writer of the other codec)."""
    for variant in _VARIANTS:
        location = f"{folder}/" + variant.format(n=f"v{version}")
        if storage.exists(location):
            raise conflict(storage.root, f"{location} was committed by another writer")


def _put(storage: Storage, location: str, data: bytes) -> None:
    """Create `location` with `data` if absent, signals deferred; CommitConflictError when
    another writer created it, CommitOutcomeUnknownError when the outcome is unknown."""
    stop_if_signalled()
    with interrupts.deferred():
        try:
            created = storage.put_if_absent(location, data)
        except StorageError as error:
            created = _read_back(storage, location, data, error.message)
        except KeyboardInterrupt as stop:
            # Raised inside the put (where no signal can be deferred): ours if it landed.
            try:
                landed = _read_back(storage, location, data, "interrupted")
            except StorageError as unknown:
                if isinstance(unknown, CommitOutcomeUnknownError):
                    interrupts.record(interrupts.signum_of(stop))
                    raise
                raise stop from None  # provably not landed: the interrupt stops the command
            if not landed:
                raise
            interrupts.record(interrupts.signum_of(stop))
            return
    if not created:
        raise conflict(storage.root, f"{location} was committed by another writer")


def _read_back(storage: Storage, location: str, data: bytes, cause: str) -> bool:
    """After a put that failed without an answer: True if `location` holds our bytes, False
    if another writer's; StorageError when it provably did not land (missing, local disk),
    CommitOutcomeUnknownError otherwise."""
    try:
        found = storage.read(location)
    except FileMissingError:
        if storage.protocol == "file":
            raise StorageError(f"the commit of {location} failed: {cause}") from None
        raise still_in_doubt(location, f"{cause}; it is not there yet") from None
    except StorageError as e:
        raise still_in_doubt(location, f"{cause}; reading it back failed: {e.message}") from e
    return found == data


def _after_landing(storage: Storage, folder: str, version: int, dropped: list[str]) -> None:
    """The version hint and the dropped old metadata files, best effort: the commit stands
    whatever happens here (readers list the folder when the hint lags)."""
    with contextlib.suppress(StorageError):
        storage.write_atomic_replace(f"{folder}/{VERSION_HINT}", str(version).encode())
    if dropped:
        with contextlib.suppress(StorageError):
            storage.delete_many(dropped)
