"""Open an Iceberg table: by its folder, by a `*.metadata.json`, or through a catalog.

- A folder (the table location holding `metadata/`): the current metadata file is the one
  `metadata/version-hint.text` names, else the newest `*.metadata.json`
  (`metadata_files.current_metadata_name`).
- A `*.metadata.json` (or `.metadata.json.gz`): that file, the table as it was then.
- `--catalog NAME` with TABLE as `namespace.table`: pyiceberg's `load_catalog(NAME)`, which
  reads `~/.pyiceberg.yaml` and `PYICEBERG_CATALOG__NAME__*` variables (REST, SQL, Glue,
  Hive: whatever pyiceberg supports); the storage options become FileIO properties
  (`catalog_options`).

Tables opened by path read their files through dvtool's storage layer (`file_io`), tables
from a catalog through the catalog's FileIO. An `IcebergTable` keeps what its commits need
(`dvtool.iceberg.catalog_commit`): the pyiceberg catalog it came from (`catalog`), or for a
path table the `Storage` of its folder (`storage`), and whether it was opened by one
metadata file (`pinned`: that version of the table, which is written only while current).
pyiceberg is an optional dependency (the `iceberg` extra): it is imported here, only when an
Iceberg table is opened, and its absence is a two-line error naming the extra.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dvtool.errors import DvtoolError, StorageError, TableNotFoundError, UsageError
from dvtool.iceberg.metadata_files import METADATA_SUFFIX, VERSION_HINT, current_metadata_name

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table.metadata import TableMetadata

    from dvtool.storage.table_storage import Storage


METADATA_FOLDER = "metadata"


def is_metadata_file(location: str) -> bool:
    """Whether `location` names a table metadata file (`.metadata.json`, gzip too)."""
    return location.rstrip("/").endswith((METADATA_SUFFIX, METADATA_SUFFIX + ".gz"))


class PyicebergMissingError(DvtoolError):
    """pyiceberg, which dvtool reads Iceberg tables with, is not installed."""

    kind = "usage"


class IcebergMetadataError(DvtoolError):
    """A table metadata file that is not valid Iceberg table metadata."""

    kind = "integrity"
    fallback_hint = (
        "The table's metadata file is damaged: restore it from a backup, or open an older "
        "one (give its *.metadata.json path)."
    )


def require_pyiceberg() -> None:
    """UsageError-kind error naming the `iceberg` extra when pyiceberg is missing."""
    try:
        import pyiceberg  # noqa: F401
    except ImportError:
        raise PyicebergMissingError(
            "reading Iceberg tables needs pyiceberg, which is not installed",
            hint="Install dvtool's iceberg extra: pip install 'dvtool[iceberg]'",
        ) from None


@dataclass(frozen=True)
class IcebergTable:
    """An opened Iceberg table: its metadata and the FileIO its files are read with."""

    metadata: TableMetadata
    metadata_location: str
    io: FileIO
    name: str | None = None
    """`namespace.table` when opened through a catalog."""
    catalog: Any | None = None
    """The pyiceberg Catalog the table was loaded from (None for a path table)."""
    storage: Storage | None = None
    """Path tables: the `Storage` rooted at the table folder (the one holding `metadata/`)."""
    pinned: bool = False
    """Opened by a `*.metadata.json`: the table as of that file (`refresh` keeps it; a
    commit is refused unless it is the current one)."""

    @property
    def location(self) -> str:
        return str(self.metadata.location)


def open_iceberg(
    table: str, storage_options: dict[str, str] | None = None, catalog: str | None = None
) -> IcebergTable:
    """Open `table`: a path or URI (folder or metadata file), or with `catalog` an
    identifier `namespace.table`."""
    require_pyiceberg()
    if catalog is not None:
        return open_from_catalog(catalog, table, storage_options or {})
    from dvtool.storage.table_storage import Storage

    return open_at(Storage.for_table(table, storage_options))


def open_at(storage: Storage) -> IcebergTable:
    """The table at `storage`'s root: a metadata file, or a folder holding `metadata/`."""
    require_pyiceberg()
    from dvtool.iceberg.file_io import StorageFileIO

    if is_metadata_file(storage.root):
        location = storage.root
        folder = table_folder_storage(storage)
    else:
        location = current_metadata_location(storage)
        folder = storage
    metadata = parse_metadata(storage.read(location), location)
    pinned = folder is not storage
    return IcebergTable(metadata, location, StorageFileIO(folder), storage=folder, pinned=pinned)


def table_folder_storage(storage: Storage) -> Storage:
    """The `Storage` of the table folder of the metadata file at `storage`'s root: the
    folder holding its `metadata/` folder (or the file's own folder, named otherwise)."""
    from dvtool.storage.table_storage import Storage

    folder = storage.root.rstrip("/").rpartition("/")[0]
    parent, _, name = folder.rpartition("/")
    if name == METADATA_FOLDER and parent and not parent.endswith(":/"):
        folder = parent
    opened = Storage.for_table(
        folder, storage.options, unsafe_single_writer=storage.unsafe_single_writer
    )
    return opened


def current_metadata_location(storage: Storage) -> str:
    """The current `*.metadata.json` of the table folder at `storage`'s root."""
    folder = storage.join(METADATA_FOLDER)
    names = [info.name for info in storage.list_dir(folder)]
    hint = None
    if VERSION_HINT in names:
        try:
            hint = storage.read(f"{folder}/{VERSION_HINT}").decode("utf-8", "replace")
        except StorageError:
            hint = None  # unreadable: passed over for the listing, as Iceberg Java does
    return f"{folder}/{current_metadata_name(names, hint, folder)}"


def parse_metadata(data: bytes, location: str) -> TableMetadata:
    """Table metadata from a metadata file's bytes (gzip-compressed ones too)."""
    from pydantic import ValidationError
    from pyiceberg.exceptions import ValidationError as IcebergValidationError
    from pyiceberg.table.metadata import TableMetadataUtil

    try:
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        return TableMetadataUtil.parse_raw(data.decode("utf-8"))
    except (
        OSError,
        EOFError,
        UnicodeDecodeError,
        ValueError,
        ValidationError,
        IcebergValidationError,
    ) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise IcebergMetadataError(f"{location} is not Iceberg table metadata: {first}") from e


def open_from_catalog(catalog: str, identifier: str, options: dict[str, str]) -> IcebergTable:
    """The table `identifier` (`namespace.table`) of the pyiceberg catalog `catalog`."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    from dvtool.iceberg.catalog_options import catalog_properties

    if "." not in identifier.strip("."):
        raise UsageError(
            f"with --catalog, TABLE is namespace.table, not {identifier!r}",
            hint=f"E.g. dvtool inspect --catalog {catalog} db.events",
        )
    loaded = _load_catalog(catalog, catalog_properties(options))
    try:
        table = loaded.load_table(identifier)
    except (NoSuchTableError, NoSuchNamespaceError) as e:
        raise TableNotFoundError(
            f"no table {identifier} in catalog {catalog}: {e}",
            hint=f"List the catalog's tables with pyiceberg: pyiceberg --catalog {catalog} list",
        ) from None
    except _catalog_failures() as e:
        raise _catalog_error(catalog, e) from None
    return IcebergTable(
        table.metadata, str(table.metadata_location), table.io, identifier, catalog=loaded
    )


def _catalog_failures() -> tuple[type[BaseException], ...]:
    """What a catalog raises when it cannot be reached or refuses us: pyiceberg's REST
    errors, network and file errors (OSError, which requests' errors are), and the SQL
    catalog's database errors when SQLAlchemy is in use."""
    import sys

    from pyiceberg.exceptions import NotInstalledError, RESTError

    failures: list[type[BaseException]] = [RESTError, OSError, NotInstalledError]
    sqlalchemy = sys.modules.get("sqlalchemy.exc")
    if sqlalchemy is not None:
        failures.append(sqlalchemy.SQLAlchemyError)
    return tuple(failures)


def _catalog_error(catalog: str, error: BaseException) -> StorageError:
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return StorageError(
        f"Iceberg catalog {catalog!r} failed: {type(error).__name__}: {first}",
        hint="Check the catalog's URI, credentials and network (pyiceberg's configuration: "
        "~/.pyiceberg.yaml or PYICEBERG_CATALOG__NAME__*).",
    )


def _load_catalog(name: str, properties: dict[str, str]) -> Any:
    """pyiceberg's catalog `name` with the extra FileIO properties; UsageError when it is
    not configured."""
    from pyiceberg.catalog import load_catalog

    try:
        return load_catalog(name, **properties)
    except _catalog_failures() as e:
        raise _catalog_error(name, e) from None
    except (ValueError, KeyError, NotImplementedError) as e:
        raise UsageError(
            f"cannot load Iceberg catalog {name!r}: {e}",
            hint=f"Configure it as pyiceberg does: ~/.pyiceberg.yaml (catalog: {name}: ...) "
            f"or PYICEBERG_CATALOG__{name.upper()}__URI and related variables.",
        ) from None
