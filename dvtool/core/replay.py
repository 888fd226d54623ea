"""Log replay: reconcile the actions of a log segment into one table state.

Replay goes from the newest commit to the oldest and keeps, for every logical file
`(path, deletionVector.uniqueId)`, only the newest reference: an `add` makes it live, a
`remove` makes it a tombstone. Given the table root, the path of the key is canonical
(`dvtool.core.paths`), as in Delta Spark: an `add` of `file:/t/a%20b` and a `remove` of
`a b` in table `/t` name one file. The newest protocol and metaData win, txn per appId, and
domainMetadata per domain (removed domains are dropped). A checkpoint is already reconciled,
so its file actions only need filtering against the keys seen in later commits; that filter
runs on whole pyarrow columns, which keeps snapshots of millions of files fast.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.core import arrow_values
from dvtool.core.actions import (
    ADD_SCHEMA,
    REMOVE_SCHEMA,
    DomainMetadata,
    Metadata,
    Protocol,
    Txn,
    file_actions_table,
)
from dvtool.core.paths import CanonicalRoot, canonical_path_column
from dvtool.errors import LogError

_KEY_SEP = "\x00"


@dataclass
class ActionBatch:
    """The actions of one commit, log compaction file or checkpoint.

    `adds`/`removes` hold JSON objects (commits) or are empty while `add_table`/
    `remove_table` hold canonical pyarrow tables (checkpoints). `name` is the log file the
    batch came from, for error messages (empty when unknown).
    """

    version: int
    protocol: Protocol | None = None
    metadata: Metadata | None = None
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
class TableState:
    """The reconciled state of a table at one version."""

    version: int
    protocol: Protocol
    metadata: Metadata
    txns: dict[str, Txn]
    domains: dict[str, DomainMetadata]
    adds: pa.Table
    removes: pa.Table


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
    return f"{path}{_KEY_SEP}{uid}" + ("" if offset is None else f"@{offset}")


def key_column(table: pa.Table, root: CanonicalRoot | None = None) -> pa.ChunkedArray:
    """`key_string` of every row of a canonical add/remove table, computed column-wise.

    With `root`, the path part is the canonical key of the path (only the rows whose path
    is not plain go through Python); without it, the path as logged.
    """
    paths = table.column("path")
    if root is not None:
        paths = canonical_path_column(paths, root)
    dv = table.column("deletionVector")
    storage = pc.struct_field(dv, "storageType")
    inline = pc.struct_field(dv, "pathOrInlineDv")
    offset = pc.cast(pc.struct_field(dv, "offset"), pa.string())
    at, empty, sep = (arrow_values.scalar(s, pa.string()) for s in ("@", "", _KEY_SEP))
    with_offset = pc.binary_join_element_wise(storage, inline, at, offset, empty)
    without_offset = pc.binary_join_element_wise(storage, inline, empty)
    uid = pc.if_else(pc.is_null(offset), without_offset, with_offset)
    with_dv = pc.binary_join_element_wise(paths, uid, sep)
    return pc.if_else(pc.is_null(dv), paths, with_dv)


class Replayer:
    """Accumulates batches from the newest to the oldest, then produces a `TableState`.

    `root` is the table root (`Storage.root` or a URI) that logged paths are canonicalized
    against; None keys files on their paths exactly as logged, as before canonicalization.
    """

    def __init__(self, version: int, root: str | None = None) -> None:
        self.version = version
        self.root = None if root is None else CanonicalRoot.parse(root)
        self.protocol: Protocol | None = None
        self.metadata: Metadata | None = None
        self.txns: dict[str, Txn] = {}
        self.domains: dict[str, DomainMetadata] = {}
        self._seen: set[str] = set()
        self._adds: list[Mapping[str, Any]] = []
        self._removes: list[Mapping[str, Any]] = []
        self._add_tables: list[pa.Table] = []
        self._remove_tables: list[pa.Table] = []
        # (log file, first, end) of the JSON actions each batch contributed, for messages.
        self._add_sources: list[tuple[str, int, int]] = []
        self._remove_sources: list[tuple[str, int, int]] = []

    def apply(self, batch: ActionBatch) -> None:
        """Apply a batch older than every batch applied so far."""
        self._apply_non_file(batch)
        self._apply_file_dicts(batch)
        if batch.add_table is not None:
            self._add_tables.append(self._unseen(batch.add_table))
        if batch.remove_table is not None:
            self._remove_tables.append(self._unseen(batch.remove_table))

    def _apply_non_file(self, batch: ActionBatch) -> None:
        if self.protocol is None:
            self.protocol = batch.protocol
        if self.metadata is None:
            self.metadata = batch.metadata
        for txn in batch.txns:
            self.txns.setdefault(txn.app_id, txn)
        for dm in batch.domains:
            self.domains.setdefault(dm.domain, dm)

    def _apply_file_dicts(self, batch: ActionBatch) -> None:
        seen = self._seen
        for actions, out, sources in (
            (batch.removes, self._removes, self._remove_sources),
            (batch.adds, self._adds, self._add_sources),
        ):
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
                sources.append((batch.source, start, len(out)))

    def _unseen(self, table: pa.Table) -> pa.Table:
        """The rows of a checkpoint table whose canonical key no later commit touched."""
        if not self._seen or table.num_rows == 0:
            return table
        seen = arrow_values.array(list(self._seen), pa.string())
        keys = key_column(table, self.root)
        return table.filter(pc.invert(pc.is_in(keys, value_set=seen)))

    def finish(self) -> TableState:
        """The reconciled state; raises LogError when protocol or metaData never appeared."""
        if self.protocol is None or self.metadata is None:
            missing = "protocol" if self.protocol is None else "metaData"
            raise LogError(f"the log has no {missing} action up to version {self.version}")
        add_rows = _located_table(self._adds, self._add_sources, ADD_SCHEMA)
        adds = _concat([add_rows, *self._add_tables], ADD_SCHEMA)
        remove_rows = _located_table(self._removes, self._remove_sources, REMOVE_SCHEMA)
        removes = _concat([remove_rows, *self._remove_tables], REMOVE_SCHEMA)
        domains = {d: dm for d, dm in self.domains.items() if not dm.removed}
        return TableState(
            self.version, self.protocol, self.metadata, self.txns, domains, adds, removes
        )


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


def _located_table(
    actions: list[Mapping[str, Any]], sources: list[tuple[str, int, int]], schema: pa.Schema
) -> pa.Table:
    """`file_actions_table` of the JSON actions; a malformed field names its log file.

    The table is built in one pass; only when that fails is each batch's slice built alone,
    to find the file that holds the bad value.
    """
    try:
        return file_actions_table(actions, schema)
    except LogError as e:
        for source, start, end in sources:
            try:
                file_actions_table(actions[start:end], schema)
            except LogError as located:
                raise LogError(f"{source}: {located.message}") from None
        raise e from None


def _concat(tables: Iterable[pa.Table], schema: pa.Schema) -> pa.Table:
    parts = [t for t in tables if t.num_rows]
    if not parts:
        return arrow_values.empty_table(schema)
    return pa.concat_tables(parts).combine_chunks() if len(parts) > 1 else parts[0]


def replay(batches: Iterable[ActionBatch], version: int, root: str | None = None) -> TableState:
    """Reconcile `batches`, given newest first, into the state at `version`.

    `root` is the table root that file paths are canonicalized against (see `Replayer`).
    """
    replayer = Replayer(version, root)
    for batch in batches:
        replayer.apply(batch)
    return replayer.finish()
