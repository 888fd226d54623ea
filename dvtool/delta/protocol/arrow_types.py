"""Delta types as arrow types: the schema dvtool writes data files with.

`delta_to_arrow_type` maps one Delta type, `arrow_schema` a table schema to the arrow schema
of its data files: physical column names under column mapping, parquet field ids
(`PARQUET:field_id`) from `delta.columnMapping.id`, and, for Iceberg compatibility V2, the
ids of array elements and map keys and values from `delta.columnMapping.nested.ids`
(PROTOCOL.md, "Writer Requirements for IcebergCompatV2"). Pure: no IO.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from dvtool.delta.protocol.schema import ArrayType, DataType, MapType, StructField, StructType

__all__ = [
    "DECIMAL_RE",
    "FIELD_ID_METADATA_KEY",
    "NESTED_IDS_KEY",
    "arrow_schema",
    "delta_to_arrow_type",
    "normalize_type",
]

FIELD_ID_METADATA_KEY = b"PARQUET:field_id"
# Ids of array elements and map keys/values, keyed by their dotted path.
NESTED_IDS_KEY = "delta.columnMapping.nested.ids"

_PRIMITIVE_ARROW: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "double": pa.float64(),
    "float": pa.float32(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "void": pa.null(),
    # PROTOCOL.md "Variant data in Parquet": the unshredded struct of two binaries.
    "variant": pa.struct(
        [pa.field("value", pa.binary(), nullable=False), pa.field("metadata", pa.binary(), False)]
    ),
}
DECIMAL_RE = re.compile(r"^\s*decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)\s*$", re.IGNORECASE)
_CHAR_RE = re.compile(r"^\s*(var)?char\s*\(\s*\d+\s*\)\s*$", re.IGNORECASE)
_CHAR_RE = re.compile(r"^\s*(var)?char\s*\(\s*\d+\s*\)\s*$", re.IGNORECASE)


def delta_to_arrow_type(delta_type: DataType, mode: str = "none") -> pa.DataType:
    """The arrow type of a Delta type; struct fields get physical names under `mode`.

    long/integer/short/byte -> int64/32/16/8, double/float, string, boolean, binary,
    date -> date32, timestamp -> timestamp('us', 'UTC'), timestamp_ntz -> timestamp('us'),
    decimal(p,s) -> decimal128(p,s) (decimal256 above 38 digits), array -> list with an
    `element` field, map -> map, struct -> struct. With mode `id` or `name`, nested struct
    fields carry their column mapping id as `PARQUET:field_id` (see `arrow_schema`).
    """
    if isinstance(delta_type, str):
        t = normalize_type(delta_type)
        if t in _PRIMITIVE_ARROW:
            return _PRIMITIVE_ARROW[t]
        m = DECIMAL_RE.match(t)
        if m:
            precision, scale = int(m.group(1)), int(m.group(2))
            if precision > 38:
                return pa.decimal256(precision, scale)
            return pa.decimal128(precision, scale)
        raise ValueError(f"Delta type {delta_type!r} has no arrow equivalent in dvtool")
    if isinstance(delta_type, (ArrayType, MapType)):
        return _collection_type(delta_type, mode, {}, "")
    return pa.struct([_arrow_field(f, mode) for f in delta_type.fields if not _is_void(f)])


def _collection_type(
    delta_type: ArrayType | MapType, mode: str, nested_ids: Mapping[str, Any], prefix: str
) -> pa.DataType:
    """The arrow list or map of an array or map type whose `element`, `key` and `value`
    fields carry the ids `nested_ids` gives them under `prefix` (the dotted path from the
    nearest struct field's physical name), as Iceberg compatibility V2 requires."""
    if isinstance(delta_type, ArrayType):
        element = _child_field(
            "element", delta_type.element_type, delta_type.contains_null, mode, nested_ids, prefix
        )
        return pa.list_(element)
    key = _child_field("key", delta_type.key_type, False, mode, nested_ids, prefix)
    value = _child_field(
        "value", delta_type.value_type, delta_type.value_contains_null, mode, nested_ids, prefix
    )
    return pa.map_(key, value)


def _child_field(
    name: str,
    delta_type: Any,
    nullable: bool,
    mode: str,
    nested_ids: Mapping[str, Any],
    prefix: str,
) -> pa.Field:
    """The `element`/`key`/`value` field of a list or map, with its nested id if it has one."""
    path = f"{prefix}.{name}"
    if isinstance(delta_type, (ArrayType, MapType)):
        arrow_type = _collection_type(delta_type, mode, nested_ids, path)
    else:
        arrow_type = delta_to_arrow_type(delta_type, mode)
    field_id = nested_ids.get(path) if mode in ("id", "name") else None
    metadata = None if field_id is None else {FIELD_ID_METADATA_KEY: str(field_id).encode()}
    return pa.field(name, arrow_type, nullable=nullable, metadata=metadata)


def _arrow_field(f: StructField, mode: str) -> pa.Field:
    metadata = None
    if mode in ("id", "name") and f.field_id is not None:
        metadata = {FIELD_ID_METADATA_KEY: str(f.field_id).encode()}
    physical = f.physical_name(mode)
    if isinstance(f.type, (ArrayType, MapType)):
        nested_ids = f.metadata.get(NESTED_IDS_KEY)
        ids = nested_ids if isinstance(nested_ids, Mapping) else {}
        arrow_type = _collection_type(f.type, mode, ids, physical)
    else:
        arrow_type = delta_to_arrow_type(f.type, mode)
    return pa.field(physical, arrow_type, nullable=f.nullable, metadata=metadata)


def _is_void(f: StructField) -> bool:
    return isinstance(f.type, str) and normalize_type(f.type) == "void"


def arrow_schema(schema: StructType, mode: str, partition_columns: Sequence[str]) -> pa.Schema:
    """The arrow schema of the table's data files.

    Physical names under column mapping `mode`; partition columns (logical names, matched
    case-insensitively) and `void` columns are left out, as they are not stored in data
    files. With mode `id` or `name`, every struct field (top level and nested) that has a
    `delta.columnMapping.id` carries it as field metadata `PARQUET:field_id`, which pyarrow
    writes as the parquet `field_id` - what Delta Spark writes in both modes. Array elements
    and map keys/values get the ids their nearest struct field lists under
    `delta.columnMapping.nested.ids` (Iceberg compatibility V2), none where it lists none.
    """
    excluded = {c.lower() for c in partition_columns}
    fields = [
        _arrow_field(f, mode)
        for f in schema.fields
        if f.name.lower() not in excluded and not _is_void(f)
    ]
    return pa.schema(fields)


def normalize_type(delta_type: str) -> str:
    """A primitive Delta type name in its canonical spelling (`int` -> `integer`, `varchar(n)`
    -> `string`, bare `decimal` -> `decimal(10,0)`), lower-cased."""
    t = delta_type.strip()
    lowered = t.lower()
    if lowered in ("int",):
        return "integer"
    if lowered in ("bigint",):
        return "long"
    if lowered in ("smallint",):
        return "short"
    if lowered in ("tinyint",):
        return "byte"
    if lowered == "decimal":
        return "decimal(10,0)"
    if _CHAR_RE.match(lowered):
        return "string"
    return lowered
