"""Log replay: reconcile the actions of a log segment into one table state.

Replay goes from the newest commit to the oldest and keeps, for every logical file
`(path, deletionVector.uniqueId)`, only the newest reference: an `add` makes it live, a
`remove` makes it a tombstone. The newest protocol and metaData win, txn per appId, and
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

from dvtool.core.actions import (
    ADD_SCHEMA,
    REMOVE_SCHEMA,
    DomainMetadata,
    Metadata,
    Protocol,
    Txn,
    file_actions_table,
)
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
    """The logical-file key as one string: `path NUL uniqueId` (empty uniqueId without DV)."""
    if dv is None:
        return path + _KEY_SEP
    uid = f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}"
    offset = dv.get("offset")
    return f"{path}{_KEY_SEP}{uid}" + ("" if offset is None else f"@{offset}")


def key_column(table: pa.Table) -> pa.ChunkedArray:
    """`key_string` of every row of a canonical add/remove table, computed column-wise."""
    dv = table.column("deletionVector")
    storage = pc.struct_field(dv, "storageType")
    inline = pc.struct_field(dv, "pathOrInlineDv")
    offset = pc.cast(pc.struct_field(dv, "offset"), pa.string())
    with_offset = pc.binary_join_element_wise(storage, inline, "@", offset, "")
    without_offset = pc.binary_join_element_wise(storage, inline, "")
    uid = pc.if_else(pc.is_null(offset), without_offset, with_offset)
    uid = pc.if_else(pc.is_null(dv), "", uid)
    return pc.binary_join_element_wise(table.column("path"), uid, _KEY_SEP)


class Replayer:
    """Accumulates batches from the newest to the oldest, then produces a `TableState`."""

    def __init__(self, version: int) -> None:
        self.version = version
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
                if type(path) is str and path and action.get("deletionVector") is None:
                    key = path + _KEY_SEP  # the common case, kept inline for speed
                else:
                    key = _action_key(action, batch)
                if key not in seen:
                    seen.add(key)
                    out.append(action)
            if len(out) > start:
                sources.append((batch.source, start, len(out)))

    def _unseen(self, table: pa.Table) -> pa.Table:
        if not self._seen or table.num_rows == 0:
            return table
        seen = pa.array(list(self._seen), pa.string())
        return table.filter(pc.invert(pc.is_in(key_column(table), value_set=seen)))

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


def _action_key(action: Mapping[str, Any], batch: ActionBatch) -> str:
    """`key_string` of a JSON file action; LogError naming the batch's file if malformed."""
    dv = action.get("deletionVector")
    path = action.get("path")
    if not isinstance(path, str) or not path:
        raise LogError(f"{batch.source}: a file action has no valid path ({path!r})")
    if dv is None:
        return path + _KEY_SEP
    if not isinstance(dv, Mapping):
        raise LogError(f"{batch.source}: the deletionVector of {path!r} is not an object")
    return key_string(path, dv)


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
        return schema.empty_table()
    return pa.concat_tables(parts).combine_chunks() if len(parts) > 1 else parts[0]


def replay(batches: Iterable[ActionBatch], version: int) -> TableState:
    """Reconcile `batches`, given newest first, into the state at `version`."""
    replayer = Replayer(version)
    for batch in batches:
        replayer.apply(batch)
    return replayer.finish()
