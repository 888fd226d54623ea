"""A data file's columns onto the table's write schema, as planned on the driver: pyarrow only.

A rewrite reads each source file's columns onto the table's current schema by field id
(`dvtool.iceberg.file_projection` decides how, on the driver, with pyiceberg's schemas). What
it decides is a tree of plain nodes, one per field of the write schema, which this module
applies to each record batch of the file. It imports pyarrow and dvtool's errors only, so
Spark executors with a stock Python (pyarrow, pandas, numpy) run it:

- `Column`: the file's column or struct field of that name, a primitive cast exactly to the
  table's type (`Cast`: a value the table's type cannot hold exactly is an
  `UnrepresentableValueError`, never a changed value; a file column of type `unknown`
  becomes nulls);
- `Constant`: a field the file lacks: its identity partition value, `initial-default` or
  null, on every row;
- `Struct`, `List`, `Map`: the nested value rebuilt around its projected children, a null
  struct, list or map kept null.

Each node carries the arrow field of the output (the write schema's, names as written,
`PARQUET:field_id` on every field), so the projected batch is that schema's; `project`
casts it to the output schema last, which refuses nulls in a required column.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from dvtool.errors import DataFileError, UnrepresentableValueError

UNREADABLE = "Iceberg readers cannot read this file either: repair or remove it."


@dataclass(frozen=True)
class Cast:
    """How a primitive file column becomes the table's type: `target` its arrow type,
    `unknown` when the file's column is of type `unknown` (all null), `column` and
    `table_type` naming it in errors."""

    target: pa.DataType
    unknown: bool
    column: str
    table_type: str

    def apply(self, values: pa.Array, location: str) -> pa.Array:
        if values.type == self.target:
            return values
        if self.unknown:
            return pa.nulls(len(values), self.target)
        try:
            return values.cast(self.target, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise UnrepresentableValueError(
                f"{location}: {self.column} holds a value the table's type "
                f"{self.table_type} cannot hold exactly ({values.type}): {e}",
                hint="dvtool rewrites a file only when every value is kept exactly.",
            ) from None


@dataclass(frozen=True)
class Column:
    """The file's field `name` (in its parent), cast by `cast` when primitive."""

    field: pa.Field
    name: str
    cast: Cast | None


@dataclass(frozen=True)
class Constant:
    """A field the file lacks: `value` (an arrow scalar of the field's type) on every row,
    nulls when None."""

    field: pa.Field
    value: pa.Scalar | None


@dataclass(frozen=True)
class Struct:
    """The file's struct `name`, its fields projected by `children`."""

    field: pa.Field
    name: str
    children: tuple[Node, ...]


@dataclass(frozen=True)
class List:
    """The file's list `name`, its elements projected by `element` (a node read from the
    list's flattened values: its `name` is unused)."""

    field: pa.Field
    name: str
    element: Node


@dataclass(frozen=True)
class Map:
    """The file's map `name`, its keys and values projected by `key` and `value`."""

    field: pa.Field
    name: str
    key: Node
    value: Node


Node = Column | Constant | Struct | List | Map


@dataclass(frozen=True)
class ColumnPlan:
    """The projection of one file: the top-level columns to read, the write schema's
    fields (`fields`, in order) and the arrow schema of the output."""

    read: tuple[str, ...]
    fields: tuple[Node, ...]
    out: pa.Schema


def project(batch: pa.RecordBatch, plan: ColumnPlan, location: str) -> pa.RecordBatch:
    """`batch` (columns `plan.read` of the file at `location`) as `plan.out`; a required
    column holding nulls is a `DataFileError`."""
    arrays = [_top(batch, node, location) for node in plan.fields]
    projected = pa.RecordBatch.from_arrays(arrays, schema=pa.schema([n.field for n in plan.fields]))
    try:
        return projected.cast(plan.out)
    except ValueError as e:  # arrow: nulls cast to a non-nullable (required) field
        raise DataFileError(f"{location}: {e} (a required column)", hint=UNREADABLE) from None


def _top(batch: pa.RecordBatch, node: Node, location: str) -> pa.Array:
    if isinstance(node, Constant):
        return _constant(node, batch.num_rows)
    return _apply(node, batch.column(node.name), location)


def _constant(node: Constant, rows: int) -> pa.Array:
    if node.value is None:
        return pa.nulls(rows, node.field.type)
    return pa.repeat(node.value, rows)


def _apply(node: Node, values: pa.Array, location: str) -> pa.Array:
    """`node` applied to `values` (the file's array of the node's field)."""
    if isinstance(node, Column):
        return values if node.cast is None else node.cast.apply(values, location)
    if isinstance(node, Constant):
        return _constant(node, len(values))
    if isinstance(node, Struct):
        return _struct(node, values, location)
    if isinstance(node, List):
        return _list(node, values, location)
    return _map(node, values, location)


def _struct(node: Struct, values: pa.Array, location: str) -> pa.Array:
    children = [_child(c, values, location) for c in node.children]
    return pa.StructArray.from_arrays(
        children,
        fields=[c.field for c in node.children],
        mask=values.is_null() if values.null_count else None,
    )


def _child(node: Node, struct: pa.Array, location: str) -> pa.Array:
    if isinstance(node, Constant):
        return _constant(node, len(struct))
    return _apply(node, struct.field(node.name), location)


def _list(node: List, values: pa.Array, location: str) -> pa.Array:
    """The list rebuilt around its projected elements, its null lists kept null."""
    elements = _apply(node.element, values.values, location)
    return pa.ListArray.from_arrays(
        values.offsets.cast(pa.int32()),
        elements,
        type=pa.list_(node.element.field),
        mask=values.is_null() if values.null_count else None,
    )


def _map(node: Map, values: pa.Array, location: str) -> pa.Array:
    """The map rebuilt around its projected keys and values, its null maps kept null."""
    keys = _apply(node.key, values.keys, location)
    items = _apply(node.value, values.items, location)
    return pa.MapArray.from_arrays(
        values.offsets,
        keys,
        items,
        type=pa.map_(node.key.field, node.value.field),
        mask=values.is_null() if values.null_count else None,
    )


__all__ = ["Cast", "Column", "ColumnPlan", "Constant", "List", "Map", "Node", "Struct", "project"]
