"""Rewrites of an Iceberg compatibility V2 table give arrays and maps their nested field ids.

PROTOCOL.md ("Writer Requirements for IcebergCompatV2") requires the `element` of arrays and
the `key`/`value` of maps to carry the ids listed in `delta.columnMapping.nested.ids` of their
nearest struct field, written as parquet field ids, so that Iceberg readers can resolve them.
The table is written by hand as Delta Spark writes one (protocol with `columnMapping` and
`icebergCompatV2`, name mode, files with field ids everywhere); since the compatibility
forbids deletion vectors, dvtool's rewrites are copy-on-write deletes and compaction. The
rows are checked with the independent reader of tests/oracles.py, the ids by reading the
footers of the new files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dvtool.cli import cli
from tests import oracles
from tests.writers import (
    DeltaLog,
    delta_field,
    delta_stats,
    metadata_action,
    mtime_ms,
    protocol,
)

ID = b"PARQUET:field_id"
# (logical name, physical name, Delta type, column id, nested ids)
TAGS = {"type": "array", "elementType": "string", "containsNull": True}
ATTRS = {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True}
COLUMNS: list[tuple[str, str, Any, int, dict[str, int]]] = [
    ("id", "col-1", "long", 1, {}),
    ("tags", "col-2", TAGS, 2, {"col-2.element": 10}),
    ("attrs", "col-3", ATTRS, 3, {"col-3.key": 11, "col-3.value": 12}),
]


def _fields() -> list[dict[str, Any]]:
    fields = []
    for name, physical, kind, column_id, nested in COLUMNS:
        metadata: dict[str, Any] = {
            "delta.columnMapping.id": column_id,
            "delta.columnMapping.physicalName": physical,
        }
        if nested:
            metadata["delta.columnMapping.nested.ids"] = nested
        fields.append(delta_field(name, kind, metadata=metadata))
    return fields


def _with_id(name: str, arrow_type: pa.DataType, field_id: int) -> pa.Field:
    return pa.field(name, arrow_type, metadata={ID: str(field_id).encode()})


FILE_SCHEMA = pa.schema(
    [
        _with_id("col-1", pa.int64(), 1),
        _with_id("col-2", pa.list_(_with_id("element", pa.string(), 10)), 2),
        _with_id(
            "col-3",
            pa.map_(
                pa.field("key", pa.string(), nullable=False, metadata={ID: b"11"}),
                _with_id("value", pa.int64(), 12),
            ),
            3,
        ),
    ]
)


def _rows(first: int, count: int) -> list[dict[str, Any]]:
    return [
        {"id": i, "tags": [f"t{i}", None], "attrs": [(f"k{i}", i * 10)]}
        for i in range(first, first + count)
    ]


def _data_file(table: Path, first: int, count: int) -> dict[str, Any]:
    rows = _rows(first, count)
    physical = [{"col-1": r["id"], "col-2": r["tags"], "col-3": r["attrs"]} for r in rows]
    data = pa.Table.from_pylist(physical, schema=FILE_SCHEMA)
    name = f"part-{first:05d}.snappy.parquet"
    pq.write_table(data, table / name)
    return {
        "add": {
            "path": name,
            "partitionValues": {},
            "size": (table / name).stat().st_size,
            "modificationTime": mtime_ms(table / name),
            "dataChange": True,
            "stats": delta_stats(data, _fields()[:1], mode="name", tight_bounds=None),
        }
    }


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """Two files of three rows each (ids 0-5), Iceberg compatibility V2 enabled."""
    path = tmp_path / "iceberg_v2"
    log = DeltaLog(path)
    configuration = {
        "delta.columnMapping.mode": "name",
        "delta.columnMapping.maxColumnId": "12",
        "delta.enableIcebergCompatV2": "true",
    }
    log.commit(
        [
            {"commitInfo": {"timestamp": log.now(), "operation": "CREATE TABLE"}},
            protocol(["columnMapping"], ["columnMapping", "icebergCompatV2"]),
            metadata_action(_fields(), configuration=configuration, created_time=log.now()),
            _data_file(path, 0, 3),
            _data_file(path, 3, 3),
        ]
    )
    return path


def _new_files(table: Path, before: set[str]) -> list[Path]:
    _, live = oracles.replay_json(table)
    return [table / path for path, _ in live if path not in before]


def _nested_ids(path: Path) -> dict[str, int | None]:
    schema = pq.read_schema(path)

    def field_id(f: pa.Field) -> int | None:
        return None if f.metadata is None or ID not in f.metadata else int(f.metadata[ID])

    tags = schema.field("col-2")
    attrs = schema.field("col-3")
    return {
        "col-2": field_id(tags),
        "col-2.element": field_id(tags.type.value_field),
        "col-3": field_id(attrs),
        "col-3.key": field_id(attrs.type.key_field),
        "col-3.value": field_id(attrs.type.item_field),
    }


EXPECTED_IDS = {"col-2": 2, "col-2.element": 10, "col-3": 3, "col-3.key": 11, "col-3.value": 12}


def _run(*args: str) -> None:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output


def _expected(deleted: set[int]) -> list[tuple[Any, ...]]:
    rows = [r for r in _rows(0, 6) if r["id"] not in deleted]
    return oracles.canon(rows, ["id", "tags", "attrs"])


def test_copy_on_write_delete_writes_nested_ids(table: Path) -> None:
    before = {path for path, _ in oracles.replay_json(table)[1]}
    _run("delete", str(table), "--where", "id = 1", "--mode", "cow")
    new = _new_files(table, before)
    assert len(new) == 1
    assert _nested_ids(new[0]) == EXPECTED_IDS
    assert oracles.canon(oracles.raw_rows(table), ["id", "tags", "attrs"]) == _expected({1})


def test_compaction_writes_nested_ids(table: Path) -> None:
    before = {path for path, _ in oracles.replay_json(table)[1]}
    _run("optimize", str(table))
    new = _new_files(table, before)
    assert len(new) == 1
    assert _nested_ids(new[0]) == EXPECTED_IDS
    assert oracles.canon(oracles.raw_rows(table), ["id", "tags", "attrs"]) == _expected(set())
