"""dvtool/iceberg/manifest_writers.py: the manifests and manifest lists it writes, read back
by DuckDB's Avro reader (its `read_avro`, C++, no Iceberg code shared) and checked against
the field ids of the spec's tables (spec.md "Manifests", "Manifest Lists").

Iceberg Java reading these files (Spark's metadata tables over a committed snapshot) is in
tests/reference/test_iceberg_snapshot_producer.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.avro.file import AvroFile
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.typedef import Record

from dvtool.iceberg.manifest_writers import (
    avro_codec,
    inherit_first_row_ids,
    manifest_first_row_id,
    manifest_list_writer,
    manifest_writer,
    read_manifest_list,
    v3_field,
)
from tests.iceberg.snapshot_commits import SCHEMA
from tests.iceberg_oracles import duckdb_connection

IO = PyArrowFileIO()
SNAPSHOT = 7
V3_DATA_FILE_IDS = {"first_row_id": 142, "referenced_data_file": 143, "content_offset": 144}
V3_DATA_FILE_IDS["content_size_in_bytes"] = 145


@pytest.fixture(scope="module")
def duckdb() -> Any:
    return duckdb_connection()


def read_avro(duckdb: Any, path: Path) -> list[dict[str, Any]]:
    """The records of an Avro file as DuckDB reads them."""
    cursor = duckdb.cursor()
    result = cursor.execute(f"SELECT * FROM read_avro('{path}')")
    names = [d[0] for d in result.description]
    return [dict(zip(names, row, strict=True)) for row in result.fetchall()]


def header(path: Path) -> tuple[dict[str, str], dict[str, Any]]:
    """The file's key-value metadata and its Avro schema JSON."""
    with AvroFile[Any](IO.new_input(str(path))) as reader:
        meta = dict(reader.header.meta)
    return meta, json.loads(meta["avro.schema"])


def field_ids(avro_schema: dict[str, Any], record: str) -> dict[str, int]:
    """The `field-id`s of the fields of the named record type in an Avro schema."""
    found: dict[str, int] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "record" and node.get("name") == record:
                found.update({f["name"]: f["field-id"] for f in node["fields"]})
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(avro_schema)
    return found


def data_file(path: str, content: int = 0, version: int = 3, **fields: Any) -> DataFile:
    return DataFile.from_args(
        _table_format_version=version,  # type: ignore[arg-type]
        content=DataFileContent(content),
        file_path=path,
        file_format=FileFormat.PUFFIN if "content_offset" in fields else FileFormat.PARQUET,
        partition=Record(),
        record_count=fields.pop("record_count", 3),
        file_size_in_bytes=100,
        **fields,
    )


def entry(status: int, df: DataFile, snapshot: int = SNAPSHOT, seq: int | None = None) -> Any:
    return ManifestEntry.from_args(
        status=ManifestEntryStatus(status),
        snapshot_id=snapshot,
        sequence_number=seq,
        file_sequence_number=seq,
        data_file=df,
    )


def write(tmp: Path, version: int, content: ManifestContent, entries: list[Any]) -> ManifestFile:
    output = IO.new_output(str(tmp / f"m-{version}-{int(content)}.avro"))
    writer = manifest_writer(
        version,
        content,
        UNPARTITIONED_PARTITION_SPEC,
        SCHEMA,
        output,
        SNAPSHOT,  # type: ignore[arg-type]
    )
    with writer:
        for item in entries:
            writer.add_entry(item)
    manifest: ManifestFile = writer.to_manifest_file()
    return manifest


def test_v2_delete_manifest(tmp_path: Path, duckdb: Any) -> None:
    deletes = data_file("/t/d.parquet", content=1, version=2)
    manifest = write(tmp_path, 2, ManifestContent.DELETES, [entry(1, deletes)])
    meta, _ = header(Path(manifest.manifest_path))
    assert (meta["content"], meta["format-version"]) == ("deletes", "2")
    assert manifest.content == ManifestContent.DELETES
    (row,) = read_avro(duckdb, Path(manifest.manifest_path))
    assert (row["status"], row["data_file"]["content"], row["sequence_number"]) == (1, 1, None)
    listing = tmp_path / "list.avro"
    with manifest_list_writer(2, IO.new_output(str(listing)), SNAPSHOT, None, 5) as writer:
        writer.add_manifests([manifest])
    (listed,) = read_avro(duckdb, listing)
    assert (listed["content"], listed["sequence_number"], listed["min_sequence_number"]) == (
        1,
        5,
        5,
    )


def test_v3_delete_manifest_keeps_the_deletion_vector_fields(tmp_path: Path, duckdb: Any) -> None:
    dv = data_file(
        "/t/dv.puffin",
        content=1,
        referenced_data_file="/t/a.parquet",
        content_offset=4,
        content_size_in_bytes=42,
        first_row_id=99,  # never written for a delete file
    )
    existing = data_file("/t/p.parquet", content=1, record_count=2)
    manifest = write(tmp_path, 3, ManifestContent.DELETES, [entry(1, dv), entry(0, existing, 3, 2)])
    meta, schema = header(Path(manifest.manifest_path))
    assert (meta["content"], meta["format-version"]) == ("deletes", "3")
    ids = field_ids(schema, "r2")
    assert {name: ids[name] for name in V3_DATA_FILE_IDS} == V3_DATA_FILE_IDS
    rows = read_avro(duckdb, Path(manifest.manifest_path))
    written = rows[0]["data_file"]
    assert (written["file_format"], written["referenced_data_file"]) == ("PUFFIN", "/t/a.parquet")
    assert (written["content_offset"], written["content_size_in_bytes"]) == (4, 42)
    assert written["first_row_id"] is None
    assert (rows[1]["status"], rows[1]["snapshot_id"], rows[1]["sequence_number"]) == (0, 3, 2)
    assert (manifest.added_files_count, manifest.existing_files_count) == (1, 1)
    assert manifest.min_sequence_number == 2


def test_v3_data_manifest_writes_first_row_ids(tmp_path: Path, duckdb: Any) -> None:
    added = data_file("/t/new.parquet")
    existing = data_file("/t/old.parquet", first_row_id=10, record_count=4)
    deleted = data_file("/t/gone.parquet", first_row_id=14)
    manifest = write(
        tmp_path,
        3,
        ManifestContent.DATA,
        [entry(1, added), entry(0, existing, 2, 1), entry(2, deleted, seq=1)],
    )
    meta, _ = header(Path(manifest.manifest_path))
    assert meta["content"] == "data"
    rows = read_avro(duckdb, Path(manifest.manifest_path))
    assert [r["data_file"]["first_row_id"] for r in rows] == [None, 10, 14]
    assert [r["status"] for r in rows] == [1, 0, 2]
    assert (
        manifest.added_rows_count,
        manifest.existing_rows_count,
        manifest.deleted_rows_count,
    ) == (3, 4, 3)


def test_v2_shaped_records_are_written_as_v3(tmp_path: Path, duckdb: Any) -> None:
    manifest = write(
        tmp_path, 3, ManifestContent.DATA, [entry(1, data_file("/t/a.parquet", version=2))]
    )
    (row,) = read_avro(duckdb, Path(manifest.manifest_path))
    assert row["data_file"]["file_path"] == "/t/a.parquet"
    assert row["data_file"]["first_row_id"] is None


def test_manifests_refuse_the_other_content(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="delete manifest cannot hold data file"):
        write(tmp_path, 3, ManifestContent.DELETES, [entry(1, data_file("/t/a.parquet"))])
    with pytest.raises(ValueError, match="data manifest cannot hold delete file"):
        write(tmp_path, 3, ManifestContent.DATA, [entry(1, data_file("/t/d.parquet", content=1))])
    with pytest.raises(ValueError, match="delete manifest cannot hold data file"):
        write(
            tmp_path, 2, ManifestContent.DELETES, [entry(1, data_file("/t/a.parquet", version=2))]
        )


def test_existing_entries_need_sequence_numbers(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sequence number"):
        write(tmp_path, 3, ManifestContent.DATA, [entry(0, data_file("/t/a.parquet"), snapshot=3)])


def listed(
    path: str, content: int, added: int, existing: int, first_row_id: int | None
) -> ManifestFile:
    return ManifestFile.from_args(
        _table_format_version=3,
        manifest_path=path,
        manifest_length=1,
        partition_spec_id=0,
        content=ManifestContent(content),
        sequence_number=-1 if first_row_id is None else 1,
        min_sequence_number=-1 if first_row_id is None else 1,
        added_snapshot_id=SNAPSHOT if first_row_id is None else 1,
        added_files_count=1,
        existing_files_count=1,
        deleted_files_count=0,
        added_rows_count=added,
        existing_rows_count=existing,
        deleted_rows_count=0,
        first_row_id=first_row_id,
    )


def test_v3_manifest_list_assigns_first_row_ids(tmp_path: Path, duckdb: Any) -> None:
    """As Java's V3Writer: data manifests without one get next-row-id onward, advancing by
    existing + added rows; kept ids and delete manifests are left alone."""
    manifests = [
        listed("/m/new1", 0, added=5, existing=2, first_row_id=None),
        listed("/m/old", 0, added=9, existing=0, first_row_id=100),
        listed("/m/deletes", 1, added=4, existing=0, first_row_id=None),
        listed("/m/new2", 0, added=3, existing=0, first_row_id=None),
    ]
    path = tmp_path / "snap.avro"
    writer = manifest_list_writer(3, IO.new_output(str(path)), SNAPSHOT, 1, 6, first_row_id=1000)
    with writer:
        writer.add_manifests(manifests)
    assert getattr(writer, "next_row_id") == 1010  # noqa: B009 - v3 only
    rows = read_avro(duckdb, path)
    assert [r["first_row_id"] for r in rows] == [1000, 100, None, 1007]
    assert [r["sequence_number"] for r in rows] == [6, 1, 6, 6]
    meta, schema = header(path)
    assert (meta["first-row-id"], meta["sequence-number"], meta["format-version"]) == (
        "1000",
        "6",
        "3",
    )
    assert field_ids(schema, "manifest_file")["first_row_id"] == 520
    back = read_manifest_list(IO, str(path), 3)
    assert [manifest_first_row_id(m) for m in back] == [1000, 100, None, 1007]


def test_first_row_ids_are_inherited_by_live_entries_without_one() -> None:
    manifest = listed("/m/x", 0, added=0, existing=0, first_row_id=50)
    entries = [
        entry(0, data_file("/t/a.parquet", record_count=5), seq=1),
        entry(0, data_file("/t/b.parquet", first_row_id=7), seq=1),
        entry(2, data_file("/t/c.parquet", record_count=4), seq=1),
        entry(1, data_file("/t/d.parquet", record_count=2), seq=1),
    ]
    inherit_first_row_ids(entries, manifest)
    assert [v3_field(e.data_file, "first_row_id") for e in entries] == [50, 7, None, 55]


def test_codec_names() -> None:
    assert [avro_codec(n) for n in ("gzip", "zstd", "snappy", "uncompressed")] == [
        "deflate",
        "zstandard",
        "snappy",
        "null",
    ]
    with pytest.raises(ValueError, match="lz4"):
        avro_codec("lz4")
