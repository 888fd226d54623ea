"""dvtool's table metadata writer (`dvtool.iceberg.metadata_json`) on pyiceberg-made metadata.

pyiceberg's parser is the oracle: what dvtool writes parses back to the same model, for
format versions 1, 2 and 3 (which pyiceberg 0.12 cannot write itself). The layout is Java's
(key order, `current-snapshot-id` -1 before v3 and null from v3, v1's legacy `schema` and
`partition-spec`); byte-for-byte equality with files Iceberg Java wrote is checked on the
Spark-made fixture tables (tests/reference/test_iceberg_catalog_commit.py).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from pyiceberg.table.metadata import TableMetadataUtil
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, SetSnapshotRefUpdate, update_table_metadata

from dvtool.iceberg.metadata_json import (
    GZIP_EXTENSION,
    METADATA_EXTENSION,
    file_extension,
    lost_fields,
    metadata_bytes,
    metadata_dict,
    to_json,
)
from tests.iceberg.commit_tables import new_metadata, new_path_table, rows, through_dvtool

JAVA_ORDER = [
    "format-version",
    "table-uuid",
    "location",
    "last-sequence-number",
    "last-updated-ms",
    "last-column-id",
    "current-schema-id",
    "schemas",
    "default-spec-id",
    "partition-specs",
    "last-partition-id",
    "default-sort-order-id",
    "sort-orders",
    "properties",
    "current-snapshot-id",
    "refs",
    "snapshots",
    "statistics",
    "partition-statistics",
    "snapshot-log",
    "metadata-log",
]


def with_snapshot(version: int) -> object:
    """v`version` metadata with one snapshot on main (v3: row lineage set)."""
    base = new_metadata("/tmp/t", version)
    lineage = {"first_row_id": 0, "added_rows": 7} if version >= 3 else {}
    snapshot = Snapshot(
        snapshot_id=42,
        sequence_number=1 if version > 1 else None,
        timestamp_ms=1_700_000_000_000,
        manifest_list="/tmp/t/metadata/snap-42.avro",
        summary=Summary(Operation.APPEND, **{"added-records": "7"}),
        schema_id=0,
        **lineage,
    )
    updates = (
        AddSnapshotUpdate(snapshot=snapshot),
        SetSnapshotRefUpdate(ref_name="main", type="branch", snapshot_id=42),
    )
    return update_table_metadata(base, updates)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_round_trips_through_pyiceberg(version: int) -> None:
    for metadata in (new_metadata("/tmp/t", version), with_snapshot(version)):
        parsed = TableMetadataUtil.parse_raw(metadata_bytes(metadata))  # type: ignore[arg-type]
        assert parsed.model_dump() == metadata.model_dump()  # type: ignore[attr-defined]
        assert lost_fields(metadata_bytes(metadata), parsed) == []  # type: ignore[arg-type]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_java_layout(version: int) -> None:
    empty = json.loads(to_json(new_metadata("/tmp/t", version)))
    expected = [k for k in JAVA_ORDER if version > 1 or k != "last-sequence-number"]
    if version == 1:
        expected.insert(expected.index("current-schema-id"), "schema")
        expected.insert(expected.index("default-spec-id"), "partition-spec")
    if version >= 3:
        expected.insert(expected.index("refs"), "next-row-id")
    assert list(empty) == expected
    assert empty["current-snapshot-id"] == (None if version >= 3 else -1)
    assert "identifier-field-ids" not in empty["schemas"][0]
    assert list(empty["schemas"][0]["fields"][0]) == ["id", "name", "required", "type"]
    snapshot = metadata_dict(with_snapshot(version))["snapshots"][0]  # type: ignore[arg-type]
    keys = ["sequence-number", "snapshot-id", "timestamp-ms", "summary", "manifest-list"]
    keys += ["schema-id"] + (["first-row-id", "added-rows"] if version >= 3 else [])
    assert list(snapshot) == (keys[1:] if version == 1 else keys)
    assert next(iter(snapshot["summary"])) == "operation"


def test_v3_row_lineage_fields_are_written() -> None:
    written = json.loads(to_json(with_snapshot(3)))  # type: ignore[arg-type]
    assert written["next-row-id"] == 7
    assert written["snapshots"][0]["first-row-id"] == 0
    assert written["snapshots"][0]["added-rows"] == 7


def test_v3_without_next_row_id_is_a_bug() -> None:
    metadata = new_metadata("/tmp/t", 3).model_copy(update={"next_row_id": None})
    with pytest.raises(ValueError, match="next-row-id"):
        metadata_bytes(metadata)


def test_gzip_codec() -> None:
    metadata = new_metadata("/tmp/t", 3, {"write.metadata.compression-codec": "gzip"})
    data = metadata_bytes(metadata)
    assert data[:2] == b"\x1f\x8b" and file_extension(metadata) == GZIP_EXTENSION
    assert TableMetadataUtil.parse_raw(gzip.decompress(data)).model_dump() == metadata.model_dump()
    assert file_extension(new_metadata("/tmp/t", 3)) == METADATA_EXTENSION


def test_lost_fields_names_what_pyiceberg_drops() -> None:
    metadata = with_snapshot(3)
    raw = json.loads(to_json(metadata))  # type: ignore[arg-type]
    raw["encryption-keys"] = [{"key-id": "k1", "encrypted-key-metadata": "AA=="}]
    raw["snapshots"][0]["key-id"] = "k1"
    parsed = TableMetadataUtil.parse_raw(json.dumps(raw))
    lost = lost_fields(json.dumps(raw).encode(), parsed)
    assert sorted(lost) == ["encryption-keys", "snapshots[0].key-id"]


def test_pyiceberg_written_metadata_round_trips(tmp_path: Path) -> None:
    """Metadata pyiceberg's writers produced (an append: snapshot, manifest list, summary)."""
    table = through_dvtool(new_path_table(str(tmp_path / "t"), 2))
    table.append(rows(0, 5))
    raw = Path(table.metadata_location).read_bytes()
    parsed = TableMetadataUtil.parse_raw(raw)
    assert lost_fields(raw, parsed) == []
    assert metadata_bytes(parsed) == raw  # dvtool wrote it: the same bytes again
