"""Delta types as Spark types, and the typed columns and tables a scan is built from.

A scan reads all files with an explicit schema (`read_schema`): the table's data schema
with physical names (column mapping) at every level, so a file lacking a column reads it as
NULL. Every field is nullable: Spark reads file sources as nullable, and a cast to a
non-nullable struct field would be refused. In column mapping `id` mode the fields carry
their `parquet.field.id` and the scan sets `spark.sql.parquet.fieldId.read.enabled`
(`scan_conf`), so columns are found by field id as Delta Spark finds them; files written
before a type change are widened by Spark's own parquet reader (Spark 4).

The predicate then sees its data columns under their logical names (`logical_columns`:
nested structs cast to the struct type with logical field names) and the partition columns
it uses (`partition_columns`) from a small driver-built table, typed by their Delta types
(`keys_table`: one row per spelling of each file's path).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dvtool.delta.protocol.arrow_types import delta_to_arrow_type
from dvtool.delta.protocol.partitions import parse_partition_value
from dvtool.delta.protocol.schema import ArrayType, DataType, MapType, StructField, StructType
from dvtool.engines.base import TableLayout
from dvtool.engines.spark.failures import SparkEngineError
from dvtool.engines.spark.tasks import FILE_COLUMN, PATH_COLUMN
from dvtool.errors import UsageError

if TYPE_CHECKING:  # the predicate module (sqlglot) costs every rewrite worker ~0.1 s to import
    from pyspark.sql import Column

    from dvtool.predicate import Predicate

_PRIMITIVES = {
    "long": "LongType",
    "bigint": "LongType",
    "integer": "IntegerType",
    "int": "IntegerType",
    "short": "ShortType",
    "smallint": "ShortType",
    "byte": "ByteType",
    "tinyint": "ByteType",
    "float": "FloatType",
    "double": "DoubleType",
    "string": "StringType",
    "boolean": "BooleanType",
    "binary": "BinaryType",
    "date": "DateType",
    "timestamp": "TimestampType",
    "timestamp_ntz": "TimestampNTZType",
}
_DECIMAL = re.compile(r"^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


# Types a scan never reads: `void` holds nothing, and no predicate may reference a
# `variant` (resolve.py refuses it; Iceberg's types without value semantics - uuid, fixed,
# time, nanosecond timestamps ... - map to it, `dvtool.commands.iceberg_layout`), so such
# a field (a struct's too, and a list or map holding one) is left out of the read schema
# instead of failing the scan.
_UNREAD = frozenset({"void", "variant"})


def _unread(f: StructField) -> bool:
    return _unread_type(f.type)


def _unread_type(t: DataType) -> bool:
    if isinstance(t, str):
        return t.strip().lower() in _UNREAD
    if isinstance(t, ArrayType):
        return _unread_type(t.element_type)
    if isinstance(t, MapType):
        return _unread_type(t.key_type) or _unread_type(t.value_type)
    return False


def spark_type(t: DataType, mode: str, *, logical: bool = False) -> Any:
    """The Spark type of a Delta type; struct fields by physical (or logical) names.

    Every field, element and value is nullable: Spark reads file sources as nullable, and a
    cast to a non-nullable struct field would be refused.
    """
    from pyspark.sql import types as T

    if isinstance(t, str):
        name = t.strip().lower()
        if name in _PRIMITIVES:
            return getattr(T, _PRIMITIVES[name])()
        if name == "decimal":
            return T.DecimalType(10, 0)
        m = _DECIMAL.match(name)
        if m:
            return T.DecimalType(int(m.group(1)), int(m.group(2)))
        if re.match(r"^(var)?char\s*\(\s*\d+\s*\)$", name):
            return T.StringType()
        raise UsageError(f"the Spark engine cannot read columns of type {t}")
    if isinstance(t, ArrayType):
        return T.ArrayType(spark_type(t.element_type, mode, logical=logical), True)
    if isinstance(t, MapType):
        return T.MapType(
            spark_type(t.key_type, mode, logical=logical),
            spark_type(t.value_type, mode, logical=logical),
            True,
        )
    return T.StructType(
        [
            T.StructField(
                f.name if logical else f.physical_name(mode),
                spark_type(f.type, mode, logical=logical),
                True,
                _field_id_metadata(f, mode, logical),
            )
            for f in t.fields
            if not _unread(f)
        ]
    )


def _field_id_metadata(f: StructField, mode: str, logical: bool) -> dict[str, Any] | None:
    """`parquet.field.id` for a physical field in column mapping `id` mode: Spark then finds
    the column by its parquet field id (with `scan_conf`), as Delta Spark reads such tables,
    so a file that holds it under an older name still gives its values."""
    if logical or mode != "id" or f.field_id is None:
        return None
    return {"parquet.field.id": f.field_id}


# Dates and timestamps of files no Spark wrote (no `org.apache.spark.version` in the footer)
# read as they are, in the proleptic Gregorian calendar, as pyarrow reads them for the arrow
# engine and for every rewrite; Spark 3.x's default (EXCEPTION) fails on INT96 timestamps
# before 1900 and dates before 1582, e.g. the 0001-01-01 of slowly changing dimensions.
# Files Spark wrote carry their calendar in the footer, which Spark follows whatever these say.
_CALENDAR_CONF = {
    "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
    "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
}


def scan_conf(table: TableLayout) -> dict[str, str]:
    """SQL confs a scan of `table` needs: the calendar of other writers' dates and
    timestamps (`_CALENDAR_CONF`), and reading by parquet field id in `id` mode. A file
    without field ids then fails the scan (Spark's `ignoreMissing` would read NULLs)."""
    if table.column_mapping_mode != "id":
        return dict(_CALENDAR_CONF)
    return {**_CALENDAR_CONF, "spark.sql.parquet.fieldId.read.enabled": "true"}


def _data_fields(table: TableLayout) -> list[StructField]:
    excluded = {c.lower() for c in table.partition_columns}
    return [f for f in table.schema.fields if f.name.lower() not in excluded and not _unread(f)]


def read_schema(table: TableLayout) -> Any:
    """The Spark schema of the data files: data columns, physical names at every level."""
    return spark_type(StructType(tuple(_data_fields(table))), table.column_mapping_mode)


def _has_struct(t: DataType) -> bool:
    if isinstance(t, StructType):
        return True
    if isinstance(t, ArrayType):
        return _has_struct(t.element_type)
    if isinstance(t, MapType):
        return _has_struct(t.key_type) or _has_struct(t.value_type)
    return False


def logical_columns(table: TableLayout, predicate: Predicate) -> list[Column]:
    """The predicate's data columns under their logical names (nested names cast too)."""
    from pyspark.sql import functions as F

    mode = table.column_mapping_mode
    by_physical = {f.physical_name(mode): f for f in _data_fields(table)}
    out = []
    for physical in predicate.columns:
        f = by_physical.get(physical)
        if f is None:
            raise SparkEngineError(f"the predicate reads {physical}, not a data column")
        column = F.col(_quote(physical))
        if mode != "none" and _has_struct(f.type):
            column = column.cast(spark_type(f.type, mode, logical=True))
        out.append(column.alias(f.name))
    return out


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def partition_columns(table: TableLayout, predicate: Predicate) -> list[tuple[str, str, str]]:
    """(physical name, logical name, Delta type) of the partition columns the predicate uses."""
    mode = table.column_mapping_mode
    out = []
    for name in table.partition_columns:
        f = table.schema.get(name)
        if f is None or not isinstance(f.type, str):
            continue
        physical = f.physical_name(mode)
        if physical in predicate.partition_columns_used:
            out.append((physical, f.name, f.type))
    return out


def keys_table(
    paths: Sequence[Sequence[str]],
    indexes: Sequence[int],
    partition_values: Sequence[Mapping[str, str | None]],
    partitions: Sequence[tuple[str, str, str]],
) -> pa.Table:
    """One row per spelling of each file's path: file index and typed partition values."""
    keys: list[str] = []
    files: list[int] = []
    values: list[list[Any]] = [[] for _ in partitions]
    for spellings, index, given in zip(paths, indexes, partition_values, strict=True):
        parsed = [parse_partition_value(given.get(p), t) for p, _, t in partitions]
        for spelling in spellings:
            keys.append(spelling)
            files.append(index)
            for column, value in zip(values, parsed, strict=True):
                column.append(value)
    arrays = [pa.array(keys, pa.string()), pa.array(files, pa.int32())]
    names = [PATH_COLUMN, FILE_COLUMN]
    for (_, logical, delta_type), column in zip(partitions, values, strict=True):
        arrays.append(pa.array(column, delta_to_arrow_type(delta_type)))
        names.append(logical)
    return pa.Table.from_arrays(arrays, names=names)
