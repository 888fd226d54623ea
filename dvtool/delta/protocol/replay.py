"""Log replay: reconcile the actions of a log segment into one table state.

Replay goes from the newest commit to the oldest and keeps, for every logical file
`(path, deletionVector.uniqueId)`, only the newest reference: an `add` makes it live, a
`remove` makes it a tombstone. Given the table root, the path of the key is canonical
(`dvtool.delta.protocol.paths`), as in Delta Spark: an `add` of `file:/t/a%20b` and a `remove` of
`a b` in table `/t` name one file. The newest protocol and metaData win, txn per appId, and
domainMetadata per domain (removed domains are dropped). A checkpoint is already reconciled,
so its file actions only need filtering against the keys seen in later commits; that filter
runs on whole pyarrow columns, which keeps snapshots of millions of files fast.

The live files and tombstones of the result (`FileActions`) become canonical pyarrow tables
(`dvtool.delta.protocol.file_actions`) on first use. Until then the file actions of JSON commits
stay
the objects they were parsed into, so a small table read from JSON commits alone is summed up
without importing pyarrow at all (start-up is most of what `inspect` of such a table costs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from dvtool.delta.protocol.actions import DomainMetadata, Metadata, Protocol, Txn
from dvtool.delta.protocol.paths import CanonicalRoot
from dvtool.errors import LogError

if TYPE_CHECKING:
    import pyarrow as pa

KEY_SEPARATOR = "\x00"
T = TypeVar("T")


@dataclass
class ActionBatch:
    """The actions of one commit, log compaction file or checkpoint.

    `adds`/`removes` hold JSON objects (commits) or are empty while `add_table`/
    `remove_table` hold canonical pyarrow tables (checkpoints). `name` is the log file the
    batch came from, for error messages (empty when unknown).

    `protocol` and `metadata` are the actions as logged (JSON objects; or already parsed):
    a later commit may replace an incomplete one, so only the pair that wins the replay is
    checked (`Replayer.finish`), as Delta Spark checks only the snapshot's.
    """

    version: int
    protocol: Protocol | Mapping[str, Any] | None = None
    metadata: Metadata | Mapping[str, Any] | None = None
    txns: list[Txn] = field(default_factory=list)
    domains: list[DomainMetadata] = field(default_factory=list)
    adds: list[Mapping[str, Any]] = field(default_factory=list)
    removes: list[Mapping[str, Any]] = field(default_factory=list)
    commit_info: Mapping[str, Any] | None = None
    sidecars: list[Mapping[str, Any]] = field(default_factory=list)
    add_table: pa.Table | None = None
    remove_table: pa.Table | None = None
    name: str = ""

    @property
    def source(self) -> str:
        """The batch's log file for messages: its name, else its version."""
        return f"log file {self.name}" if self.name else f"version {self.version}"


@dataclass
class FileActions:
    """The live adds (or the tombstones) of a table state, as replay left them.

    `actions` are the JSON objects of commits (newest first), `sources` the (log file,
    first, end) slice each log file contributed, for messages; `tables` the already filtered
    canonical tables of checkpoint parts. `table` joins them in the canonical layout.
    """

    kind: str  # "add" or "remove"
    actions: list[Mapping[str, Any]] = field(default_factory=list)
    sources: list[tuple[str, int, int]] = field(default_factory=list)
    tables: list[pa.Table] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.actions) + sum(int(t.num_rows) for t in self.tables)

    @property
    def json_only(self) -> bool:
        """Whether every action is one of `actions` (no checkpoint table contributed)."""
        return not any(t.num_rows for t in self.tables)

    @cached_property
    def table(self) -> pa.Table:
        """All actions as one canonical table; LogError naming the log file of a bad field."""
        from dvtool.delta.protocol import file_actions as fa

        schema = fa.ADD_SCHEMA if self.kind == "add" else fa.REMOVE_SCHEMA
        rows = fa.located_file_actions_table(self.actions, self.sources, schema)
        return fa.concat_file_tables([rows, *self.tables], schema)


@dataclass
class TableState:
    """The reconciled state of a table at one version."""

    version: int
    protocol: Protocol
    metadata: Metadata
    txns: dict[str, Txn]
    domains: dict[str, DomainMetadata]
    live_files: FileActions
    tombstones: FileActions

    @property
    def adds(self) -> pa.Table:
        """The live `add` actions, canonical table."""
        return self.live_files.table

    @property
    def removes(self) -> pa.Table:
        """The tombstones (`remove` actions still in the state), canonical table."""
        return self.tombstones.table


def key_string(path: str, dv: Mapping[str, Any] | None) -> str:
    """The logical-file key as one string: `path NUL uniqueId`, or just `path` without DV.

    The two forms cannot meet: a key with a DV holds a NUL, a path never does (control
    characters are not allowed in the log's URIs). Keeping the DV-less key the path itself
    spares replay a string per file.
    """
    if dv is None:
        return path
    uid = f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}"
    offset = dv.get("offset")
    return f"{path}{KEY_SEPARATOR}{uid}" + ("" if offset is None else f"@{offset}")


class Replayer:
    """Accumulates batches from the newest to the oldest, then produces a `TableState`.

    `root` is the table root (`Storage.root` or a URI) that logged paths are canonicalized
    against; None keys files on their paths exactly as logged, as before canonicalization.
    """

    def __init__(self, version: int, root: str | None = None) -> None:
        self.version = version
        self.root = None if root is None else CanonicalRoot.parse(root)
        self.protocol: Protocol | Mapping[str, Any] | None = None
        self.metadata: Metadata | Mapping[str, Any] | None = None
        self._protocol_source = ""
        self._metadata_source = ""
        self.txns: dict[str, Txn] = {}
        self.domains: dict[str, DomainMetadata] = {}
        self._seen: set[str] = set()
        self._adds = FileActions("add")
        self._removes = FileActions("remove")

    def apply(self, batch: ActionBatch) -> None:
        """Apply a batch older than every batch applied so far."""
        self._apply_non_file(batch)
        self._apply_file_dicts(batch)
        if batch.add_table is not None:
            self._adds.tables.append(self._unseen(batch.add_table))
        if batch.remove_table is not None:
            self._removes.tables.append(self._unseen(batch.remove_table))

    def _apply_non_file(self, batch: ActionBatch) -> None:
        if self.protocol is None and batch.protocol is not None:
            self.protocol, self._protocol_source = batch.protocol, batch.source
        if self.metadata is None and batch.metadata is not None:
            self.metadata, self._metadata_source = batch.metadata, batch.source
        for txn in batch.txns:
            self.txns.setdefault(txn.app_id, txn)
        for dm in batch.domains:
            self.domains.setdefault(dm.domain, dm)

    def _apply_file_dicts(self, batch: ActionBatch) -> None:
        seen = self._seen
        for actions, files in ((batch.removes, self._removes), (batch.adds, self._adds)):
            out = files.actions
            start = len(out)
            for action in actions:
                path = action.get("path")
                # The common case, a plain path (`is_plain`) without DV, kept inline for speed.
                if (
                    type(path) is str
                    and path
                    and "%" not in path
                    and ":" not in path
                    and path[0] != "/"
                    and action.get("deletionVector") is None
                ):
                    key = path
                else:
                    key = _action_key(action, batch, self.root)
                if key not in seen:
                    seen.add(key)
                    out.append(action)
            if len(out) > start:
                files.sources.append((batch.source, start, len(out)))

    def _unseen(self, table: pa.Table) -> pa.Table:
        """The rows of a checkpoint table whose canonical key no later commit touched."""
        if not self._seen or table.num_rows == 0:
            return table
        import pyarrow as pa  # local: only checkpoint tables are filtered, and they need it
        import pyarrow.compute as pc

        from dvtool.arrays import arrow_values
        from dvtool.delta.protocol.file_actions import key_column

        seen = arrow_values.array(list(self._seen), pa.string())
        keys = key_column(table, self.root)
        return table.filter(pc.invert(pc.is_in(keys, value_set=seen)))

    def finish(self) -> TableState:
        """The reconciled state; raises LogError when protocol or metaData never appeared,
        or when the newest of either, the one that wins, is incomplete or malformed (the
        error names the log file it came from)."""
        if self.protocol is None or self.metadata is None:
            missing = "protocol" if self.protocol is None else "metaData"
            raise LogError(f"the log has no {missing} action up to version {self.version}")
        protocol = (
            self.protocol
            if isinstance(self.protocol, Protocol)
            else self._winning(Protocol.from_json, self.protocol, self._protocol_source)
        )
        metadata = (
            self.metadata
            if isinstance(self.metadata, Metadata)
            else self._winning(Metadata.from_json, self.metadata, self._metadata_source)
        )
        domains = {d: dm for d, dm in self.domains.items() if not dm.removed}
        return TableState(
            self.version,
            protocol,
            metadata,
            self.txns,
            domains,
            self._adds,
            self._removes,
        )

    def _winning(
        self, parse: Callable[[Mapping[str, Any]], T], action: Mapping[str, Any], source: str
    ) -> T:
        """`parse(action)` of the winning protocol or metaData; a LogError naming `source`,
        the log file it came from, and why it matters: the state at `version` uses it."""
        try:
            return parse(action)
        except LogError as e:
            where = f"{source}: " if source else ""
            raise LogError(
                f"{where}{e.message}; it is the newest such action up to version "
                f"{self.version}, so the table state needs it complete",
                hint=e.hint or "Restore the log file from a backup.",
            ) from None


def _action_key(action: Mapping[str, Any], batch: ActionBatch, root: CanonicalRoot | None) -> str:
    """`key_string` of a JSON file action, its path canonical against `root` when given.

    Raises LogError naming the batch's log file when the path or the DV is malformed.
    """
    dv = action.get("deletionVector")
    path = action.get("path")
    if not isinstance(path, str) or not path:
        raise LogError(f"{batch.source}: a file action has no valid path ({path!r})")
    if dv is not None and not isinstance(dv, Mapping):
        raise LogError(f"{batch.source}: the deletionVector of {path!r} is not an object")
    return key_string(path if root is None else root.key(path), dv)


def replay(batches: Iterable[ActionBatch], version: int, root: str | None = None) -> TableState:
    """Reconcile `batches`, given newest first, into the state at `version`.

    `root` is the table root that file paths are canonicalized against (see `Replayer`).
    """
    replayer = Replayer(version, root)
    for batch in batches:
        replayer.apply(batch)
    return replayer.finish()
