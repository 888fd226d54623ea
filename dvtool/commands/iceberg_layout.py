"""An Iceberg table as the engines see a table: its schema in the engines' terms, read by id.

The scan and rewrite engines (`dvtool.engines`) read data files against a `TableLayout`
whose schema is Delta's `StructType` (the engines' schema until they get a format-neutral
one). An Iceberg schema maps onto it exactly as Delta's `id` column mapping mode, which
is how Delta itself reads Iceberg-written files (UniForm, converted tables):

- every field carries its Iceberg field id (`delta.columnMapping.id`) and its current name
  as physical name, so a file is read by the parquet field ids Iceberg writers put on
  every column, whatever the column was called when the file was written; list elements
  and map keys/values carry theirs in `delta.columnMapping.nested.ids`;
- types: boolean, int (integer), long, float, double, decimal(P,S), date, string, binary,
  timestamp (timestamp_ntz), timestamptz (timestamp), structs, lists and maps. Types the
  engines have no value semantics for (time, uuid, fixed, nanosecond timestamps, variant,
  geometry, geography, unknown) become a type name the predicate refuses to reference (as
  Delta's variant columns are), so a `--where` on them is a clear error, and a scan, which
  reads only the predicate's columns, is unaffected by them;
- Iceberg partitions are transforms of columns the data files hold: the layout has no
  partition columns (the predicate reads the source columns from the files).

`file_stats` turns an Iceberg data file's column metrics (`lower_bounds`, `upper_bounds`,
`null_value_counts`, by field id) into the statistics the predicate's skipping takes
(`Predicate.stats_match`): typed values keyed by dotted physical path; `parse_predicate`
binds a `--where` to the current schema and `metrics_verdict` judges one file by them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from dvtool.delta.protocol.schema import ArrayType, DataType, MapType, StructField, StructType
from dvtool.engines.base import TableLayout

if TYPE_CHECKING:
    from datetime import datetime

    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.types import IcebergType, NestedField

    from dvtool.iceberg.live_files import LiveDataFile
    from dvtool.predicate import Match, Predicate
    from dvtool.storage.data_file_storage import DataFileStorage

ID_MODE = "id"
FIELD_ID_KEY = "delta.columnMapping.id"
PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
NESTED_IDS_KEY = "delta.columnMapping.nested.ids"
# A type name no predicate can compare: resolve.py refuses references to it like variant.
UNSUPPORTED = "variant"

_PRIMITIVES = {
    "boolean": "boolean",
    "int": "integer",
    "long": "long",
    "float": "float",
    "double": "double",
    "date": "date",
    "string": "string",
    "binary": "binary",
    "timestamp": "timestamp_ntz",
    "timestamptz": "timestamp",
}


def table_layout(storage: DataFileStorage, schema: Schema) -> TableLayout:
    """The layout the engines scan an Iceberg table's data files with."""
    return TableLayout(storage, delta_schema(schema), (), ID_MODE)


def delta_schema(schema: Schema) -> StructType:
    """`schema` as the engines' `StructType` in `id` column mapping mode."""
    return StructType(tuple(_field(f) for f in schema.fields))


def _field(f: NestedField) -> StructField:
    metadata: dict[str, Any] = {FIELD_ID_KEY: f.field_id, PHYSICAL_NAME_KEY: f.name}
    nested = dict(_nested_ids(f.field_type, f.name))
    if nested:
        metadata[NESTED_IDS_KEY] = nested
    return StructField(f.name, _type(f.field_type), not f.required, metadata)


def _type(t: IcebergType) -> DataType:
    from pyiceberg.types import DecimalType, ListType
    from pyiceberg.types import MapType as IcebergMap
    from pyiceberg.types import StructType as Struct

    if isinstance(t, Struct):
        return StructType(tuple(_field(f) for f in t.fields))
    if isinstance(t, ListType):
        return ArrayType(_type(t.element_type), not t.element_required)
    if isinstance(t, IcebergMap):
        return MapType(_type(t.key_type), _type(t.value_type), not t.value_required)
    if isinstance(t, DecimalType):
        return f"decimal({t.precision},{t.scale})"
    return _PRIMITIVES.get(str(t), UNSUPPORTED)


def _nested_ids(t: IcebergType, path: str) -> Iterator[tuple[str, int]]:
    """The ids of the list elements and map keys/values under a field, by the dotted path
    Delta's `nested.ids` uses (`col.element`, `col.key`, `col.value.element` ...); struct
    fields carry their own ids and end the path."""
    from pyiceberg.types import ListType
    from pyiceberg.types import MapType as IcebergMap

    if isinstance(t, ListType):
        yield f"{path}.element", t.element_id
        yield from _nested_ids(t.element_type, f"{path}.element")
    elif isinstance(t, IcebergMap):
        yield f"{path}.key", t.key_id
        yield f"{path}.value", t.value_id
        yield from _nested_ids(t.key_type, f"{path}.key")
        yield from _nested_ids(t.value_type, f"{path}.value")


# -- statistics ----------------------------------------------------------------------------


def parse_predicate(metadata: TableMetadata, where: str, now: datetime | None) -> Predicate:
    """`where` bound to the table's current schema (by field id)."""
    from dvtool.predicate import Predicate

    return Predicate.parse(where, delta_schema(metadata.schema()), (), ID_MODE, now=now)


def metrics_verdict(
    predicate: Predicate, live: LiveDataFile, paths: Mapping[int, tuple[str, Any]]
) -> Match:
    """Whether none, all or some of `live`'s rows may match, judged from its column metrics
    (`paths`: `stats_paths` of the current schema)."""
    lows, highs, nulls = file_stats(live.record, paths)
    return predicate.stats_match(live.entry.record_count, lows, highs, nulls)


def stats_paths(
    schema: Schema, columns: Collection[str] | None = None
) -> dict[int, tuple[str, Any]]:
    """Per primitive field id reachable through structs only: its dotted path and type
    (the columns a predicate can read and whose bounds skipping can use); under the
    top-level `columns` only, if given (`Predicate.columns`: decoding every column's bounds
    of every file cost more than the rest of a wide table's plan)."""
    from pyiceberg.types import PrimitiveType
    from pyiceberg.types import StructType as Struct

    found: dict[int, tuple[str, Any]] = {}

    def walk(fields: Any, prefix: str) -> None:
        for f in fields:
            path = f"{prefix}{f.name}"
            if isinstance(f.field_type, Struct):
                walk(f.field_type.fields, path + ".")
            elif isinstance(f.field_type, PrimitiveType):
                found[f.field_id] = (path, f.field_type)

    top = schema.fields if columns is None else [f for f in schema.fields if f.name in columns]
    walk(top, "")
    return found


def file_stats(
    record: Any, paths: Mapping[int, tuple[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, int | None]]:
    """An Iceberg data file's (min, max, null count) maps for `Predicate.stats_match`.

    Bounds are decoded with pyiceberg's single-value deserialization; a bound that does
    not decode, or of a type the engines have no semantics for, is left out (unknown).
    Iceberg's bounds are valid bounds even when truncated (`truncate(16)`, the default
    metrics mode, keeps a prefix as lower bound and a prefix with its last character
    incremented as upper bound), and exact for timestamps: `truncated=False` is right."""
    from pyiceberg.conversions import from_bytes

    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    nulls: dict[str, int | None] = {}
    for field_id, (path, field_type) in paths.items():
        if _type(field_type) == UNSUPPORTED:
            continue
        count = (record.null_value_counts or {}).get(field_id)
        if count is not None:
            nulls[path] = int(count)
        for bounds, out in ((record.lower_bounds, lows), (record.upper_bounds, highs)):
            raw = (bounds or {}).get(field_id)
            if raw is None:
                continue
            try:
                out[path] = _stat_value(from_bytes(field_type, bytes(raw)), field_type)
            except (ValueError, TypeError, OverflowError, UnicodeDecodeError):
                continue
    return lows, highs, nulls


def _stat_value(value: Any, field_type: Any) -> Any:
    """A decoded bound as the skipping code compares it: dates and timestamps as Python
    dates/datetimes (pyiceberg gives days and microseconds since the epoch)."""
    from datetime import date, datetime, timedelta, timezone

    name = str(field_type)
    if name == "date" and isinstance(value, int):
        return date(1970, 1, 1) + timedelta(days=value)
    if name in ("timestamp", "timestamptz") and isinstance(value, int):
        moment = datetime(1970, 1, 1) + timedelta(microseconds=value)
        return moment.replace(tzinfo=timezone.utc) if name == "timestamptz" else moment
    return value
