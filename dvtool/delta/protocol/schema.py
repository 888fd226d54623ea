"""The table schema (`metaData.schemaString`) and column mapping.

Users name columns by their logical names. With column mapping (`delta.columnMapping.mode` of
`name` or `id`), parquet files, partition values and statistics use physical names instead,
recorded per field in `delta.columnMapping.physicalName` (and `delta.columnMapping.id`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from dvtool.errors import LogError, exception_text

PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
FIELD_ID_KEY = "delta.columnMapping.id"
MAPPING_MODE_KEY = "delta.columnMapping.mode"


@dataclass(frozen=True)
class ArrayType:
    element_type: DataType
    contains_null: bool = True


@dataclass(frozen=True)
class MapType:
    key_type: DataType
    value_type: DataType
    value_contains_null: bool = True


@dataclass(frozen=True)
class StructField:
    name: str
    type: DataType
    nullable: bool = True
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def physical_name(self, mode: str) -> str:
        """The name of this field in parquet files and stats under mapping `mode`."""
        if mode == "none":
            return self.name
        return str(self.metadata.get(PHYSICAL_NAME_KEY, self.name))

    @property
    def field_id(self) -> int | None:
        value = self.metadata.get(FIELD_ID_KEY)
        return None if value is None else int(value)


@dataclass(frozen=True)
class StructType:
    fields: tuple[StructField, ...]

    def __iter__(self) -> Iterator[StructField]:
        return iter(self.fields)

    def get(self, name: str) -> StructField | None:
        """The top-level field called `name` (case-insensitive like Spark), or None."""
        for f in self.fields:
            if f.name == name:
                return f
        lowered = name.lower()
        return next((f for f in self.fields if f.name.lower() == lowered), None)


DataType = Union[str, ArrayType, MapType, StructType]  # noqa: UP007 - runtime alias on 3.10


def parse_schema(schema_string: str) -> StructType:
    """Parse `schemaString`; raises LogError when it is not a Delta struct schema."""
    try:
        parsed = json.loads(schema_string)
        result = _parse_type(parsed)
    except (ValueError, KeyError, TypeError) as e:
        raise LogError(
            f"metaData.schemaString is not a valid Delta schema: {exception_text(e)}"
        ) from None
    if not isinstance(result, StructType):
        raise LogError("metaData.schemaString is not a struct type")
    return result


def _parse_type(obj: Any) -> DataType:
    if isinstance(obj, str):
        return obj
    kind = obj["type"]
    if kind == "struct":
        return StructType(tuple(_parse_field(f) for f in obj["fields"]))
    if kind == "array":
        return ArrayType(_parse_type(obj["elementType"]), bool(obj.get("containsNull", True)))
    if kind == "map":
        return MapType(
            _parse_type(obj["keyType"]),
            _parse_type(obj["valueType"]),
            bool(obj.get("valueContainsNull", True)),
        )
    if isinstance(kind, str) and len(obj) == 1:
        return kind  # a primitive in object form, as PROTOCOL.md writes {"type": "variant"}
    raise ValueError(f"unknown type {kind!r}")


def _parse_field(obj: Mapping[str, Any]) -> StructField:
    return StructField(
        name=str(obj["name"]),
        type=_parse_type(obj["type"]),
        nullable=bool(obj.get("nullable", True)),
        metadata=dict(obj.get("metadata") or {}),
    )


def type_string(t: DataType) -> str:
    """A compact Spark-like rendering of a type, e.g. `struct<a: long, b: array<string>>`."""
    if isinstance(t, str):
        return t
    if isinstance(t, ArrayType):
        return f"array<{type_string(t.element_type)}>"
    if isinstance(t, MapType):
        return f"map<{type_string(t.key_type)}, {type_string(t.value_type)}>"
    return "struct<" + ", ".join(f"{f.name}: {type_string(f.type)}" for f in t.fields) + ">"


def column_mapping_mode(configuration: Mapping[str, str]) -> str:
    """The table's column mapping mode: `none`, `name` or `id`."""
    mode = configuration.get(MAPPING_MODE_KEY, "none").lower()
    if mode not in ("none", "name", "id"):
        raise LogError(f"unknown column mapping mode {mode!r} in {MAPPING_MODE_KEY}")
    return mode


def partition_physical_names(
    schema: StructType, partition_columns: tuple[str, ...], mode: str
) -> dict[str, str]:
    """Map each logical partition column to the key it has in `partitionValues`."""
    out: dict[str, str] = {}
    for name in partition_columns:
        f = schema.get(name)
        if f is None:
            raise LogError(f"partition column {name!r} is not in the table schema")
        out[name] = f.physical_name(mode)
    return out
