"""Build the checkpoint of a table state and its `_last_checkpoint` document, purely.

`checkpoint_table` lays a table state out with the column types Delta Spark writes (classic
single file; V2 spec with `checkpointMetadata` on v2Checkpoint tables), dropping the remove
tombstones whose `delta.deletedFileRetentionDuration` has passed
(`dvtool.delta.protocol.retention`).
`checkpoint_json` renders it as a JSON checkpoint (UUID-named V2 checkpoints may be JSON);
`last_checkpoint_json` is the `_last_checkpoint` hint pointing at it, with the checksum of
PROTOCOL.md. No IO here: `dvtool.delta.log.checkpoint_writer` writes both. Reading checkpoints back
into actions is `dvtool.delta.protocol.checkpoint`.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.arrays import arrow_values
from dvtool.delta.protocol.actions import Metadata, Protocol
from dvtool.delta.protocol.checkpoint import MODELLED_FIELDS
from dvtool.delta.protocol.file_actions import DV_TYPE, EXTRA_FIELD
from dvtool.delta.protocol.replay import TableState
from dvtool.delta.protocol.retention import tombstone_retention_ms
from dvtool.errors import UnsupportedFeatureError

_NULLABLE_MAP = pa.map_(pa.string(), pa.string())
_STRING_LIST = pa.list_(pa.field("element", pa.string()))
# The DV descriptor as Delta Spark writes it in checkpoints (maxRowIndex is always null here).
CHECKPOINT_DV_TYPE = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
        ("maxRowIndex", pa.int64()),
    ]
)
_TXN_TYPE = pa.struct(
    [("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())]
)
_METADATA_TYPE = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", _NULLABLE_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", _STRING_LIST),
        ("configuration", _NULLABLE_MAP),
        ("createdTime", pa.int64()),
    ]
)
_PROTOCOL_TYPE = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", _STRING_LIST),
        ("writerFeatures", _STRING_LIST),
    ]
)
_DOMAIN_TYPE = pa.struct(
    [("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]
)
_CHECKPOINT_METADATA_TYPE = pa.struct([("version", pa.int64()), ("tags", _NULLABLE_MAP)])
_SIDECAR_TYPE = pa.struct(
    [
        ("path", pa.string()),
        ("sizeInBytes", pa.int64()),
        ("modificationTime", pa.int64()),
        ("tags", _NULLABLE_MAP),
    ]
)
_ADD_CHECKPOINT_FIELDS: list[tuple[str, pa.DataType]] = [
    ("path", pa.string()),
    ("partitionValues", _NULLABLE_MAP),
    ("size", pa.int64()),
    ("modificationTime", pa.int64()),
    ("dataChange", pa.bool_()),
    ("stats", pa.string()),
    ("tags", _NULLABLE_MAP),
    ("deletionVector", CHECKPOINT_DV_TYPE),
    ("baseRowId", pa.int64()),
    ("defaultRowCommitVersion", pa.int64()),
    ("clusteringProvider", pa.string()),
]
# Tombstones in checkpoints carry no stats or tags (PROTOCOL.md, "Checkpoints").
_REMOVE_CHECKPOINT_FIELDS: list[tuple[str, pa.DataType]] = [
    ("path", pa.string()),
    ("deletionTimestamp", pa.int64()),
    ("dataChange", pa.bool_()),
    ("extendedFileMetadata", pa.bool_()),
    ("partitionValues", _NULLABLE_MAP),
    ("size", pa.int64()),
    ("deletionVector", CHECKPOINT_DV_TYPE),
    ("baseRowId", pa.int64()),
    ("defaultRowCommitVersion", pa.int64()),
]


def checkpoint_table(state: TableState, *, v2: bool, now_ms: int | None = None) -> pa.Table:
    """A classic single-file checkpoint of `state`, typed as Delta Spark writes it.

    One action per row: for `v2`, a `checkpointMetadata` row first (a V2 spec checkpoint
    without sidecars: its `sidecar` column is all null); then protocol, metaData, txn,
    domainMetadata (not removed), every live add and the unexpired remove tombstones. Adds
    and removes are stored with `dataChange=false`, as Delta does. Tombstones older than
    `delta.deletedFileRetentionDuration` (default 1 week) before `now_ms` (default: the
    clock) are dropped.

    Follows `delta.checkpoint.writeStatsAsJson` (stats JSON omitted when false). Raises
    UnsupportedFeatureError when `delta.checkpoint.writeStatsAsStruct` is true: writing
    `stats_parsed`/`partitionValues_parsed` is not implemented.
    """
    config = state.metadata.configuration
    if str(config.get("delta.checkpoint.writeStatsAsStruct", "false")).lower() == "true":
        raise UnsupportedFeatureError(
            "cannot write a checkpoint: the table sets delta.checkpoint.writeStatsAsStruct=true "
            "and dvtool does not write stats_parsed/partitionValues_parsed"
        )
    with_stats = str(config.get("delta.checkpoint.writeStatsAsJson", "true")).lower() != "false"
    add_fields = [f for f in _ADD_CHECKPOINT_FIELDS if with_stats or f[0] != "stats"]
    removes = _unexpired(state.removes, config, now_ms)
    add_extras = unmodelled_fields(state.adds)
    remove_extras = unmodelled_fields(removes)
    add_type = pa.struct([*add_fields, *(pa.field(k, v.type) for k, v in add_extras.items())])
    remove_type = pa.struct(
        [*_REMOVE_CHECKPOINT_FIELDS, *(pa.field(k, v.type) for k, v in remove_extras.items())]
    )
    columns: list[tuple[str, pa.DataType]] = [
        ("txn", _TXN_TYPE),
        ("add", add_type),
        ("remove", remove_type),
        ("metaData", _METADATA_TYPE),
        ("protocol", _PROTOCOL_TYPE),
        ("domainMetadata", _DOMAIN_TYPE),
    ]
    if v2:
        # As Delta Spark writes V2 classic checkpoints; the sidecar column stays all null.
        columns.append(("checkpointMetadata", _CHECKPOINT_METADATA_TYPE))
        columns.append(("sidecar", _SIDECAR_TYPE))
    schema = pa.schema(columns)

    parts: list[pa.Table] = []
    if v2:
        cp_meta = {"version": state.version, "tags": None}
        parts.append(_part(schema, "checkpointMetadata", [cp_meta]))
    parts.append(_part(schema, "protocol", [_protocol_row(state.protocol)]))
    parts.append(_part(schema, "metaData", [_metadata_row(state.metadata)]))
    txns = [t.to_json() for t in sorted(state.txns.values(), key=lambda t: t.app_id)]
    if txns:
        parts.append(_part(schema, "txn", txns))
    domains = [
        d.to_json() for d in sorted(state.domains.values(), key=lambda d: d.domain) if not d.removed
    ]
    if domains:
        parts.append(_part(schema, "domainMetadata", domains))
    if state.adds.num_rows:
        adds = _file_structs(state.adds, add_type, add_extras)
        parts.append(_column_part(schema, "add", adds))
    if removes.num_rows:
        remove_structs = _file_structs(removes, remove_type, remove_extras)
        parts.append(_column_part(schema, "remove", remove_structs))
    return pa.concat_tables(parts).combine_chunks()


def _protocol_row(protocol: Protocol) -> dict[str, Any]:
    return {
        "minReaderVersion": protocol.min_reader_version,
        "minWriterVersion": protocol.min_writer_version,
        "readerFeatures": _list_or_none(protocol.reader_features),
        "writerFeatures": _list_or_none(protocol.writer_features),
    }


def _list_or_none(values: tuple[str, ...] | None) -> list[str] | None:
    return None if values is None else list(values)


def _metadata_row(metadata: Metadata) -> dict[str, Any]:
    raw = metadata.raw
    fmt = raw.get("format") if isinstance(raw.get("format"), Mapping) else None
    provider = str(fmt.get("provider", "parquet")) if fmt else "parquet"
    options = dict(fmt.get("options") or {}) if fmt else {}
    return {
        "id": metadata.id,
        "name": metadata.name,
        "description": metadata.description,
        "format": {"provider": provider, "options": list(options.items())},
        "schemaString": metadata.schema_string,
        "partitionColumns": list(metadata.partition_columns),
        "configuration": list(metadata.configuration.items()),
        "createdTime": metadata.created_time,
    }


def _part(schema: pa.Schema, column: str, rows: list[dict[str, Any]]) -> pa.Table:
    """A checkpoint slice with `rows` in `column` and nulls in every other column."""
    typ = schema.field(column).type
    return _column_part(schema, column, arrow_values.array(rows, typ))


def _column_part(schema: pa.Schema, column: str, values: pa.Array) -> pa.Table:
    n = len(values)
    arrays = [values if f.name == column else pa.nulls(n, f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def _file_structs(
    table: pa.Table, typ: pa.StructType, extras: Mapping[str, pa.Array] | None = None
) -> pa.Array:
    """Canonical add/remove rows as a checkpoint struct column, column by column; `extras`
    holds the columns of fields dvtool does not model (`unmodelled_fields`)."""
    n = table.num_rows
    children: list[pa.Array] = []
    for f in typ:
        if extras and f.name in extras:
            children.append(extras[f.name])
        elif f.name == "dataChange":
            children.append(arrow_values.array([False] * n, pa.bool_()))
        elif f.name == "deletionVector":
            children.append(_checkpoint_dv(arrow_values.combined(table.column("deletionVector"))))
        elif f.name in table.column_names:
            values = arrow_values.combined(table.column(f.name))
            children.append(values if values.type == f.type else values.cast(f.type))
        else:
            children.append(pa.nulls(n, f.type))
    return pa.StructArray.from_arrays(children, fields=list(typ))


def unmodelled_fields(table: pa.Table) -> dict[str, pa.Array]:
    """The fields of canonical add/remove rows that dvtool does not model, as typed columns.

    They are kept per row as `extraFields` JSON text; here each becomes a column with the
    type pyarrow infers from its JSON values, so a checkpoint carries them as dvtool's
    commits do and a later writer that knows them still finds them.
    A field whose values have no common type, or a type parquet cannot store (an empty
    struct), cannot be one checkpoint column and is left out; readers must ignore unknown
    fields anyway, so the checkpoint stays valid. Names of checkpoint-only renderings
    (`stats_parsed`, `partitionValues_parsed`) are never taken from unknown fields.
    """
    texts = table.column(EXTRA_FIELD[0]) if EXTRA_FIELD[0] in table.column_names else None
    if texts is None or texts.null_count == len(texts):
        return {}
    decoded = [json.loads(text) if text else {} for text in texts.to_pylist()]
    names = sorted(set().union(*decoded) - MODELLED_FIELDS)
    columns: dict[str, pa.Array] = {}
    for name in names:
        column = [row.get(name) for row in decoded]
        try:
            values = arrow_values.array(column, arrow_values.infer_type(column))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            continue
        if _parquet_storable(values.type):
            columns[name] = values
    return columns


def _parquet_storable(typ: pa.DataType) -> bool:
    """False for types parquet cannot write: empty structs, also nested in lists or maps."""
    if pa.types.is_struct(typ):
        fields = [typ.field(i).type for i in range(typ.num_fields)]
        return bool(fields) and all(_parquet_storable(t) for t in fields)
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return _parquet_storable(typ.value_type)
    if pa.types.is_map(typ):
        return _parquet_storable(typ.key_type) and _parquet_storable(typ.item_type)
    return not pa.types.is_null(typ)


def _checkpoint_dv(dv: pa.Array) -> pa.Array:
    children = [pc.struct_field(dv, f.name).cast(f.type) for f in DV_TYPE]
    children.append(pa.nulls(len(dv), pa.int64()))
    return pa.StructArray.from_arrays(
        children, fields=list(CHECKPOINT_DV_TYPE), mask=pc.is_null(dv)
    )


def _unexpired(removes: pa.Table, config: Mapping[str, str], now_ms: int | None) -> pa.Table:
    """Tombstones whose deletionTimestamp is within the retention period (Delta's rule:
    keep when `deletionTimestamp > now - retention`, a missing timestamp counting as 0)."""
    retention = tombstone_retention_ms(config)
    if retention is None or removes.num_rows == 0:
        return removes
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = now - retention
    ts = pc.fill_null(removes.column("deletionTimestamp"), arrow_values.scalar(0, pa.int64()))
    return removes.filter(pc.greater(ts, arrow_values.scalar(cutoff, pa.int64())))


# Map fields: their null values mean something (a null partition value), unlike struct fields.
_MAP_FIELDS = frozenset({"partitionValues", "tags", "configuration", "options"})


def checkpoint_json(table: pa.Table) -> bytes:
    """A `checkpoint_table` as JSON lines, the format of a UUID-named V2 JSON checkpoint:
    one action per line, null struct fields left out as in commits (map entries kept)."""
    lines = []
    for row in table.to_pylist(maps_as_pydicts="strict"):
        for column, value in row.items():
            if value is not None:
                action = {column: _without_nulls(value)}
                lines.append(json.dumps(action, separators=(",", ":"), default=str))
    return "".join(line + "\n" for line in lines).encode("utf-8")


def _without_nulls(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    return {
        k: v if k in _MAP_FIELDS else _without_nulls(v) for k, v in value.items() if v is not None
    }


def last_checkpoint_json(version: int, size: int, size_in_bytes: int, num_add_files: int) -> bytes:
    """The `_last_checkpoint` contents for a single-file checkpoint, with its `checksum`."""
    doc: dict[str, Any] = {
        "version": version,
        "size": size,
        "sizeInBytes": size_in_bytes,
        "numOfAddFiles": num_add_files,
    }
    doc["checksum"] = last_checkpoint_checksum(doc)
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")


def last_checkpoint_checksum(doc: Mapping[str, Any]) -> str:
    """MD5 of the canonical form of a `_last_checkpoint` document (PROTOCOL.md, "JSON
    checksum"): URL-encoded leaf paths and values, byte-order sorted, top-level `checksum`
    ignored."""
    pairs: list[tuple[str, str]] = []
    for key, value in doc.items():
        if key != "checksum":
            _canonical_pairs(_canonical_string(key), value, pairs)
    pairs.sort(key=lambda pair: pair[0].encode("utf-8"))
    text = ",".join(f"{path}={value}" for path, value in pairs)
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def _canonical_pairs(path: str, value: Any, out: list[tuple[str, str]]) -> None:
    if isinstance(value, Mapping):
        for key, child in value.items():
            _canonical_pairs(f"{path}+{_canonical_string(str(key))}", child, out)
    elif isinstance(value, (list, tuple)):
        for index, child in enumerate(value):
            _canonical_pairs(f"{path}+{index}", child, out)
    else:
        out.append((path, _canonical_scalar(value)))


def _canonical_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _canonical_string(value)
    return json.dumps(value)


def _canonical_string(text: str) -> str:
    return '"' + quote(text, safe="-._~") + '"'
