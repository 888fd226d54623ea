"""Paimon's file layout without IO (`dvtool.paimon.protocol`) and its Avro files.

The partition rows are bytes Paimon's Java writer put in the fixture manifests (a one-field
row holding `p0`), and rows built per the `BinaryRow` layout the spec describes (long
strings stored after the fixed part, nulls, integers, dates); partition folders follow
Paimon's `PartitionPathUtils` escaping. Manifest entries merge as Paimon's
`FileEntry.mergeEntries` does; snapshot selection is Paimon's (`scan.snapshot-id`,
`scan.timestamp-millis`). Avro files written by tests/paimon/avro_writer.py with named type
references, unions and a `timestamp-millis` field read back as written.
"""

from __future__ import annotations

import datetime as dt
import struct
from typing import Any

import pytest

from dvtool.errors import LogError, UnsupportedFeatureError, UsageError, VersionNotFoundError
from dvtool.paimon.avro_files import decode_avro, with_field_ids
from dvtool.paimon.protocol.manifests import (
    ADD,
    DELETE,
    DataFileMeta,
    ManifestEntry,
    merge_entries,
)
from dvtool.paimon.protocol.partitions import (
    decode_binary_row,
    escape_path_name,
    partition_path,
)
from dvtool.paimon.protocol.schema import DataField, TableSchema
from dvtool.paimon.protocol.snapshots import Snapshot, select_snapshot_id, snapshot_ids
from tests.paimon.avro_writer import write_avro

# The `_PARTITION` of the fixture table `pk_dv`'s partition p0, as Paimon serialized it.
P0 = bytes.fromhex("0000000100000000000000007030000000000082")


def _row(fields: list[tuple[str, Any]]) -> bytes:
    """A serialized BinaryRow per the spec: arity, null bits, 8-byte slots, then the bytes
    of strings longer than 7."""
    arity = len(fields)
    null_bytes = ((arity + 63 + 8) // 64) * 8
    nulls = bytearray(null_bytes)
    slots, tail = bytearray(), bytearray()
    for i, (kind, value) in enumerate(fields):
        if value is None:
            nulls[(i + 8) // 8] |= 1 << ((i + 8) % 8)
            slots += bytes(8)
        elif kind == "STRING" and len(value.encode()) <= 7:
            data = value.encode()
            slots += data + bytes(7 - len(data)) + bytes([0x80 | len(data)])
        elif kind == "STRING":
            data = value.encode()
            offset = null_bytes + 8 * arity + len(tail)
            slots += struct.pack("<Q", offset << 32 | len(data))
            tail += data + bytes(-len(data) % 8)
        elif kind == "DATE":
            slots += struct.pack("<i", (value - dt.date(1970, 1, 1)).days) + bytes(4)
        else:
            slots += struct.pack("<q", value)
    return struct.pack(">i", arity) + bytes(nulls) + bytes(slots) + bytes(tail)


def test_a_partition_row_paimon_wrote() -> None:
    [part] = decode_binary_row(P0, [DataField(1, "part", "STRING NOT NULL")])
    assert part == "p0"
    assert partition_path(["part"], [part]) == "part=p0"


def test_partition_rows_of_several_types_and_their_folders() -> None:
    fields = [
        DataField(0, "region", "STRING"),
        DataField(1, "day", "DATE"),
        DataField(2, "n", "BIGINT"),
        DataField(3, "gone", "VARCHAR(10)"),
    ]
    long = "a/long=value:1"
    values = decode_binary_row(
        _row([("STRING", long), ("DATE", dt.date(2024, 5, 14)), ("BIGINT", -3), ("STRING", None)]),
        fields,
    )
    assert values == (long, dt.date(2024, 5, 14), -3, None)
    keys = [f.name for f in fields]
    legacy = "region=a%2Flong%3Dvalue%3A1/day=19857/n=-3/gone=__DEFAULT_PARTITION__"
    assert partition_path(keys, values) == legacy
    assert partition_path(keys, values, "none", legacy_name=False) == (
        "region=a%2Flong%3Dvalue%3A1/day=2024-05-14/n=-3/gone=none"
    )
    assert escape_path_name("a{b}#c\x01") == "a%7Bb%7D%23c%01"


def test_partition_rows_that_do_not_fit_are_refused() -> None:
    with pytest.raises(LogError, match="holds 1 fields"):
        decode_binary_row(P0, [DataField(0, "a", "INT"), DataField(1, "b", "INT")])
    with pytest.raises(UnsupportedFeatureError, match="ARRAY"):
        decode_binary_row(_row([("BIGINT", 1)]), [DataField(0, "x", "ARRAY")])


def _entry(kind: int, name: str, level: int = 0) -> ManifestEntry:
    meta = DataFileMeta(name, 10, 1, level, 0, 0, 0, 0, None, None, (), None)
    return ManifestEntry(kind, P0, 0, 1, meta)


def test_entries_merge_in_order() -> None:
    merged = merge_entries(
        [
            _entry(ADD, "a"),
            _entry(ADD, "b"),
            _entry(DELETE, "a"),
            _entry(ADD, "a", level=1),  # the same file at another level is another file
            _entry(DELETE, "c"),
            _entry(ADD, "b"),
        ]
    )
    assert [(e.file.file_name, e.file.level) for e in merged.live] == [("b", 0), ("a", 1)]
    assert [e.file.file_name for e in merged.unmatched_deletes] == ["c"]
    assert [e.file.file_name for e in merged.duplicate_adds] == ["b"]


def test_snapshot_selection() -> None:
    ids = snapshot_ids(["EARLIEST", "LATEST", "snapshot-3", "snapshot-10", "snapshot-4", "x"])
    assert ids == [3, 4, 10]
    times = {3: 100, 4: 200, 10: 300}
    assert select_snapshot_id(ids) == 10
    assert select_snapshot_id([]) is None
    assert select_snapshot_id(ids, snapshot_id=4) == 4
    assert select_snapshot_id(ids, times, timestamp_ms=250) == 4
    assert select_snapshot_id(ids, times, timestamp_ms=300) == 10
    with pytest.raises(VersionNotFoundError, match="no snapshot 5"):
        select_snapshot_id(ids, snapshot_id=5)
    with pytest.raises(VersionNotFoundError, match="no snapshot at"):
        select_snapshot_id(ids, times, timestamp_ms=99)
    with pytest.raises(UsageError):
        select_snapshot_id(ids, times, snapshot_id=3, timestamp_ms=99)


def test_snapshot_and_schema_files() -> None:
    snapshot = Snapshot.from_json(
        '{"version": 3, "id": 6, "schemaId": 0, "baseManifestList": "b", '
        '"deltaManifestList": "d", "indexManifest": "i", "commitKind": "COMPACT", '
        '"timeMillis": 5, "totalRecordCount": 65}'
    )
    assert snapshot.manifest_lists() == ("b", "d") and snapshot.index_manifest == "i"
    with pytest.raises(LogError, match="not a Paimon snapshot"):
        Snapshot.from_json('{"id": 1}')
    old = TableSchema.from_json('{"version": 1, "id": 0, "fields": [], "primaryKeys": ["k"]}')
    assert old.bucket == 1 and old.kind == "primary-key" and not old.deletion_vectors
    assert old.target_file_size == 128 * 1024 * 1024
    append = TableSchema.from_json(
        '{"version": 3, "id": 2, "fields": [{"id": 0, "name": "a", "type": "INT"}], '
        '"options": {"deletion-vectors.enabled": "true", "target-file-size": "64 mb"}}'
    )
    assert append.bucket == -1 and append.kind == "append" and append.deletion_vectors
    assert append.target_file_size == 64 * 1024 * 1024 and not append.bitmap64


MILLIS = "timestamp-millis"


def test_avro_files_with_named_types_unions_and_logical_types() -> None:
    stats = {
        "type": "record",
        "name": "stats",
        "fields": [{"name": "_MIN", "type": "bytes"}, {"name": "_NULLS", "type": "long"}],
    }
    schema = {
        "type": "record",
        "name": "record",
        "namespace": "org.apache.paimon.avro.generated",
        "fields": [
            {"name": "_KEY_STATS", "type": stats},
            {"name": "_VALUE_STATS", "type": "stats"},  # a reference to the named type
            {
                "name": "_TIME",
                "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
            },
            {"name": "_FILES", "type": {"type": "array", "items": "string"}},
            {"name": "_RANGES", "type": ["null", {"type": "map", "values": "int"}]},
        ],
    }
    records = [
        {
            "_KEY_STATS": {"_MIN": b"\x01", "_NULLS": 0},
            "_VALUE_STATS": {"_MIN": b"", "_NULLS": 7},
            "_TIME": 1795782116046,
            "_FILES": ["a", "b"],
            "_RANGES": {"x": 1},
        },
        {
            "_KEY_STATS": {"_MIN": b"", "_NULLS": 1},
            "_VALUE_STATS": {"_MIN": b"\x02", "_NULLS": 2},
            "_TIME": None,
            "_FILES": [],
            "_RANGES": None,
        },
    ]
    assert decode_avro(write_avro(schema, records)) == records
    ids = with_field_ids(schema)
    assert [f["field-id"] for f in ids["fields"]] == [1, 4, 7, 8, 10]
    assert "logicalType" not in str(ids)


def test_a_file_that_is_not_avro_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not an Avro file"):
        decode_avro(b"not an avro file at all")
    with pytest.raises((EOFError, ValueError)):  # truncated
        decode_avro(write_avro({"type": "record", "name": "r", "fields": []}, [])[:9])
