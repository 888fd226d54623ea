"""Which table format a location holds: Delta (`_delta_log/`), Iceberg (`metadata/`) or
Paimon (`schema/schema-N`).

Detection is cheap and imports nothing of Iceberg or Paimon (no pyiceberg, no pyarrow), so
that a Delta command starts as fast as before it could open other formats
(scripts/bench_startup.py, tests/test_import_budget.py): a location that names a
`*.metadata.json` is Iceberg without any IO; otherwise one stat of `_delta_log/` decides
for Delta, and only when it is absent is `metadata/` listed, then `schema/` (a Paimon
table has `schema/schema-0` from its creation on, `snapshot/` only from its first commit).
A location that is none of them is not found (exit 5): a directory holding neither, or
Delta's not-found error, which says why (a file, no such directory), with a hint naming
the formats.

`open_table` opens Delta and Iceberg tables, the formats every command handles; a Paimon
table there is a usage error naming what dvtool does with Paimon tables (`inspect` and
`vacuum`, which open it with `open_readable_table`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from dvtool.errors import TableNotFoundError, UsageError
from dvtool.storage.table_storage import Storage

if TYPE_CHECKING:
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.iceberg.tables import IcebergTable
    from dvtool.paimon.tables import PaimonTable

Format = Literal["delta", "iceberg", "paimon"]

DELTA_LOG = "_delta_log"
ICEBERG_METADATA = "metadata"
PAIMON_SCHEMA = "schema"
METADATA_SUFFIXES = (".metadata.json", ".metadata.json.gz")
NOT_FOUND_HINT = (
    "Check the table path: a Delta table's directory (holding _delta_log), an Iceberg "
    "table's (holding metadata/) or its *.metadata.json, a Paimon table's (holding "
    "schema/ and snapshot/), or give --catalog NAME."
)
PAIMON_COMMANDS_HINT = (
    "dvtool inspects Paimon tables (`dvtool inspect`) and deletes their orphan files "
    "(`dvtool vacuum`); compaction and snapshot expiry are Paimon's own procedures."
)


def is_metadata_file(location: str) -> bool:
    """Whether `location` names an Iceberg table metadata file."""
    return location.rstrip("/").endswith(METADATA_SUFFIXES)


def format_at(storage: Storage) -> Format:
    """The format of the table at `storage`'s root; TableNotFoundError when neither."""
    if is_metadata_file(storage.root):
        return "iceberg"
    found = format_of_dir(storage, "")
    if found is None:
        _raise_not_found(storage)
        raise AssertionError("unreachable")
    return found


def format_of_dir(storage: Storage, relative: str) -> Format | None:
    """The format of the table whose root is the directory at `relative` under `storage`'s
    root (`""`: the root itself), or None when it is no table's root. Delta wins when both
    are there: Delta's UniForm writes Iceberg metadata beside the log, and the log is the
    table."""

    def join(name: str) -> str:
        return storage.join(f"{relative}/{name}" if relative else name)

    if storage.is_dir(join(DELTA_LOG)):
        return "delta"
    listing = storage.list_dir(join(ICEBERG_METADATA))
    if any(is_metadata_file(info.name) for info in listing):
        return "iceberg"
    if any(_is_schema_file(info.name) for info in storage.list_dir(join(PAIMON_SCHEMA))):
        return "paimon"
    return None


def _is_schema_file(name: str) -> bool:
    """A Paimon schema file name, `schema-N` (as `dvtool.paimon.protocol.schema`, kept
    here so that detection imports nothing of Paimon)."""
    prefix, _, number = name.partition("-")
    return prefix == PAIMON_SCHEMA and number.isdigit()


def _raise_not_found(storage: Storage) -> None:
    """Not a table: for a directory, that it holds neither format's files; else Delta's own
    not-found error, which says why (a file, no such directory), with the hint naming both
    formats."""
    from dvtool.delta.log.reader import DeltaLog

    if storage.is_dir(storage.root):
        raise TableNotFoundError(
            f"no Delta, Iceberg or Paimon table at {storage.root}: it holds neither "
            f"{DELTA_LOG}/, nor {ICEBERG_METADATA}/ with a *.metadata.json, nor "
            f"{PAIMON_SCHEMA}/ with a schema-N file",
            hint=NOT_FOUND_HINT,
        )
    try:
        DeltaLog(storage).list_files()
    except TableNotFoundError as e:
        raise TableNotFoundError(e.message, hint=NOT_FOUND_HINT) from None
    # `_delta_log` appeared between the stat and the listing: still no table we can name.
    raise TableNotFoundError(
        f"no Delta, Iceberg or Paimon table at {storage.root}", hint=NOT_FOUND_HINT
    )


def detect_format(location: str, storage_options: dict[str, str] | None = None) -> Format:
    """The format of the table at `location` (a path or URI) with its storage options;
    TableNotFoundError when neither (`format_at` for a Storage already opened)."""
    return format_at(Storage.for_table(location, storage_options))


def open_table(
    location: str, storage_options: dict[str, str] | None = None, catalog: str | None = None
) -> DeltaLog | IcebergTable:
    """The table at `location` in its format: a Delta log, or an opened Iceberg table
    (with `catalog`, `location` is the catalog's `namespace.table`); a Paimon table is a
    UsageError (`open_readable_table` opens it)."""
    if catalog is not None:
        from dvtool.iceberg.tables import open_iceberg

        return open_iceberg(location, storage_options, catalog)
    storage = Storage.for_table(location, storage_options)
    found = format_at(storage)
    if found == "paimon":
        raise UsageError(
            f"{location} is a Paimon table, which this command does not handle",
            hint=PAIMON_COMMANDS_HINT,
        )
    return _open(storage, found)


def open_readable_table(
    location: str, storage_options: dict[str, str] | None = None, catalog: str | None = None
) -> DeltaLog | IcebergTable | PaimonTable:
    """The table at `location` in its format, a Paimon table too (what `inspect` reads)."""
    if catalog is not None:
        return open_table(location, storage_options, catalog)
    storage = Storage.for_table(location, storage_options)
    found = format_at(storage)
    if found == "paimon":
        from dvtool.paimon.tables import open_paimon

        return open_paimon(storage)
    return _open(storage, found)


def _open(storage: Storage, found: Format) -> DeltaLog | IcebergTable:
    if found == "iceberg":
        from dvtool.iceberg.tables import open_at

        return open_at(storage)
    from dvtool.delta.log.reader import DeltaLog

    return DeltaLog(storage)
