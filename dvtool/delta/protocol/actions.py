"""Delta log actions: protocol, metaData, txn, domainMetadata, and the file-action fields.

Non-file actions are few per snapshot and are kept as small frozen dataclasses that remember
the raw JSON they came from, so writers can copy them back without dropping fields they do not
know. File actions (`add`, `remove`) can number in the millions; the fields dvtool models are
declared here, and `dvtool.delta.protocol.file_actions` keeps them as pyarrow tables in one
canonical
layout, whatever their source (JSON commit or parquet checkpoint). This module needs no
pyarrow: reading a small table's JSON log does not import it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from dvtool.delta.protocol.paths import canonical_path
from dvtool.errors import LogError

JSON = dict[str, Any]

# The fields of `add` and `remove` dvtool models, in the order of the protocol's tables, with
# the kind of JSON value each holds (`FieldKind`). `dvtool.delta.protocol.file_actions` builds the
# canonical pyarrow layout from these; `has_plain_values` checks actions against them.
ADD_FIELDS: tuple[tuple[str, str], ...] = (
    ("path", "string"),
    ("partitionValues", "map"),
    ("size", "long"),
    ("modificationTime", "long"),
    ("dataChange", "boolean"),
    ("stats", "string"),
    ("tags", "map"),
    ("deletionVector", "deletionVector"),
    ("baseRowId", "long"),
    ("defaultRowCommitVersion", "long"),
    ("clusteringProvider", "string"),
)
REMOVE_FIELDS: tuple[tuple[str, str], ...] = (
    ("path", "string"),
    ("deletionTimestamp", "long"),
    ("dataChange", "boolean"),
    ("extendedFileMetadata", "boolean"),
    ("partitionValues", "map"),
    ("size", "long"),
    ("stats", "string"),
    ("tags", "map"),
    ("deletionVector", "deletionVector"),
    ("baseRowId", "long"),
    ("defaultRowCommitVersion", "long"),
)
# The deletion vector descriptor's fields (`deletionVector` kind).
DV_FIELDS: tuple[tuple[str, str], ...] = (
    ("storageType", "string"),
    ("pathOrInlineDv", "string"),
    ("offset", "int"),
    ("sizeInBytes", "int"),
    ("cardinality", "long"),
)
# Fields we do not model are kept per row as a JSON object text, so they survive a rewrite.
EXTRA_FIELD_NAME = "extraFields"

_INT_RANGES = {"int": 2**31, "long": 2**63}
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")


def has_plain_values(
    actions: Iterable[Mapping[str, Any]], fields: Sequence[tuple[str, str]]
) -> bool:
    """Whether every modelled field of `actions` holds a JSON value of exactly its kind.

    Plain means: strings are `str`, longs and ints are `int` (not bool) in range, booleans
    `bool`, maps are objects of strings (or nulls), deletion vectors objects of plain fields;
    any field may be null or absent. The canonical tables accept a little more (a float
    for an integer, truncated; a map as a list of pairs), so a False here is no error: it
    only sends the actions through the table conversion, which decides.
    """
    for action in actions:
        for name, kind in fields:
            value = action.get(name)
            if value is not None and not _is_plain(value, kind):
                return False
    return True


def _is_plain(value: Any, kind: str) -> bool:
    if kind == "string":
        return type(value) is str
    if kind in _INT_RANGES:
        bound = _INT_RANGES[kind]
        return type(value) is int and -bound <= value < bound
    if kind == "boolean":
        return type(value) is bool
    if kind == "map":
        return type(value) is dict and all(
            type(k) is str and (v is None or type(v) is str) for k, v in value.items()
        )
    return type(value) is dict and all(
        (v := value.get(name)) is None or _is_plain(v, sub) for name, sub in DV_FIELDS
    )


def unsafe_path_reason(path_in_log: str) -> str | None:
    """Why a path from the log must not be acted on by a writing command, or None.

    Paths in the log are RFC 2396 URIs: raw control characters and backslashes are not
    allowed in them, and no writer produces them. A `..` segment (also percent-encoded, as
    `%2E%2E`) climbs out of the directory it starts in; Delta writers never write one.
    Where the path leads (inside the table root or not) is for the storage layer to decide.
    """
    decoded = unquote(path_in_log) if "%" in path_in_log else path_in_log
    if _CONTROL_CHARACTER.search(decoded):
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
    canonical key of the path (`dvtool.delta.protocol.paths`), as log replay keys files, so that two
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
        """The protocol of a logged action; LogError when it is incomplete or malformed.

        Fields dvtool does not know are kept in `raw`, never refused.
        """
        try:
            reader = int(d["minReaderVersion"])
            writer = int(d["minWriterVersion"])
        except (KeyError, TypeError, ValueError) as e:
            raise LogError(f"protocol action lacks valid reader/writer versions: {d}") from e
        return cls(
            reader,
            writer,
            _feature_names(d, "readerFeatures"),
            _feature_names(d, "writerFeatures"),
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


def _feature_names(d: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    """The feature list `key` of a protocol action: None when absent, LogError unless it is
    a list of names (a string would otherwise read as a list of one-letter features)."""
    names = d.get(key)
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise LogError(f"protocol field {key!r} is not a list of feature names: {names!r}")
    return tuple(names)


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
        """The metaData of a logged action; LogError when it is incomplete or malformed.

        `id` and `schemaString` are required (PROTOCOL.md, "Change Metadata"); fields dvtool
        does not know are kept in `raw`, never refused.
        """
        for required in ("id", "schemaString"):
            if d.get(required) is None:
                raise LogError(f"metaData action has no {required!r} field")
        schema_string = d["schemaString"]
        if not isinstance(schema_string, str):
            raise LogError(
                f"metaData field 'schemaString' is not a string: {type(schema_string).__name__}"
            )
        partition_columns = d.get("partitionColumns") or []
        configuration = d.get("configuration") or {}
        if not isinstance(partition_columns, list) or not all(
            isinstance(c, str) for c in partition_columns
        ):
            raise LogError(f"metaData field 'partitionColumns' is not a list of names: {d}")
        if not isinstance(configuration, Mapping):
            raise LogError(f"metaData field 'configuration' is not a map: {d}")
        return cls(
            id=str(d["id"]),
            schema_string=schema_string,
            partition_columns=tuple(partition_columns),
            configuration=dict(configuration),
            name=d.get("name"),
            description=d.get("description"),
            created_time=d.get("createdTime"),
            raw=dict(d),
        )

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
