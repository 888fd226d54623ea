"""Reading a data file's rows onto the table's current schema by field id, exactly.

A rewrite never changes a value, so every column of a data file is read the way the Iceberg
spec reads it ("Column Projection", "Schema Evolution") and nothing else:

- columns are found by Parquet field id (a renamed column by its id; a file without ids
  through the table's `schema.name-mapping.default`), nested structs, lists and maps too;
- a column the file lacks takes its identity partition value (spec "Column Projection"), else
  the field's `initial-default`, else null (pyiceberg's projection, `ArrowProjectionVisitor`);
- a column whose type differs from the table's is read only through the spec's type
  promotions (`int`->`long`, `float`->`double`, `decimal(P,S)`->`decimal(P',S)` with P' >= P;
  in v3 `unknown`->any and `date`->`timestamp`/`timestamp_ns`), or through a difference of
  Parquet encoding that holds the same value (timestamp units and UTC annotation, INT96,
  string/binary, `fixed[16]`/`uuid`, dictionary, narrower integer encodings). Every cast is
  checked: a value the table's type cannot hold exactly (nanoseconds below a microsecond, a
  date beyond `timestamp_ns`) is an `UnrepresentableValueError` naming the file and the
  column, never a truncated or wrapped value; another type is a `DataFileError`.

`ColumnPlanner` decides all of it on the driver, from the file's Parquet schema and the
table's, as pyiceberg's projection visitor would walk them, with exact casts (pyiceberg's
truncate nanoseconds and accept promotions the spec does not, e.g. a decimal's scale) and
null lists and maps kept null (pyiceberg turns a null list of structs or a null map into an
empty one). Its plan (`dvtool.iceberg.column_plan`) is plain data that executors apply with
pyarrow alone.
INT96 timestamps are read as microseconds (`dvtool.data_files.reading.parquet_file`): the
value Iceberg readers give them; never through nanoseconds, whose range wraps.
"""

from __future__ import annotations

import builtins
from typing import Any

import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema, index_by_id, prune_columns
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
)

from dvtool.errors import DataFileError
from dvtool.iceberg.column_plan import UNREADABLE as _UNREADABLE
from dvtool.iceberg.column_plan import (
    Cast,
    Column,
    ColumnPlan,
    Constant,
    List,
    Map,
    Node,
    Struct,
)

_TIMESTAMPS = (TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)
_BYTES = (StringType, BinaryType)


def readable_as(file_type: IcebergType, table_type: IcebergType, format_version: int) -> bool:
    """Whether a file column of `file_type` (as its Parquet schema says) holds values of the
    table's `table_type`: the same type, one of the spec's promotions for this format
    version, or another Parquet encoding of the same values (module docstring)."""
    if file_type == table_type:
        return True
    if isinstance(file_type, _TIMESTAMPS) and isinstance(table_type, _TIMESTAMPS):
        return True  # unit, UTC annotation or INT96: the cast is checked value by value
    if isinstance(file_type, _BYTES) and isinstance(table_type, _BYTES):
        return True  # one Parquet BYTE_ARRAY, annotated or not (UTF-8 is checked)
    if isinstance(file_type, (FixedType, UUIDType)) and isinstance(table_type, UUIDType):
        return isinstance(file_type, UUIDType) or len(file_type) == 16
    return _promotes(file_type, table_type, format_version)


def _promotes(file_type: IcebergType, table_type: IcebergType, format_version: int) -> bool:
    """The spec's table of valid primitive type promotions, exactly."""
    if isinstance(file_type, IntegerType):
        return isinstance(table_type, LongType)
    if isinstance(file_type, FloatType):
        return isinstance(table_type, DoubleType)
    if isinstance(file_type, DecimalType) and isinstance(table_type, DecimalType):
        return file_type.scale == table_type.scale and table_type.precision >= file_type.precision
    if format_version < 3:
        return False
    if isinstance(file_type, UnknownType):
        return table_type.is_primitive
    if isinstance(file_type, DateType):
        return isinstance(table_type, (TimestampType, TimestampNanoType))
    return False


def arrow_type(primitive: IcebergType) -> pa.DataType:
    """The arrow type rewrites hold a primitive in: pyiceberg's, with 32-bit offsets
    (`string`, `binary`: a record batch of a file holds them, and no copy is made)."""
    typ = schema_to_pyarrow(primitive, include_field_ids=True)
    return {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}.get(typ, typ)


def arrow_schema(schema: Schema) -> pa.Schema:
    """The arrow schema of rewritten files: pyiceberg's, with `PARQUET:field_id` on every
    field, 32-bit offsets (`arrow_type`)."""
    full = schema_to_pyarrow(schema, include_field_ids=True)
    return pa.schema([f.with_type(_small(f.type)) for f in full], metadata=full.metadata)


def _small(typ: pa.DataType) -> pa.DataType:
    """`typ` with 32-bit offsets, its nested fields (and their field ids) kept."""
    if pa.types.is_struct(typ):
        return pa.struct([f.with_type(_small(f.type)) for f in typ])
    if pa.types.is_map(typ):
        key, item = typ.key_field, typ.item_field
        return pa.map_(key.with_type(_small(key.type)), item.with_type(_small(item.type)))
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return pa.list_(typ.value_field.with_type(_small(typ.value_type)))
    return {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}.get(typ, typ)


class ColumnPlanner:
    """Plans the projection of one data file onto `target` (module docstring): the nodes
    `dvtool.iceberg.column_plan` applies to its batches. `file_schema` is the file's Iceberg
    schema, `out` the arrow schema of `target` as written, `constants` the identity
    partition values of the columns the file lacks; `location` names the file in errors."""

    def __init__(
        self,
        file_schema: Schema,
        target: Schema,
        location: str,
        format_version: int,
        constants: dict[int, Any],
    ) -> None:
        self._file_schema = file_schema
        self._file_ids = set(index_by_id(file_schema))
        self._target = target
        self._location = location
        self._format_version = format_version
        self._constants = constants

    def plan(self, out: pa.Schema) -> ColumnPlan:
        """The file's plan: the top-level columns to read and a node per field of `target`."""
        wanted = {
            i
            for i in self._target.field_ids
            if not isinstance(self._target.find_type(i), (ListType, MapType))
        }
        pruned = prune_columns(self._file_schema, wanted, select_full_types=False)
        nodes = tuple(
            self._node(field, out.field(index)) for index, field in enumerate(self._target.fields)
        )
        return ColumnPlan(tuple(c.name for c in pruned.columns), nodes, out)

    def _column(self, field: NestedField) -> str:
        name = self._target.find_column_name(field.field_id) or field.name
        return f"column {name} (field id {field.field_id})"

    def _node(self, field: NestedField, out: pa.Field) -> Node:
        """The node of `field` (its arrow field as written: `out`)."""
        if field.field_id not in self._file_ids:
            return self._missing(field, out)
        name = self._file_schema.find_field(field.field_id).name
        return self._present(field, out, name)

    def _missing(self, field: NestedField, out: pa.Field) -> Node:
        """A field the file lacks: its identity partition value, initial default or null."""
        if not field.optional and field.initial_default is None:
            raise DataFileError(
                f"{self._location}: Field is required, and could not be found in the file: {field}",
                hint=_UNREADABLE,
            )
        value = self._constants.get(field.field_id)
        if value is None:
            value = field.initial_default
        return Constant(out, None if value is None else pa.scalar(value, type=out.type))

    def _present(self, field: NestedField, out: pa.Field, name: str) -> Node:
        """A field the file holds (under `name`), its children planned against the file's."""
        typ = field.field_type
        file_type = self._file_schema.find_field(field.field_id).field_type
        if typ.is_primitive:
            return Column(out, name, self._cast(field, file_type))
        if isinstance(typ, StructType) and isinstance(file_type, StructType):
            children = tuple(
                self._node(child, out.type.field(i)) for i, child in enumerate(typ.fields)
            )
            return Struct(out, name, children)
        if isinstance(typ, ListType) and isinstance(file_type, ListType):
            element = self._inner(typ.element_field, file_type.element_field, out.type.value_field)
            return List(out, name, element)
        if isinstance(typ, MapType) and isinstance(file_type, MapType):
            key = self._inner(typ.key_field, file_type.key_field, out.type.key_field)
            value = self._inner(typ.value_field, file_type.value_field, out.type.item_field)
            return Map(out, name, key, value)
        raise DataFileError(
            f"{self._location}: {self._column(field)} is {file_type} in the file, which "
            f"is not the table's type {typ}",
            hint=_UNREADABLE,
        )

    def _inner(self, field: NestedField, file_field: NestedField, out: pa.Field) -> Node:
        """A list's element or a map's key or value: read from the flattened values."""
        if field.field_id != file_field.field_id:
            raise DataFileError(
                f"{self._location}: {self._column(field)} is field id {file_field.field_id} "
                "in the file",
                hint=_UNREADABLE,
            )
        return self._present(field, out, "")

    def _cast(self, field: NestedField, file_type: IcebergType) -> Cast:
        """How the file's primitive column becomes the table's type, or an error: never a
        changed value."""
        if not readable_as(file_type, field.field_type, self._format_version):
            raise DataFileError(
                f"{self._location}: {self._column(field)} is {file_type} in the file, which "
                f"is not the table's type {field.field_type} nor promotes to it",
                hint=_UNREADABLE,
            )
        return Cast(
            arrow_type(field.field_type),
            isinstance(file_type, UnknownType),
            self._column(field),
            str(field.field_type),
        )


def unsupported_types(schema: Schema) -> builtins.list[str]:
    """The columns of `schema` whose Iceberg type dvtool cannot write back unchanged
    (geometry, geography, variant: pyarrow would write them as plain binary)."""
    known = (
        *_TIMESTAMPS,
        *_BYTES,
        FixedType,
        UUIDType,
        IntegerType,
        LongType,
        FloatType,
        DoubleType,
        DecimalType,
        DateType,
        UnknownType,
        BooleanType,
        TimeType,
    )
    bad = []
    for field_id, field in index_by_id(schema).items():
        typ = field.field_type
        if typ.is_primitive and not isinstance(typ, known):
            bad.append(f"{schema.find_column_name(field_id)} ({typ})")
    return bad
