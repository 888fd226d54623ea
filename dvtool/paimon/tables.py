"""A Paimon table opened by its folder: its snapshots and schemas, read through dvtool's
storage layer (local disk and object stores, the same `--storage-option` keys as Delta).

The folder holds `schema/schema-N` from the table's creation on and `snapshot/snapshot-N`
from its first commit (`dvtool.paimon.protocol`); `dvtool.table` recognizes one by a
`schema-N` file in `schema/` (a table without commits is still a table). Snapshots are
found by listing `snapshot/` once; each file is read when asked for (several at once for
the history and for time travel by time, `map_io`).

Branches (Paimon's `FileSystemBranchManager`): each folder `branch/branch-NAME/` is branch
NAME, with its own `schema/`, `snapshot/`, `tag/` and `changelog/` folders; its manifests,
index files and data files lie in the table's own folders beside main's (one `manifest/`,
one set of bucket folders). `switch_to_branch(NAME)` reads a branch: the same storage, the
branch's metadata folders (`branch_path`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from dvtool.errors import DvtoolError, LogError, TableNotFoundError, VersionNotFoundError
from dvtool.io_pool import map_io
from dvtool.paimon.protocol.schema import SCHEMA_PREFIX, TableSchema, schema_id_of
from dvtool.paimon.protocol.snapshots import (
    SNAPSHOT_DIR,
    Snapshot,
    select_snapshot_id,
    snapshot_ids,
    snapshot_name,
)
from dvtool.storage.table_storage import Storage

_T = TypeVar("_T")
SCHEMA_DIR = "schema"
MANIFEST_DIR = "manifest"
MAIN_BRANCH = "main"
BRANCH_DIR, BRANCH_PREFIX = "branch", "branch-"


class AvroReaderMissingError(DvtoolError):
    """pyiceberg, whose Avro reader dvtool reads Paimon's manifests with, is not installed."""

    kind = "usage"


def require_avro_reader() -> None:
    """UsageError-kind error naming the `paimon` extra when pyiceberg is missing."""
    try:
        import pyiceberg.avro  # noqa: F401
    except ImportError:
        raise AvroReaderMissingError(
            "reading Paimon tables needs pyiceberg (its Avro reader), which is not installed",
            hint="Install dvtool's paimon extra: pip install 'dvtool[paimon]'",
        ) from None


def open_paimon(storage: Storage) -> PaimonTable:
    """The Paimon table at `storage`'s root (detected by `dvtool.table`), after checking
    that its manifests can be read (`require_avro_reader`)."""
    require_avro_reader()
    return PaimonTable(storage)


@dataclass
class PaimonTable:
    """A Paimon table's folder, its snapshot ids (listed once) and the files read so far,
    on one branch (`main` unless switched)."""

    storage: Storage
    _ids: list[int] | None = None
    _snapshots: dict[int, Snapshot] = field(default_factory=dict)
    _schemas: dict[int, TableSchema] = field(default_factory=dict)
    branch: str = MAIN_BRANCH

    @property
    def location(self) -> str:
        return self.storage.root

    @property
    def name(self) -> str:
        """The folder's name (Paimon's catalogs name it after the table)."""
        return self.location.rstrip("/").rpartition("/")[2]

    def location_of(self, path: str) -> str:
        """Where a path a manifest holds lives: relative to the table, or absolute (an
        external path)."""
        if "://" in path:
            return path.removeprefix("file://") if path.startswith("file:///") else path
        if path.startswith("file:/"):
            return path.removeprefix("file:")
        if path.startswith("/"):
            return path
        return self.storage.join(path)

    def branch_path(self, folder: str) -> str:
        """Where this branch's metadata folder `folder` (`snapshot`, `schema`, `tag`,
        `changelog`), or a file in it (`snapshot/snapshot-3`), is: in the table folder for
        main, else under `branch/branch-NAME/`."""
        if self.branch == MAIN_BRANCH:
            return self.storage.join(folder)
        return self.storage.join(f"{BRANCH_DIR}/{BRANCH_PREFIX}{self.branch}/{folder}")

    def branches(self) -> list[str]:
        """The names of the table's branches besides main (`branch/branch-NAME` folders)."""
        names = self.storage.list_subdirs(self.storage.join(BRANCH_DIR))
        return [n.removeprefix(BRANCH_PREFIX) for n in names if n.startswith(BRANCH_PREFIX)]

    def switch_to_branch(self, branch: str) -> PaimonTable:
        """The same table read on `branch` (Paimon's `table$branch_NAME`)."""
        return self if branch == self.branch else PaimonTable(self.storage, branch=branch)

    def open_branch(self, branch: str) -> PaimonTable:
        """`switch_to_branch` for a branch a user named: VersionNotFoundError when the table
        has no such branch."""
        branches = self.branches()
        if branch != MAIN_BRANCH and branch not in branches:
            has = f"its branches: {', '.join(branches)}" if branches else "it has none but main"
            raise VersionNotFoundError(
                f"the Paimon table has no branch {branch!r} ({has})",
                hint="Branches are the branch/branch-NAME folders of the table.",
            )
        return self.switch_to_branch(branch)

    def snapshot_ids(self) -> list[int]:
        """The ids of the snapshots the table keeps, ascending."""
        if self._ids is None:
            listing = self.storage.list_dir(self.branch_path(SNAPSHOT_DIR))
            self._ids = snapshot_ids(i.name for i in listing)
        return self._ids

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """The snapshot with this id; LogError when its file is not one."""
        found = self._snapshots.get(snapshot_id)
        if found is None:
            path = self.branch_path(f"{SNAPSHOT_DIR}/{snapshot_name(snapshot_id)}")
            found = _parsed(path, lambda: Snapshot.from_json(self.storage.read(path)))
            self._snapshots[snapshot_id] = found
        return found

    def schema(self, schema_id: int) -> TableSchema:
        """The schema with this id; LogError when its file is not one."""
        found = self._schemas.get(schema_id)
        if found is None:
            path = self.branch_path(f"{SCHEMA_DIR}/{SCHEMA_PREFIX}{schema_id}")
            found = _parsed(path, lambda: TableSchema.from_json(self.storage.read(path)))
            self._schemas[schema_id] = found
        return found

    def latest_schema(self) -> TableSchema:
        """The newest schema (the one new writes use); TableNotFoundError without any."""
        folder = self.branch_path(SCHEMA_DIR)
        listing = self.storage.list_dir(folder)
        ids = [i for info in listing if (i := schema_id_of(info.name)) is not None]
        if not ids:
            raise TableNotFoundError(f"no Paimon schema file in {folder}")
        return self.schema(max(ids))

    def select(
        self, snapshot_id: int | None = None, timestamp_ms: int | None = None
    ) -> Snapshot | None:
        """The snapshot to read: the latest (None without commits), by id, or the newest
        committed at or before `timestamp_ms`."""
        ids = self.snapshot_ids()
        times = None
        if timestamp_ms is not None and snapshot_id is None:
            times = {s.id: s.time_millis for s in map_io(self.snapshot, ids)}
        chosen = select_snapshot_id(ids, times, snapshot_id, timestamp_ms)
        return None if chosen is None else self.snapshot(chosen)

    def history(self, limit: int | None = None) -> list[Snapshot]:
        """The newest `limit` snapshots (all when None), newest first."""
        ids = self.snapshot_ids()[::-1]
        return map_io(self.snapshot, ids if limit is None else ids[:limit])

    def manifest_path(self, name: str) -> str:
        return self.storage.join(f"{MANIFEST_DIR}/{name}")


def _parsed(path: str, parse: Callable[[], _T]) -> _T:
    """`parse()`, its LogError naming the file."""
    try:
        return parse()
    except LogError as e:
        raise LogError(f"{e.message}: {path}") from None
