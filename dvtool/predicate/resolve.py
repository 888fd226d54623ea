"""Resolving `--where` column references against the table schema, field metadata included.

Names resolve like Spark's: case insensitively with exact matches first (`StructType.get`),
through struct fields for dotted names. Tables other writers create carry columns dvtool
cannot treat as plain values; their Delta field metadata decides what a predicate may do:

- variant columns (type `variant`, PROTOCOL.md "Variant Data Type") hold semi-structured
  values dvtool does not evaluate: a reference to one, or to a path under one, is refused;
- strings with a non-binary collation (`__COLLATIONS` field metadata, Delta's
  `collations-preview` feature: `{"<field>": "spark.UTF8_LCASE"}`, keyed by the field's name
  or `<field>.element` / `.key` / `.value` paths) compare by their collation, while dvtool
  compares byte-wise: only IS [NOT] NULL may test them, and their min/max are never used;
- a column with a type change (`delta.typeChanges` on it or on any field nested in it,
  PROTOCOL.md "Type Widening") has min/max statistics in the old type in files written
  before the change (a date for a timestamp_ntz; the float 3.3 printed as 3.3, while as a
  double it is 3.299999952316284), so skipping uses only its nullCount.

The last two rules clear `Column.min_max`; the skipping code then reads nullCount only.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping, Sequence

from sqlglot import exp

from dvtool.delta.protocol.schema import (
    ArrayType,
    DataType,
    MapType,
    StructField,
    StructType,
    type_string,
)
from dvtool.errors import PredicateError
from dvtool.predicate.sqltypes import from_delta
from dvtool.predicate.syntax import name_parts
from dvtool.predicate.tree import Column

VARIANT_TYPE = "variant"
TYPE_CHANGES_KEY = "delta.typeChanges"
COLLATIONS_KEY = "__COLLATIONS"
BINARY_COLLATION = "UTF8_BINARY"
_SPARK_PROVIDER = "spark"


def quote(name: str) -> str:
    """A name as the user may type it: bare when it is an identifier, else backquoted."""
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f"`{name}`"


def backquoted(path: Sequence[str]) -> str:
    """A column path in backquotes, Spark style: `a`.`b`."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in path)


# --- field metadata rules -------------------------------------------------------------------


def is_binary_collation(identifier: str) -> bool:
    """Whether a collation identifier (`provider.name[.version]`) is byte-wise UTF8_BINARY."""
    parts = identifier.strip().split(".")
    if len(parts) == 1:
        return parts[0].upper() == BINARY_COLLATION
    return parts[0].lower() == _SPARK_PROVIDER and parts[1].upper() == BINARY_COLLATION


def collation(field: StructField) -> str | None:
    """The non-binary collation of a field's strings, or None when they compare byte-wise.

    The field's own entry in `__COLLATIONS` decides for a string field; without one, any
    non-binary entry (of array elements, map keys or values) counts, and so does metadata of
    an unknown form: dvtool never assumes byte-wise comparison it cannot confirm.
    """
    raw = field.metadata.get(COLLATIONS_KEY)
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        return str(raw)
    own = raw.get(field.name)
    identifiers = [str(own)] if own is not None else [str(v) for v in raw.values()]
    return next((i for i in identifiers if not is_binary_collation(i)), None)


def _nested_fields(t: DataType) -> Iterator[StructField]:
    """The struct fields nested in a type, through structs, arrays and maps."""
    if isinstance(t, StructType):
        for f in t.fields:
            yield f
            yield from _nested_fields(f.type)
    elif isinstance(t, ArrayType):
        yield from _nested_fields(t.element_type)
    elif isinstance(t, MapType):
        yield from _nested_fields(t.key_type)
        yield from _nested_fields(t.value_type)


def has_type_changes(field: StructField) -> bool:
    """Whether the field or a field nested in it records a type change (an empty list does
    not; anything else, even malformed, does)."""
    fields = [field, *_nested_fields(field.type)]
    return any(f.metadata.get(TYPE_CHANGES_KEY) not in (None, []) for f in fields)


def variant_error(path: Sequence[str]) -> PredicateError:
    return PredicateError(
        f"column {backquoted(path)} is a variant; --where cannot compare variant values "
        "(dvtool does not evaluate variant expressions)",
        hint="select the rows by other columns, or delete them with Spark SQL (variant_get)",
    )


def collation_error(path: Sequence[str], name: str) -> PredicateError:
    return PredicateError(
        f"dvtool compares strings byte-wise (UTF8_BINARY); column {backquoted(path)} uses "
        f"collation {name}",
        hint="only IS [NOT] NULL can test it: select the rows by other columns, "
        "or delete them with Spark SQL",
    )


# --- resolution -----------------------------------------------------------------------------


class ColumnResolver:
    """Binds column names to `Column` nodes for one table schema (see the module docstring)."""

    def __init__(
        self, schema: StructType, partition_columns: Sequence[str], column_mapping_mode: str
    ) -> None:
        self.schema = schema
        self.partitions = {name.lower() for name in partition_columns}
        self.mode = column_mapping_mode

    def resolve(self, parts: Sequence[str], *, null_test: bool = False) -> Column:
        """The column `parts` names. `null_test`: the reference is only tested for NULL, which
        a collated string allows. Raises PredicateError."""
        top = self.schema.get(parts[0])
        if top is None:
            raise PredicateError(
                f"unknown column {quote(parts[0])}", hint=self._available(parts[0])
            )
        fields = self._walk(top, parts[1:])
        path = tuple(f.name for f in fields)
        leaf_collation = collation(fields[-1])
        if leaf_collation is not None and not null_test:
            raise collation_error(path, leaf_collation)
        return Column(
            path,
            tuple(f.physical_name(self.mode) for f in fields),
            from_delta(fields[-1].type),
            partition=len(path) == 1 and top.name.lower() in self.partitions,
            min_max=leaf_collation is None and not has_type_changes(top),
        )

    def refuse_variants_in(self, node: exp.Expr) -> None:
        """Raise the variant error when a construct dvtool does not support (`payload['a']`,
        `variant_get(payload, ...)`) reads a variant column: it says more than "unsupported"."""
        for ref in node.find_all(exp.Column, exp.Dot):
            parts = name_parts(ref)
            top = None if parts is None else self.schema.get(parts[0])
            if parts is not None and top is not None:
                _refuse_variant(_fields_along(top, parts[1:]))

    def _walk(self, top: StructField, rest: Sequence[str]) -> list[StructField]:
        """The fields along a dotted path; refuses variants and paths through non-structs."""
        fields = _fields_along(top, rest)
        _refuse_variant(fields)
        if len(fields) > len(rest):
            return fields
        field, part = fields[-1], rest[len(fields) - 1]
        shown = ".".join(quote(f.name) for f in fields)
        if not isinstance(field.type, StructType):
            raise PredicateError(
                f"{shown} is {type_string(field.type)}, it has no field {quote(part)}"
            )
        raise PredicateError(
            f"struct column {shown} has no field {quote(part)}",
            hint=f"its fields: {', '.join(quote(f.name) for f in field.type)}",
        )

    def _available(self, name: str) -> str:
        names = [f.name for f in self.schema]
        close = difflib.get_close_matches(name.lower(), [n.lower() for n in names], n=1)
        suggestion = next((n for n in names if close and n.lower() == close[0]), None)
        listed = ", ".join(quote(n) for n in names[:40]) + (", ..." if len(names) > 40 else "")
        did_you_mean = f"did you mean {quote(suggestion)}? " if suggestion else ""
        return f"{did_you_mean}available columns: {listed}"


def _fields_along(top: StructField, rest: Sequence[str]) -> list[StructField]:
    """The fields a dotted path passes through, as far as it resolves."""
    fields = [top]
    for part in rest:
        parent = fields[-1].type
        child = parent.get(part) if isinstance(parent, StructType) else None
        if child is None:
            break
        fields.append(child)
    return fields


def _refuse_variant(fields: Sequence[StructField]) -> None:
    """Raise the variant error when a field along a path is a variant."""
    for i, f in enumerate(fields):
        if f.type == VARIANT_TYPE:
            raise variant_error([g.name for g in fields[: i + 1]])
