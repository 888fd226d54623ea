"""Type widening: which column type changes a table may have gone through, and which columns.

A table with the `typeWidening` (or `typeWidening-preview`) feature may have changed a column's
type to a wider one (PROTOCOL.md "Type Widening"); files written before the change still hold
the old type, and readers convert their values to the current type. Each change is recorded
in the `delta.typeChanges` metadata of the nearest struct field, as `{fromType, toType[,
fieldPath][, tableVersion]}`.

Readers must fail on a change they do not support (`require_supported_type_changes`). dvtool
converts values with arrow casts (`dvtool.delta.protocol.file_schema`), which are exact for every
change
below:

- integers to wider integers (byte -> short -> integer -> long);
- float -> double, and byte/short/integer -> double;
- date -> timestamp_ntz;
- decimal(p, s) -> decimal(p + k1, s + k2) with k1 >= k2 >= 0;
- byte, short, integer, long -> decimal(p, s) whose integer digits (p - s) hold every value of
  the integer type: at least 3, 5, 10 and 20 digits. PROTOCOL.md lists the 10 and 20 digit
  forms; Delta Spark (`TypeWidening.isTypeChangeSupported`) accepts any decimal wider than the
  integer's own decimal form (`DecimalType.forType`: decimal(3,0), (5,0), (10,0), (20,0)),
  and real tables hold such changes (the golden table `type-widening` has byte ->
  decimal(4,1)); the conversion is exact either way.

Statistics of files written before a change are in the old type, so `widened_columns` names the
columns whose min/max must not be used for skipping.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from dvtool.delta.protocol.schema import ArrayType, DataType, MapType, StructField, StructType
from dvtool.errors import UnsupportedFeatureError

TYPE_CHANGES_KEY = "delta.typeChanges"

_INTEGER_WIDTH = {"byte": 1, "short": 2, "integer": 3, "long": 4}
_INTEGER_DIGITS = {"byte": 3, "short": 5, "integer": 10, "long": 20}
_ALIASES = {"int": "integer", "bigint": "long", "smallint": "short", "tinyint": "byte"}
_DECIMAL = re.compile(r"^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def _normal(type_name: str) -> str:
    name = type_name.strip().lower()
    return _ALIASES.get(name, name)


def _decimal(type_name: str) -> tuple[int, int] | None:
    m = _DECIMAL.match(type_name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def is_supported_change(from_type: str, to_type: str) -> bool:
    """Whether widening `from_type` to `to_type` is a change dvtool reads exactly."""
    old, new = _normal(from_type), _normal(to_type)
    if old in _INTEGER_WIDTH and new in _INTEGER_WIDTH:
        return _INTEGER_WIDTH[old] < _INTEGER_WIDTH[new]
    if new == "double":
        return old == "float" or old in ("byte", "short", "integer")
    if (old, new) == ("date", "timestamp_ntz"):
        return True
    target = _decimal(new)
    if target is None:
        return False
    precision, scale = target
    if old in _INTEGER_DIGITS:
        return precision - scale >= _INTEGER_DIGITS[old]
    source = _decimal(old)
    if source is None:
        return False
    k1, k2 = precision - source[0], scale - source[1]
    return k1 >= k2 >= 0


def _changes(field: StructField) -> list[Mapping[str, Any]]:
    raw = field.metadata.get(TYPE_CHANGES_KEY)
    if not isinstance(raw, list):
        return []
    return [change for change in raw if isinstance(change, Mapping)]


def _fields(struct: StructType, prefix: str = "") -> Iterator[tuple[str, StructField]]:
    """Every struct field of the schema, nested ones included, with its logical path."""
    for field in struct.fields:
        path = f"{prefix}{field.name}"
        yield path, field
        yield from _nested_fields(field.type, path)


def _nested_fields(t: DataType, path: str) -> Iterator[tuple[str, StructField]]:
    if isinstance(t, StructType):
        yield from _fields(t, path + ".")
    elif isinstance(t, ArrayType):
        yield from _nested_fields(t.element_type, path + ".element")
    elif isinstance(t, MapType):
        yield from _nested_fields(t.key_type, path + ".key")
        yield from _nested_fields(t.value_type, path + ".value")


def require_supported_type_changes(schema: StructType) -> None:
    """Refuse a schema that records a type change dvtool cannot read, naming it."""
    unsupported = []
    for path, field in _fields(schema):
        for change in _changes(field):
            old, new = str(change.get("fromType")), str(change.get("toType"))
            if not is_supported_change(old, new):
                where = f"{path}.{change['fieldPath']}" if change.get("fieldPath") else path
                unsupported.append(f"{where} ({old} -> {new})")
    if unsupported:
        raise UnsupportedFeatureError(
            "the table records type changes dvtool cannot read: " + ", ".join(unsupported),
            hint="dvtool refuses to read files written before these changes rather than "
            "convert their values wrongly.",
        )


def widened_columns(schema: StructType) -> frozenset[str]:
    """Logical names of the top-level columns that hold, or contain a field that holds, a
    type change: statistics of older files are in the old type."""
    out = set()
    for field in schema.fields:
        if any(_changes(f) for _, f in _fields(StructType((field,)))):
            out.add(field.name)
    return frozenset(out)
