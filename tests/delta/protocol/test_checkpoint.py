"""Checkpoint rows -> canonical tables: projection, canonical layout, stats_parsed as JSON."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dvtool.delta.protocol.checkpoint import (
    batch_from_checkpoint,
    canonical_file_table,
    checkpoint_columns,
    stats_json_from_parsed,
)
from dvtool.delta.protocol.file_actions import ADD_SCHEMA, DV_TYPE, REMOVE_SCHEMA, STRING_MAP
from dvtool.errors import LogError

# A DV struct as Delta Spark writes it in checkpoints: with `maxRowIndex`.
SPARK_DV = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
        ("maxRowIndex", pa.int64()),
    ]
)
STATS_PARSED = pa.struct(
    [
        ("numRecords", pa.int64()),
        ("minValues", pa.struct([("id", pa.int64())])),
        ("tightBounds", pa.bool_()),
    ]
)


def add_struct(*extra: tuple[str, pa.DataType]) -> pa.DataType:
    return pa.struct(
        [
            ("path", pa.string()),
            ("partitionValues", STRING_MAP),
            ("size", pa.int64()),
            ("modificationTime", pa.int64()),
            ("dataChange", pa.bool_()),
            *extra,
        ]
    )


PROTOCOL = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", pa.list_(pa.string())),
        ("writerFeatures", pa.list_(pa.string())),
    ]
)
METADATA = pa.struct(
    [
        ("id", pa.string()),
        ("schemaString", pa.string()),
        ("partitionColumns", pa.list_(pa.string())),
        ("configuration", STRING_MAP),
        ("createdTime", pa.int64()),
    ]
)
TXN = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
REMOVE = pa.struct(
    [
        ("path", pa.string()),
        ("deletionTimestamp", pa.int64()),
        ("dataChange", pa.bool_()),
        ("deletionVector", SPARK_DV),
    ]
)


# -- checkpoint_columns ----------------------------------------------------------------------


def test_columns_only_existing_fields() -> None:
    schema = pa.schema(
        [
            ("txn", TXN),
            ("add", add_struct(("stats", pa.string()), ("deletionVector", SPARK_DV))),
            ("remove", REMOVE),
            ("metaData", METADATA),
            ("protocol", PROTOCOL),
            ("commitInfo", pa.struct([("operation", pa.string())])),
        ]
    )
    assert checkpoint_columns(schema) == [
        "protocol",
        "metaData",
        "txn",
        "add.path",
        "add.partitionValues",
        "add.size",
        "add.modificationTime",
        "add.dataChange",
        "add.stats",
        "add.deletionVector",
        "remove.path",
        "remove.deletionTimestamp",
        "remove.dataChange",
        "remove.deletionVector",
    ]


def test_columns_skip_parsed_fields_but_keep_unknown_ones_when_stats_present() -> None:
    add = add_struct(
        ("stats", pa.string()),
        ("stats_parsed", STATS_PARSED),
        ("partitionValues_parsed", pa.struct([("part", pa.int32())])),
        ("someFutureField", pa.string()),
    )
    columns = checkpoint_columns(pa.schema([("add", add)]))
    assert "add.stats" in columns
    assert not any("parsed" in c for c in columns)
    assert "add.someFutureField" in columns  # carried along in extraFields


def test_columns_read_stats_parsed_only_without_stats() -> None:
    columns = checkpoint_columns(pa.schema([("add", add_struct(("stats_parsed", STATS_PARSED)))]))
    assert columns[-1] == "add.stats_parsed"
    assert "add.stats" not in columns


def test_columns_of_sidecar_and_v2_checkpoint() -> None:
    sidecar = pa.struct([("path", pa.string()), ("sizeInBytes", pa.int64())])
    schema = pa.schema(
        [
            ("checkpointMetadata", pa.struct([("version", pa.int64())])),
            ("sidecar", sidecar),
            ("domainMetadata", pa.struct([("domain", pa.string())])),
        ]
    )
    assert checkpoint_columns(schema) == ["domainMetadata", "sidecar", "checkpointMetadata"]
    assert checkpoint_columns(pa.schema([("add", pa.struct([("path", pa.string())]))])) == [
        "add.path"
    ]


def test_columns_work_as_parquet_projection(tmp_path: Path) -> None:
    """The dotted names select nested columns when pyarrow reads the checkpoint."""
    add = add_struct(("stats_parsed", STATS_PARSED), ("deletionVector", SPARK_DV))
    rows = [
        {"add": None, "protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "add": {
                "path": "a.parquet",
                "partitionValues": [("p", "1")],
                "size": 10,
                "modificationTime": 1,
                "dataChange": False,
                "stats_parsed": {"numRecords": 4, "minValues": {"id": 1}, "tightBounds": True},
                "deletionVector": None,
            },
            "protocol": None,
        },
    ]
    path = tmp_path / "00000000000000000001.checkpoint.parquet"
    pq.write_table(
        pa.Table.from_pylist(rows, pa.schema([("add", add), ("protocol", PROTOCOL)])), path
    )
    parquet = pq.ParquetFile(path)
    table = parquet.read(columns=checkpoint_columns(parquet.schema_arrow))
    batch = batch_from_checkpoint(table, 1, path.name)
    assert batch.protocol == {"minReaderVersion": 1, "minWriterVersion": 2}
    assert batch.add_table is not None
    assert batch.add_table.to_pylist()[0] | {"stats": None} == {
        "path": "a.parquet",
        "partitionValues": [("p", "1")],
        "size": 10,
        "modificationTime": 1,
        "dataChange": False,
        "stats": None,
        "tags": None,
        "deletionVector": None,
        "baseRowId": None,
        "defaultRowCommitVersion": None,
        "clusteringProvider": None,
        "extraFields": None,
    }
    stats = json.loads(batch.add_table.column("stats")[0].as_py())
    assert stats == {"numRecords": 4, "minValues": {"id": 1}, "tightBounds": True}


# -- canonical_file_table --------------------------------------------------------------------


def dv(card: int, offset: int | None = 1) -> dict[str, object]:
    return {
        "storageType": "u",
        "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
        "offset": offset,
        "sizeInBytes": 34,
        "cardinality": card,
        "maxRowIndex": 99,
    }


def test_canonical_add_drops_max_row_index_and_fills_absent_columns() -> None:
    add = add_struct(("stats", pa.string()), ("deletionVector", SPARK_DV))
    rows = pa.array(
        [
            {"path": "a", "size": 1, "deletionVector": dv(3), "stats": '{"numRecords":5}'},
            {"path": "b", "size": 2, "deletionVector": None, "stats": None},
        ],
        add,
    )
    table = canonical_file_table(rows, ADD_SCHEMA)
    assert table.schema == ADD_SCHEMA
    assert table.column("deletionVector").type == DV_TYPE
    dvs = table.column("deletionVector").to_pylist()
    assert dvs[0] == {k: v for k, v in dv(3).items() if k != "maxRowIndex"}
    assert dvs[1] is None
    for name in ("tags", "baseRowId", "defaultRowCommitVersion", "clusteringProvider"):
        assert table.column(name).null_count == 2, name
        assert table.column(name).type == ADD_SCHEMA.field(name).type
    assert table.column("extraFields").to_pylist() == [None, None]
    assert table.column("stats").to_pylist() == ['{"numRecords":5}', None]


def test_canonical_remove_table() -> None:
    rows = pa.array(
        [{"path": "a", "deletionTimestamp": 7, "dataChange": True, "deletionVector": dv(2)}],
        REMOVE,
    )
    table = canonical_file_table(rows, REMOVE_SCHEMA)
    assert table.schema == REMOVE_SCHEMA
    row = table.to_pylist()[0]
    assert (row["path"], row["deletionTimestamp"], row["size"]) == ("a", 7, None)
    assert "maxRowIndex" not in row["deletionVector"]


def test_canonical_casts_to_canonical_types() -> None:
    """Writers differ in integer widths: DV offset/sizeInBytes as long, size as int."""
    wide_dv = pa.struct(
        [
            ("storageType", pa.string()),
            ("pathOrInlineDv", pa.string()),
            ("offset", pa.int64()),
            ("sizeInBytes", pa.int64()),
            ("cardinality", pa.int32()),
        ]
    )
    add = pa.struct([("path", pa.string()), ("size", pa.int32()), ("deletionVector", wide_dv)])
    value = {k: v for k, v in dv(3).items() if k != "maxRowIndex"}
    table = canonical_file_table(
        pa.array([{"path": "a", "size": 5, "deletionVector": value}], add), ADD_SCHEMA
    )
    assert table.schema == ADD_SCHEMA
    assert table.column("size").to_pylist() == [5]
    assert table.column("deletionVector").to_pylist() == [value]


def test_canonical_dv_without_optional_offset() -> None:
    no_offset = pa.struct(
        [
            ("storageType", pa.string()),
            ("pathOrInlineDv", pa.string()),
            ("sizeInBytes", pa.int32()),
            ("cardinality", pa.int64()),
        ]
    )
    inline = {
        "storageType": "i",
        "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
        "sizeInBytes": 40,
        "cardinality": 6,
    }
    add = pa.struct([("path", pa.string()), ("deletionVector", no_offset)])
    table = canonical_file_table(
        pa.array([{"path": "a", "deletionVector": inline}, {"path": "b"}], add), ADD_SCHEMA
    )
    assert table.column("deletionVector").to_pylist() == [inline | {"offset": None}, None]


def test_canonical_chunked_and_empty_inputs() -> None:
    add = pa.struct([("path", pa.string()), ("size", pa.int64())])
    one = pa.array([{"path": "a", "size": 1}], add)
    two = canonical_file_table(pa.chunked_array([one, one]), ADD_SCHEMA)
    assert two.column("path").to_pylist() == ["a", "a"]
    empty = canonical_file_table(pa.chunked_array([], add), ADD_SCHEMA)
    assert (empty.num_rows, empty.schema) == (0, ADD_SCHEMA)


def test_canonical_uncastable_column_is_a_log_error() -> None:
    add = pa.struct([("path", pa.string()), ("size", pa.list_(pa.int64()))])
    with pytest.raises(LogError, match="'size'"):
        canonical_file_table(pa.array([{"path": "a", "size": [1]}], add), ADD_SCHEMA)


# -- stats_json_from_parsed ------------------------------------------------------------------


def test_stats_json_from_parsed() -> None:
    min_values = pa.struct(
        [
            ("d", pa.date32()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("ts_ny", pa.timestamp("ms", tz="America/New_York")),
            ("ntz", pa.timestamp("us")),
            ("nested", pa.struct([("x", pa.int32()), ("y", pa.string())])),
            ("dec", pa.decimal128(5, 2)),
            ("s", pa.string()),
            ("f", pa.float64()),
        ]
    )
    parsed_type = pa.struct(
        [
            ("numRecords", pa.int64()),
            ("minValues", min_values),
            ("nullCount", pa.struct([("s", pa.int64())])),
            ("tightBounds", pa.bool_()),
        ]
    )
    utc = dt.timezone.utc
    row = {
        "numRecords": 3,
        "minValues": {
            "d": dt.date(2024, 1, 2),
            "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=utc),
            "ts_ny": dt.datetime(2024, 1, 2, 3, 4, 5, 120000, tzinfo=utc),
            "ntz": dt.datetime(2024, 1, 2, 3, 4, 5, 100000),
            "nested": {"x": 1, "y": None},
            "dec": decimal.Decimal("1.25"),
            "s": None,
            "f": 0.5,
        },
        "nullCount": {"s": 3},
        "tightBounds": True,
    }
    texts = stats_json_from_parsed(pa.array([row, None], parsed_type)).to_pylist()
    assert texts[1] is None
    assert texts[0] == (
        '{"numRecords":3,"minValues":{"d":"2024-01-02","ts":"2024-01-02T03:04:05.123Z",'
        '"ts_ny":"2024-01-02T03:04:05.120Z","ntz":"2024-01-02T03:04:05.100",'
        '"nested":{"x":1},"dec":1.25,"f":0.5},"nullCount":{"s":3},"tightBounds":true}'
    )


def test_stats_json_drops_null_fields() -> None:
    parsed_type = pa.struct(
        [("numRecords", pa.int64()), ("minValues", pa.struct([("a", pa.int64())]))]
    )
    texts = stats_json_from_parsed(
        pa.array([{"numRecords": None, "minValues": None}, {"numRecords": 2}], parsed_type)
    ).to_pylist()
    assert texts == ["{}", '{"numRecords":2}']


def test_unknown_add_fields_in_checkpoints_are_carried_in_extra_fields() -> None:
    """A field a newer writer put into checkpoint adds survives like it does from JSON."""
    add_type = pa.struct(
        [
            ("path", pa.string()),
            ("size", pa.int64()),
            ("futureField", pa.struct([("x", pa.int64())])),
            ("stats_parsed", pa.struct([("numRecords", pa.int64())])),
        ]
    )
    rows = pa.array(
        [
            {"path": "a", "size": 1, "futureField": {"x": 7}, "stats_parsed": {"numRecords": 3}},
            {"path": "b", "size": 2, "futureField": None, "stats_parsed": None},
        ],
        add_type,
    )
    schema = pa.schema([("add", add_type)])
    assert "add.futureField" in checkpoint_columns(schema)
    table = canonical_file_table(rows, ADD_SCHEMA)
    assert table.column("extraFields").to_pylist() == ['{"futureField":{"x":7}}', None]


METADATA = pa.struct(
    [
        ("id", pa.string()),
        ("schemaString", pa.string()),
        ("partitionColumns", pa.list_(pa.string())),
        ("configuration", pa.map_(pa.string(), pa.string())),
        ("futureMetadataField", pa.string()),
    ]
)


def _checkpoint(tmp_path: Path, rows: list[dict[str, object]], schema: pa.Schema) -> pa.Table:
    path = tmp_path / "00000000000000000003.checkpoint.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema), path)
    parquet = pq.ParquetFile(path)
    return parquet.read(columns=checkpoint_columns(parquet.schema_arrow))


def test_checkpoint_protocol_and_metadata_wait_for_the_replay(tmp_path: Path) -> None:
    """An incomplete metaData row (no schemaString) is kept as logged, not refused: a later
    commit may replace it. Unknown top-level columns and struct fields are ignored."""
    schema = pa.schema(
        [("metaData", METADATA), ("protocol", PROTOCOL), ("futureAction", pa.string())]
    )
    rows: list[dict[str, object]] = [
        {"metaData": {"id": "t", "configuration": [], "futureMetadataField": "f"}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"futureAction": "whatever"},
    ]
    table = _checkpoint(tmp_path, rows, schema)
    assert "futureAction" not in table.column_names
    batch = batch_from_checkpoint(table, 3, "00000000000000000003.checkpoint.parquet")
    assert batch.metadata == {"id": "t", "configuration": {}, "futureMetadataField": "f"}
    assert batch.protocol == {"minReaderVersion": 1, "minWriterVersion": 2}


def test_malformed_checkpoint_rows_name_the_missing_field_once(tmp_path: Path) -> None:
    schema = pa.schema([("domainMetadata", pa.struct([("configuration", pa.string())]))])
    table = _checkpoint(tmp_path, [{"domainMetadata": {"configuration": "{}"}}], schema)
    with pytest.raises(LogError) as info:
        batch_from_checkpoint(table, 3, "00000000000000000003.checkpoint.parquet")
    message = info.value.message
    assert "malformed 'domainMetadata' row (missing field 'domain')" in message
    assert "''" not in message
