"""Delta types as the arrow schema of data files: physical names and parquet field ids.

The nested-ids schema is PROTOCOL.md's own example ("Example of storing identifiers for
nested fields in ArrayType and MapType"); the ids are read back from the footer of a parquet
file written with the schema.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dvtool.delta.protocol.arrow_types import arrow_schema
from dvtool.delta.protocol.schema import parse_schema


def _mapped(name: str, data_type: Any, column_id: int, nested: dict[str, int]) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "delta.columnMapping.id": column_id,
        "delta.columnMapping.physicalName": f"col-{name}",
    }
    if nested:
        metadata["delta.columnMapping.nested.ids"] = nested
    return {"name": name, "type": data_type, "nullable": True, "metadata": metadata}


def protocol_example() -> str:
    """The schema of PROTOCOL.md's example, physical names `col-<name>`."""
    int_array = {"type": "array", "elementType": "integer", "containsNull": True}
    subcol = _mapped("subcol1", int_array, 4, {"col-subcol1.element": 107})
    fields = [
        _mapped(
            "col1",
            {"type": "array", "elementType": int_array, "containsNull": True},
            1,
            {"col-col1.element": 100, "col-col1.element.element": 101},
        ),
        _mapped(
            "col2",
            {
                "type": "map",
                "keyType": "integer",
                "valueType": int_array,
                "valueContainsNull": True,
            },
            2,
            {"col-col2.key": 102, "col-col2.value": 103, "col-col2.value.element": 104},
        ),
        _mapped(
            "col3",
            {
                "type": "map",
                "keyType": "integer",
                "valueType": {"type": "struct", "fields": [subcol]},
                "valueContainsNull": True,
            },
            3,
            {"col-col3.key": 105, "col-col3.value": 106},
        ),
    ]
    return json.dumps({"type": "struct", "fields": fields})


def parquet_field_ids(path: Path) -> dict[str, int]:
    """Every parquet schema element's dotted path -> its field_id, from the file's footer."""
    schema = pq.ParquetFile(path).schema
    ids: dict[str, int] = {}
    for i in range(len(schema)):
        column = schema.column(i)
        node_path = column.path.split(".")
        for depth in range(1, len(node_path) + 1):
            prefix = ".".join(node_path[:depth])
            ids.setdefault(prefix, _field_id(schema, node_path[:depth]))
    return {k: v for k, v in ids.items() if v >= 0}


def _field_id(schema: pq.ParquetSchema, parts: list[str]) -> int:
    node = schema.to_arrow_schema().field(parts[0])
    for part in parts[1:]:
        node = _child(node.type, part)
    raw = (node.metadata or {}).get(b"PARQUET:field_id")
    return -1 if raw is None else int(raw)


def _child(arrow_type: pa.DataType, name: str) -> pa.Field:
    if isinstance(arrow_type, pa.MapType):
        if name == "key_value":
            return pa.field("key_value", pa.struct([arrow_type.key_field, arrow_type.item_field]))
        return arrow_type.key_field if name == "key" else arrow_type.item_field
    if isinstance(arrow_type, pa.ListType):
        if name == "list":
            return pa.field("list", pa.struct([arrow_type.value_field]))
        return arrow_type.value_field
    assert isinstance(arrow_type, pa.StructType)
    return arrow_type.field(name)


def test_nested_ids_reach_the_parquet_file(tmp_path: Path) -> None:
    schema = arrow_schema(parse_schema(protocol_example()), "name", [])
    path = tmp_path / "f.parquet"
    pq.write_table(schema.empty_table(), path)
    assert parquet_field_ids(path) == {
        "col-col1": 1,
        "col-col1.list.element": 100,
        "col-col1.list.element.list.element": 101,
        "col-col2": 2,
        "col-col2.key_value.key": 102,
        "col-col2.key_value.value": 103,
        "col-col2.key_value.value.list.element": 104,
        "col-col3": 3,
        "col-col3.key_value.key": 105,
        "col-col3.key_value.value": 106,
        "col-col3.key_value.value.col-subcol1": 4,
        "col-col3.key_value.value.col-subcol1.list.element": 107,
    }


def test_without_nested_ids_elements_have_none() -> None:
    int_array = {"type": "array", "elementType": "integer", "containsNull": True}
    text = json.dumps({"type": "struct", "fields": [_mapped("a", int_array, 1, {})]})
    element = arrow_schema(parse_schema(text), "id", []).field("col-a").type.value_field
    assert element.metadata is None


def test_no_mapping_means_no_ids() -> None:
    schema = arrow_schema(parse_schema(protocol_example()), "none", [])
    assert schema.names == ["col1", "col2", "col3"]
    assert schema.field("col1").type.value_field.metadata is None
