"""Turn checkpoint rows (parquet or V2 JSON) into an ActionBatch with canonical file tables.

Checkpoints store each action type as a struct column; writers differ in which optional fields
they include (`stats` as JSON or only `stats_parsed`, DV `maxRowIndex`, row tracking fields).
Here every shape is mapped onto the canonical add/remove layout of `dvtool.delta.protocol.actions`,
so
the rest of dvtool never sees the difference. The reader chooses the columns to read with
`checkpoint_columns`, so large checkpoints are read with column projection.

The other direction, building the checkpoint of a table state, is
`dvtool.delta.protocol.checkpoint_build`; it shares `MODELLED_FIELDS` with this module.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.arrays import arrow_values
from dvtool.delta.protocol.actions import DomainMetadata, Txn
from dvtool.delta.protocol.file_actions import ADD_SCHEMA, DV_TYPE, EXTRA_FIELD, REMOVE_SCHEMA
from dvtool.delta.protocol.replay import ActionBatch
from dvtool.errors import LogError, exception_text

NON_FILE_COLUMNS = (
    "protocol",
    "metaData",
    "txn",
    "domainMetadata",
    "sidecar",
    "checkpointMetadata",
)


def checkpoint_columns(schema: pa.Schema) -> list[str]:
    """The (dotted, nested) columns to read from a checkpoint or sidecar with `schema`."""
    columns = [c for c in NON_FILE_COLUMNS if c in schema.names]
    for action, canonical in (("add", ADD_SCHEMA), ("remove", REMOVE_SCHEMA)):
        if action not in schema.names:
            continue
        struct = schema.field(action).type
        present = {struct.field(i).name for i in range(struct.num_fields)}
        wanted = [f.name for f in canonical if f.name in present]
        if "stats" not in present and "stats_parsed" in present:
            wanted.append("stats_parsed")
        wanted += sorted(present - MODELLED_FIELDS)
        columns.extend(f"{action}.{name}" for name in wanted)
    return columns


# The fields of the canonical add/remove layout and their checkpoint-only renderings; any
# other field is one dvtool does not model and is carried along (`extraFields` when read,
# a typed column again when written: `checkpoint_build.unmodelled_fields`).
MODELLED_FIELDS = frozenset(f.name for f in (*ADD_SCHEMA, *REMOVE_SCHEMA)) | {
    "stats_parsed",
    "partitionValues_parsed",
}


def batch_from_checkpoint(table: pa.Table, version: int, name: str) -> ActionBatch:
    """Build the ActionBatch of one checkpoint part, sidecar or V2 checkpoint file."""
    batch = ActionBatch(version, name=name)
    names = table.column_names
    if "add" in names:
        batch.add_table = canonical_file_table(_valid_rows(table, "add"), ADD_SCHEMA)
    if "remove" in names:
        batch.remove_table = canonical_file_table(_valid_rows(table, "remove"), REMOVE_SCHEMA)
    for column in NON_FILE_COLUMNS:
        if column in names:
            for row in _valid_rows(table, column).to_pylist(maps_as_pydicts="lossy"):
                _non_file_action(batch, column, row, name)
    return batch


def _valid_rows(table: pa.Table, column: str) -> pa.ChunkedArray:
    col = table.column(column)
    return col.filter(pc.is_valid(col))


def _non_file_action(batch: ActionBatch, column: str, row: dict[str, Any], name: str) -> None:
    """Add one non-null row of a non-file column to `batch`.

    protocol and metaData stay as logged (nulls dropped): like those of commits, they are
    checked only if they win the replay (`Replayer.finish`). Columns and struct fields
    dvtool does not know are ignored (`checkpoint_columns` does not even read them).
    """
    try:
        if column == "protocol":
            batch.protocol = _drop_nulls(row)
        elif column == "metaData":
            batch.metadata = _drop_nulls(row)
        elif column == "txn":
            batch.txns.append(Txn.from_json(row))
        elif column == "domainMetadata":
            batch.domains.append(DomainMetadata.from_json(row))
        elif column == "sidecar":
            batch.sidecars.append(row)
    except (KeyError, TypeError, ValueError) as e:
        raise LogError(
            f"checkpoint {name}: malformed '{column}' row ({exception_text(e)})"
        ) from None


def _drop_nulls(row: dict[str, Any]) -> dict[str, Any]:
    """Checkpoint structs spell absent fields as nulls; the log's JSON leaves them out.

    Maps arrive as dicts (`maps_as_pydicts`), so an empty map such as `format.options` is
    written back as `{}`, never as a list other engines cannot parse.
    """
    out: dict[str, Any] = {}
    for key, value in row.items():
        if value is None:
            continue
        out[key] = _drop_nulls(value) if isinstance(value, dict) and value else value
    return out


def canonical_file_table(rows: pa.ChunkedArray | pa.Array, schema: pa.Schema) -> pa.Table:
    """Project a struct column of add or remove rows onto the canonical `schema`."""
    rows = arrow_values.combined(rows)
    present = {rows.type.field(i).name for i in range(rows.type.num_fields)}
    n = len(rows)
    columns: list[pa.Array] = []
    for f in schema:
        if f.name in present:
            columns.append(_cast_field(pc.struct_field(rows, f.name), f))
        elif f.name == "stats" and "stats_parsed" in present:
            columns.append(stats_json_from_parsed(pc.struct_field(rows, "stats_parsed")))
        elif f.name == EXTRA_FIELD[0]:
            columns.append(_extra_fields(rows, sorted(present - MODELLED_FIELDS)))
        else:
            columns.append(pa.nulls(n, f.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _extra_fields(rows: pa.Array, names: list[str]) -> pa.Array:
    """Fields a writer added that dvtool does not model, as JSON text, to carry them along."""
    if not names:
        return pa.nulls(len(rows), pa.string())
    children = [pc.struct_field(rows, name).to_pylist(maps_as_pydicts="lossy") for name in names]
    texts = []
    for values in zip(*children, strict=True):
        extra = {k: _stats_value(v) for k, v in zip(names, values, strict=True) if v is not None}
        texts.append(json.dumps(extra, separators=(",", ":"), default=str) if extra else None)
    return arrow_values.array(texts, pa.string())


def _cast_field(values: pa.Array, f: pa.Field) -> pa.Array:
    if f.type == DV_TYPE:
        return _canonical_dv(values)
    try:
        return values if values.type == f.type else values.cast(f.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise LogError(f"checkpoint column '{f.name}' has type {values.type}: {e}") from e


def _canonical_dv(values: pa.Array) -> pa.Array:
    """Keep the descriptor fields of DV_TYPE (dropping e.g. `maxRowIndex`), typed as the log's.

    An optional field the writer left out of its DV struct (`offset`) reads as null.
    """
    present = {values.type.field(i).name for i in range(values.type.num_fields)}
    children = []
    for f in DV_TYPE:
        if f.name not in present:
            children.append(pa.nulls(len(values), f.type))
            continue
        child = pc.struct_field(values, f.name)
        children.append(child if child.type == f.type else child.cast(f.type))
    return pa.StructArray.from_arrays(children, fields=list(DV_TYPE), mask=pc.is_null(values))


def stats_json_from_parsed(parsed: pa.Array) -> pa.Array:
    """Render `stats_parsed` structs as the JSON `stats` text Delta writers produce."""
    texts = [
        None if row is None else json.dumps(_stats_value(row), separators=(",", ":"))
        for row in parsed.to_pylist()
    ]
    return arrow_values.array(texts, pa.string())


def _stats_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _stats_value(v) for k, v in value.items() if v is not None}
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return value.isoformat(timespec="milliseconds")
        return (
            value.astimezone(dt.timezone.utc)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z")
        )
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value
