"""Delta log actions: protocol, metaData, txn, domainMetadata, and the file-action tables.

Non-file actions are few per snapshot and are kept as small frozen dataclasses that remember
the raw JSON they came from, so writers can copy them back without dropping fields they do not
know. File actions (`add`, `remove`) can number in the millions and are kept as pyarrow tables
in one canonical layout, whatever their source (JSON commit or parquet checkpoint).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from dvtool.core import arrow_values
from dvtool.core.paths import canonical_path
from dvtool.errors import LogError

JSON = dict[str, Any]

DV_TYPE = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)
STRING_MAP = pa.map_(pa.string(), pa.string())

# Columns shared by add and remove, in the order of the protocol's tables.
_ADD_FIELDS: list[tuple[str, pa.DataType]] = [
    ("path", pa.string()),
    ("partitionValues", STRING_MAP),
    ("size", pa.int64()),
    ("modificationTime", pa.int64()),
    ("dataChange", pa.bool_()),
    ("stats", pa.string()),
    ("tags", STRING_MAP),
    ("deletionVector", DV_TYPE),
    ("baseRowId", pa.int64()),
    ("defaultRowCommitVersion", pa.int64()),
    ("clusteringProvider", pa.string()),
]
_REMOVE_FIELDS: list[tuple[str, pa.DataType]] = [
    ("path", pa.string()),
    ("deletionTimestamp", pa.int64()),
    ("dataChange", pa.bool_()),
    ("extendedFileMetadata", pa.bool_()),
    ("partitionValues", STRING_MAP),
    ("size", pa.int64()),
    ("stats", pa.string()),
    ("tags", STRING_MAP),
    ("deletionVector", DV_TYPE),
    ("baseRowId", pa.int64()),
    ("defaultRowCommitVersion", pa.int64()),
]
# Fields we do not model are kept per row as a JSON object text, so they survive a rewrite.
EXTRA_FIELD = ("extraFields", pa.string())

ADD_SCHEMA = pa.schema([*_ADD_FIELDS, EXTRA_FIELD])
REMOVE_SCHEMA = pa.schema([*_REMOVE_FIELDS, EXTRA_FIELD])
_ADD_NAMES = frozenset(name for name, _ in _ADD_FIELDS)
_REMOVE_NAMES = frozenset(name for name, _ in _REMOVE_FIELDS)


def file_actions_table(actions: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """Build a canonical add or remove table from JSON action objects, column by column.

    Fields no action carries become null columns without touching the actions again, which
    matters for commits of hundreds of thousands of files.
    """
    known = _ADD_NAMES if schema is ADD_SCHEMA else _REMOVE_NAMES
    present: set[str] = set().union(*actions) if actions else set()
    n = len(actions)
    columns: list[pa.Array] = []
    for f in schema:
        if f.name == EXTRA_FIELD[0]:
            columns.append(_extra_column(actions, known, present))
        elif f.name not in present:
            columns.append(pa.nulls(n, f.type))
        elif f.type == STRING_MAP:
            columns.append(_map_column(actions, f.name))
        else:
            columns.append(_scalar_column(actions, f.name, f.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _scalar_column(actions: Sequence[Mapping[str, Any]], name: str, typ: pa.DataType) -> pa.Array:
    values = [a.get(name) for a in actions]
    try:
        return arrow_values.array(values, typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
        raise LogError(f"file action field '{name}' has a value of the wrong type: {e}") from e


def _map_column(actions: Sequence[Mapping[str, Any]], name: str) -> pa.Array:
    values = [a.get(name) for a in actions]
    try:
        return arrow_values.array(values, STRING_MAP)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
        raise LogError(f"file action field '{name}' is not a map of strings: {e}") from e


def _extra_column(
    actions: Sequence[Mapping[str, Any]], known: frozenset[str], present: set[str]
) -> pa.Array:
    if present <= known:
        return pa.nulls(len(actions), pa.string())
    texts = []
    for action in actions:
        extra = {k: v for k, v in action.items() if k not in known}
        texts.append(json.dumps(extra, separators=(",", ":")) if extra else None)
    return arrow_values.array(texts, pa.string())


def unsafe_path_reason(path_in_log: str) -> str | None:
    """Why a path from the log must not be acted on by a writing command, or None.

    Paths in the log are RFC 2396 URIs: raw control characters and backslashes are not
    allowed in them, and no writer produces them. A `..` segment (also percent-encoded, as
    `%2E%2E`) climbs out of the directory it starts in; Delta writers never write one.
    Where the path leads (inside the table root or not) is for the storage layer to decide.
    """
    decoded = unquote(path_in_log)
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in decoded):
        return "it contains control characters"
    if "\\" in path_in_log:
        return "it contains a backslash, which a URI path cannot hold unencoded"
    if ".." in decoded.split("/"):
        return "it has a '..' segment"
    return None


def file_action_key(
    path: str, dv: Mapping[str, Any] | None, *, root: str | None = None
) -> tuple[str, str | None]:
    """The (path, DV uniqueId) primary key of a logical file.

    The path is kept as logged unless `root` (the table root) is given: then it is the
    canonical key of the path (`dvtool.core.paths`), as log replay keys files, so that two
    spellings of one file compare equal. Callers that compare with paths as logged (the
    conflict checks match remove paths against these keys) must not pass `root` on one
    side only.
    """
    key_path = path if root is None else canonical_path(path, root)
    if dv is None:
        return (key_path, None)
    uid = f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}"
    offset = dv.get("offset")
    return (key_path, uid if offset is None else f"{uid}@{offset}")


@dataclass(frozen=True)
class Protocol:
    """The `protocol` action: reader/writer versions and, from 3/7, explicit feature lists."""

    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None
    raw: JSON = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Protocol:
        try:
            reader = int(d["minReaderVersion"])
            writer = int(d["minWriterVersion"])
        except (KeyError, TypeError, ValueError) as e:
            raise LogError(f"protocol action lacks valid reader/writer versions: {d}") from e
        rf, wf = d.get("readerFeatures"), d.get("writerFeatures")
        return cls(
            reader,
            writer,
            None if rf is None else tuple(rf),
            None if wf is None else tuple(wf),
            dict(d),
        )

    def to_json(self) -> JSON:
        out: JSON = dict(self.raw)
        out["minReaderVersion"] = self.min_reader_version
        out["minWriterVersion"] = self.min_writer_version
        if self.reader_features is not None:
            out["readerFeatures"] = list(self.reader_features)
        if self.writer_features is not None:
            out["writerFeatures"] = list(self.writer_features)
        return out


@dataclass(frozen=True)
class Metadata:
    """The `metaData` action: table id, schema, partition columns and configuration."""

    id: str
    schema_string: str
    partition_columns: tuple[str, ...]
    configuration: Mapping[str, str]
    name: str | None = None
    description: str | None = None
    created_time: int | None = None
    raw: JSON = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Metadata:
        try:
            return cls(
                id=str(d["id"]),
                schema_string=str(d["schemaString"]),
                partition_columns=tuple(d.get("partitionColumns") or ()),
                configuration=dict(d.get("configuration") or {}),
                name=d.get("name"),
                description=d.get("description"),
                created_time=d.get("createdTime"),
                raw=dict(d),
            )
        except (KeyError, TypeError) as e:
            raise LogError(f"metaData action is missing '{e}' or malformed") from e

    def to_json(self) -> JSON:
        out: JSON = dict(self.raw)
        out.update(
            id=self.id,
            schemaString=self.schema_string,
            partitionColumns=list(self.partition_columns),
            configuration=dict(self.configuration),
        )
        return out


@dataclass(frozen=True)
class Txn:
    """A `txn` action: the last version an application committed (idempotent writes)."""

    app_id: str
    version: int
    last_updated: int | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Txn:
        return cls(str(d["appId"]), int(d["version"]), d.get("lastUpdated"))

    def to_json(self) -> JSON:
        out: JSON = {"appId": self.app_id, "version": self.version}
        if self.last_updated is not None:
            out["lastUpdated"] = self.last_updated
        return out


@dataclass(frozen=True)
class DomainMetadata:
    """A `domainMetadata` action; `removed=True` is a tombstone for the domain."""

    domain: str
    configuration: str
    removed: bool = False

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> DomainMetadata:
        return cls(str(d["domain"]), str(d.get("configuration", "")), bool(d.get("removed")))

    def to_json(self) -> JSON:
        return {"domain": self.domain, "configuration": self.configuration, "removed": self.removed}
