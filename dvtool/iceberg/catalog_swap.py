"""Commit to a table behind a pyiceberg catalog: the catalog's own atomic swap.

- **SQL catalog** (pyiceberg's `SqlCatalog`, Iceberg Java's `JdbcCatalog` tables): format
  v1/v2 through `SqlCatalog.commit_table`, which writes the new metadata file and moves the
  table's row with `UPDATE ... WHERE metadata_location = <old>`. pyiceberg cannot write v3
  metadata, so v3 takes the same swap here: the new metadata file
  (`{N+1:05d}-<uuid>.metadata.json`, `metadata_json`'s bytes) written through the table's
  FileIO, then the conditional row update on the catalog's own engine and ORM; no row
  updated is a concurrent commit. Our swap needs the base to be the current metadata.
- **REST catalog**: `commit_table(table, requirements, updates)` sends the requirements and
  updates; the server checks and applies them (v3 included). 409 is a conflict; 5xx,
  `CommitStateUnknownException` and lost answers are resolved by reading the table back.
- **Other catalogs** (Glue, Hive, DynamoDB, ...): `commit_table` for v1/v2; v3 is refused,
  since pyiceberg would have to write the metadata file.

Every commit sends `AssertTableUUID` with the caller's requirements (the table was not
dropped and recreated meanwhile). The swap is fault step `commit` (`dvtool.faults`); the
new metadata file, written before it, is step `iceberg-metadata-written`. A swap whose
answer is lost is resolved by reading the table back: our new metadata file current (v3 in
a SQL catalog), or the snapshot this commit added in the table (REST, pyiceberg's commits),
means it landed; anything else stays unknown, the commit's files kept. With
`write.metadata.delete-after-commit.enabled`, the old metadata files the new log dropped
are deleted after the commit (as pyiceberg's `Table` and Java do; a REST server does it
itself).
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dvtool import faults, interrupts
from dvtool.errors import (
    CommitOutcomeUnknownError,
    DvtoolError,
    StorageError,
    WriteRefusedError,
)
from dvtool.iceberg.commit_rules import (
    apply_updates,
    changes_nothing,
    check_requirements,
    conflict,
    dropped_metadata_files,
    refuse_lossy,
    still_in_doubt,
    stop_if_signalled,
)
from dvtool.iceberg.metadata_json import file_extension, metadata_bytes
from dvtool.iceberg.tables import IcebergTable, parse_metadata

_CATALOG_NAME = re.compile(
    r"^(\d+)-[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}"
    r"(?:\.gz)?\.metadata\.json(?:\.gz)?$"
)

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.update import TableRequirement, TableUpdate


def commit_catalog_table(
    table: IcebergTable,
    requirements: Sequence[TableRequirement],
    updates: Sequence[TableUpdate],
) -> IcebergTable:
    """Commit `updates` on `table` through its catalog (see the module docstring)."""
    from pyiceberg.table.update import AssertTableUUID

    requirements = (AssertTableUUID(uuid=table.metadata.table_uuid), *requirements)
    kind = catalog_kind(table.catalog)
    if kind == "rest":
        return _commit_rest(table, requirements, updates)
    if table.metadata.format_version >= 3:
        if kind != "sql":
            raise WriteRefusedError(
                f"{table.name} is a format version 3 table in a {type(table.catalog).__name__}"
                ": dvtool commits v3 metadata only through SQL and REST catalogs",
                hint="Use Iceberg Java (Spark) for this table, or a REST catalog in front of it.",
            )
        return _commit_sql_v3(table, requirements, updates)
    return _commit_through_pyiceberg(table, requirements, updates)


def catalog_kind(catalog: Any) -> str:
    """`sql` (pyiceberg's SqlCatalog and its in-memory subclass), `rest`, or `other`."""
    import sys

    rest = sys.modules.get("pyiceberg.catalog.rest")
    if rest is not None and isinstance(catalog, rest.RestCatalog):
        return "rest"
    sql = sys.modules.get("pyiceberg.catalog.sql")
    if sql is not None and isinstance(catalog, sql.SqlCatalog):
        return "sql"
    return "other"


def refresh_catalog_table(table: IcebergTable) -> IcebergTable:
    """The table as its catalog has it now."""
    loaded = _load(table)
    if loaded.metadata_location == table.metadata_location:
        return table
    return replace(
        table,
        metadata=loaded.metadata,
        metadata_location=loaded.metadata_location,
        io=loaded.io,  # a REST catalog may vend new credentials with the table
    )


def _load(table: IcebergTable) -> Table:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        loaded: Table = _catalog(table).load_table(table.name)
    except NoSuchTableError as e:
        raise conflict(str(table.name), f"the table is gone from its catalog: {e}") from None
    return loaded


def _catalog(table: IcebergTable) -> Any:
    if table.catalog is None:
        raise ValueError("a catalog table's IcebergTable must carry its catalog")
    return table.catalog


def catalog_version(location: str) -> int:
    """N of a catalog's `NNNNN-<uuid>.metadata.json` (gzip variants too); -1 for another
    name, whose next version is then 0 (as pyiceberg and Java count)."""
    match = _CATALOG_NAME.match(location.rpartition("/")[2])
    return int(match[1]) if match else -1


def _pyiceberg_table(table: IcebergTable) -> Table:
    """A pyiceberg `Table` of our base, to hand to `Catalog.commit_table`."""
    from pyiceberg.table import Table

    identifier = tuple(str(table.name).split("."))
    return Table(identifier, table.metadata, table.metadata_location, table.io, _catalog(table))


# -- through pyiceberg's commit_table (REST, v1/v2 elsewhere) ---------------------------------


def _commit_rest(
    table: IcebergTable, requirements: Sequence[TableRequirement], updates: Sequence[TableUpdate]
) -> IcebergTable:
    """The REST server applies the updates; its answer is the committed table (or, when
    the answer is lost, the table read back holding this commit's snapshot)."""
    try:
        response = _send(table, requirements, updates, _rest_outcome)
    except CommitOutcomeUnknownError as unknown:
        return _resolve_lost_answer(table, updates, unknown)
    return replace(table, metadata=response.metadata, metadata_location=response.metadata_location)


def _resolve_lost_answer(
    table: IcebergTable, updates: Sequence[TableUpdate], unknown: CommitOutcomeUnknownError
) -> IcebergTable:
    """The committed table when the catalog, read back, holds the snapshot this commit
    added (snapshot ids are random 63-bit numbers only this commit used): it landed after
    all. Otherwise `unknown` again: a missing snapshot does not prove the commit failed
    (the server may still be applying it), so its files stay."""
    from pyiceberg.table.update import AddSnapshotUpdate

    added = {u.snapshot.snapshot_id for u in updates if isinstance(u, AddSnapshotUpdate)}
    if not added:
        raise unknown
    try:
        current = refresh_catalog_table(table)
    except Exception:  # the catalog cannot answer: still unknown
        raise unknown from None
    if not added <= {s.snapshot_id for s in current.metadata.snapshots}:
        raise unknown
    return current


def _commit_through_pyiceberg(
    table: IcebergTable, requirements: Sequence[TableRequirement], updates: Sequence[TableUpdate]
) -> IcebergTable:
    """v1/v2 in a metastore catalog: pyiceberg writes the metadata and swaps."""
    raw = _read(table, table.metadata_location)
    refuse_lossy(raw, table.metadata, table.metadata_location)
    if changes_nothing(table.metadata, table.metadata_location, updates):
        return table
    try:
        response = _send(table, requirements, updates, _metastore_outcome)
    except CommitOutcomeUnknownError as unknown:
        return _resolve_lost_answer(table, updates, unknown)
    committed = replace(
        table, metadata=response.metadata, metadata_location=response.metadata_location
    )
    _delete_dropped(committed, dropped_metadata_files(table.metadata, committed.metadata))
    return committed


def _send(
    table: IcebergTable,
    requirements: Sequence[TableRequirement],
    updates: Sequence[TableUpdate],
    outcome: Callable[[IcebergTable, BaseException], DvtoolError | None],
) -> Any:
    """`catalog.commit_table`, signals deferred, its failures as dvtool's errors."""
    stop_if_signalled()
    target = _pyiceberg_table(table)
    with interrupts.deferred():
        try:
            return faults.storage_call(
                "commit",
                lambda: _catalog(table).commit_table(target, tuple(requirements), tuple(updates)),
            )
        except (Exception, KeyboardInterrupt) as error:
            mapped = outcome(table, error)
            if mapped is None:
                raise
            if isinstance(error, KeyboardInterrupt):
                interrupts.record(interrupts.signum_of(error))
            raise mapped from error


def _rest_outcome(table: IcebergTable, error: BaseException) -> DvtoolError | None:
    """A REST commit's failure: a conflict (409), a refusal the server explains, or an
    unknown outcome (5xx, a lost answer)."""
    from pyiceberg.exceptions import (
        CommitFailedException,
        CommitStateUnknownException,
        ServerError,
        ServiceUnavailableError,
    )

    what = str(table.name)
    if isinstance(error, CommitFailedException):
        return conflict(what, _first_line(error))
    if isinstance(error, faults.InjectedFault):
        return StorageError(f"the commit to {what} failed: {error}")
    if isinstance(
        error,
        (CommitStateUnknownException, ServerError, ServiceUnavailableError, KeyboardInterrupt),
    ):
        return still_in_doubt(what, _first_line(error))
    if isinstance(error, (OSError, faults.InjectedTimeout)) or _is_http_failure(error):
        if _never_sent(error):
            return StorageError(f"the REST catalog of {what} cannot be reached: {error}")
        return still_in_doubt(what, _first_line(error))
    return _catalog_refusal(what, error)


def _metastore_outcome(table: IcebergTable, error: BaseException) -> DvtoolError | None:
    """A metastore commit's failure: a conflict, else unknown (the swap may have run)."""
    from pyiceberg.exceptions import CommitFailedException

    what = str(table.name)
    if isinstance(error, CommitFailedException):
        return conflict(what, _first_line(error))
    if isinstance(error, (faults.InjectedFault,)):
        return StorageError(f"the commit to {what} failed: {error}")
    if isinstance(error, (ValueError, TypeError, AttributeError, AssertionError)):
        return None  # a bug: not a catalog failure
    return still_in_doubt(what, f"{type(error).__name__}: {_first_line(error)}")


def _catalog_refusal(what: str, error: BaseException) -> DvtoolError | None:
    from pyiceberg.exceptions import RESTError

    if isinstance(error, RESTError):
        return StorageError(f"the catalog refused the commit to {what}: {_first_line(error)}")
    return None


def _is_http_failure(error: BaseException) -> bool:
    return type(error).__module__.split(".")[0] in ("requests", "urllib3")


def _never_sent(error: BaseException) -> bool:
    """Whether a connection failure happened before the request was sent (refused,
    unresolvable, connect timeout): the commit then did not reach the server."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        name = type(current).__name__
        if name in ("NewConnectionError", "ConnectTimeout", "ConnectTimeoutError"):
            return True
        reason = getattr(current, "reason", None)
        if isinstance(reason, BaseException) and id(reason) not in seen:
            current = reason
            continue
        nested = [a for a in current.args if isinstance(a, BaseException)]
        current = nested[0] if nested else current.__cause__ or current.__context__
    return False


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


# -- SQL catalog, format v3: our metadata file, the catalog's conditional row update ---------


def _commit_sql_v3(
    table: IcebergTable, requirements: Sequence[TableRequirement], updates: Sequence[TableUpdate]
) -> IcebergTable:
    what = str(table.name)
    if _load(table).metadata_location != table.metadata_location:
        raise conflict(what, "another commit replaced the metadata this one is based on")
    raw = _read(table, table.metadata_location)
    refuse_lossy(raw, table.metadata, table.metadata_location)
    check_requirements(table.metadata, requirements, what)
    new = apply_updates(table.metadata, table.metadata_location, updates)
    if new is table.metadata:
        return table
    data = metadata_bytes(new)
    location = _new_metadata_location(table, new)
    _write_new(table, location, data)
    try:
        faults.reached("iceberg-metadata-written")
        swapped = _swap_row(table, location)
    except CommitOutcomeUnknownError:
        raise  # the catalog may name the file: it stays
    except (StorageError, KeyboardInterrupt):
        _delete_unused(table, location)
        raise
    if not swapped:
        _delete_unused(table, location)
        raise conflict(what, "another commit replaced the metadata this one is based on")
    committed = replace(table, metadata=parse_metadata(data, location), metadata_location=location)
    _delete_dropped(committed, dropped_metadata_files(table.metadata, new))
    return committed


def _new_metadata_location(table: IcebergTable, new: Any) -> str:
    """`{N+1:05d}-<uuid>.metadata.json` (`.gz.metadata.json` with gzip) in the table's
    metadata folder (`write.metadata.path` when set), as Java's catalogs name them."""
    from pyiceberg.table.locations import load_location_provider

    version = catalog_version(table.metadata_location) + 1
    name = f"{version:05d}-{uuid.uuid4()}{file_extension(new)}"
    provider = load_location_provider(new.location, new.properties)
    return str(provider.new_metadata_location(name))


def _write_new(table: IcebergTable, location: str, data: bytes) -> None:
    try:
        with table.io.new_output(location).create(overwrite=False) as stream:
            stream.write(data)
    except DvtoolError:
        raise
    except OSError as e:
        raise StorageError(f"cannot write {location}: {e}") from e


def _swap_row(table: IcebergTable, location: str) -> bool:
    """Point the catalog's row from the base metadata to `location` if it still names the
    base: True if we moved it, False if another commit had; signals deferred. A failure is
    resolved by reading the row back: StorageError (or the interrupt) when the row still
    names the base, CommitOutcomeUnknownError when the catalog cannot say."""
    stop_if_signalled()
    with interrupts.deferred():
        try:
            return faults.storage_call("commit", lambda: _update_row(table, location))
        except (Exception, KeyboardInterrupt) as error:
            if isinstance(error, (ValueError, TypeError, AttributeError)):
                raise
            current = _current_location(table, error)
            if current == location:
                if isinstance(error, KeyboardInterrupt):
                    interrupts.record(interrupts.signum_of(error))
                return True
            if isinstance(error, KeyboardInterrupt):
                raise
            if current == table.metadata_location:
                cause = f"{type(error).__name__}: {_first_line(error)}"
                raise StorageError(f"the commit to {table.name} failed: {cause}") from error
            return False


def _update_row(table: IcebergTable, location: str) -> bool:
    """`UPDATE iceberg_tables SET metadata_location = <new> WHERE ... = <base>` (or the
    row locked and checked where the database counts no rows, as pyiceberg does)."""
    from pyiceberg.catalog import Catalog
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import update
    from sqlalchemy.exc import NoResultFound
    from sqlalchemy.orm import Session

    catalog = _catalog(table)
    identifier = str(table.name)
    namespace = Catalog.namespace_to_string(Catalog.namespace_from(identifier))
    name = Catalog.table_name_from(identifier)
    match = (
        IcebergTables.catalog_name == catalog.name,
        IcebergTables.table_namespace == namespace,
        IcebergTables.table_name == name,
        IcebergTables.metadata_location == table.metadata_location,
    )
    values = {"metadata_location": location, "previous_metadata_location": table.metadata_location}
    with Session(catalog.engine) as session:
        if catalog.engine.dialect.supports_sane_rowcount:
            result: Any = session.execute(update(IcebergTables).where(*match).values(**values))
            if result.rowcount < 1:
                return False
        else:
            try:
                row = session.query(IcebergTables).with_for_update().filter(*match).one()
            except NoResultFound:
                return False
            row.metadata_location = location
            row.previous_metadata_location = table.metadata_location
        session.commit()
    return True


def _current_location(table: IcebergTable, error: BaseException) -> str:
    """The catalog's current metadata location, read back after a swap that failed;
    CommitOutcomeUnknownError when the catalog cannot answer."""
    try:
        return str(_load(table).metadata_location)
    except Exception as e:
        cause = f"{type(error).__name__}: {_first_line(error)}"
        raise still_in_doubt(str(table.name), f"{cause}; reading it back failed: {e}") from e


def _read(table: IcebergTable, location: str) -> bytes:
    try:
        with table.io.new_input(location).open(seekable=False) as stream:
            return bytes(stream.read())
    except DvtoolError:
        raise
    except OSError as e:
        raise StorageError(f"cannot read {location}: {e}") from e


def _delete_unused(table: IcebergTable, location: str) -> None:
    """Delete our new metadata file after a swap that provably did not land; best effort."""
    with contextlib.suppress(Exception):
        table.io.delete(location)


def _delete_dropped(table: IcebergTable, dropped: list[str]) -> None:
    """Delete old metadata files the commit dropped from the log; best effort."""
    for location in dropped:
        with contextlib.suppress(Exception):
            table.io.delete(location)
