"""A Paimon table's folder without a JVM: a table before its first commit (only
`schema/schema-0`, as Paimon's `createTable` leaves it), damaged snapshot files, and where
the paths a manifest holds live.

The schema file is the example of the spec (`schema.md`); the tables Paimon's Java writer
builds are tested in tests/reference/test_paimon_inspect.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dvtool.paimon.tables import PaimonTable
from dvtool.storage.table_storage import Storage
from dvtool.table import detect_format
from tests.cli_helpers import all_output, run
from tests.reference.iceberg_writes import cli_json

SCHEMA = """{
  "version" : 3,
  "id" : 0,
  "fields" : [ {
    "id" : 0, "name" : "order_id", "type" : "BIGINT NOT NULL"
  }, {
    "id" : 1, "name" : "order_name", "type" : "STRING"
  } ],
  "highestFieldId" : 1,
  "partitionKeys" : [ ],
  "primaryKeys" : [ "order_id" ],
  "options" : { "bucket" : "5", "deletion-vectors.enabled" : "true" },
  "comment" : "",
  "timeMillis" : 1720496663041
}"""


def _created(root: Path) -> Path:
    (root / "schema").mkdir(parents=True)
    (root / "schema" / "schema-0").write_text(SCHEMA)
    return root


def test_a_table_before_its_first_commit(tmp_path: Path) -> None:
    table = _created(tmp_path / "orders")
    assert detect_format(str(table)) == "paimon"
    doc = cli_json("inspect", table, "--verify", "--files")
    assert doc["format"] == "paimon" and doc["snapshot_id"] is None
    assert doc["table_kind"] == "primary-key" and doc["bucket"] == 5
    assert doc["num_files"] == doc["logical_rows"] == 0 and doc["files"] == []
    assert doc["verify"]["ok"]
    assert cli_json("inspect", table, "--history")["history"] == []
    missing = run("inspect", table, "--version", "1")
    assert missing.exit_code == 5 and "has no snapshot 1" in all_output(missing)


def test_a_snapshot_file_that_is_not_one_is_named(tmp_path: Path) -> None:
    table = _created(tmp_path / "orders")
    (table / "snapshot").mkdir()
    (table / "snapshot" / "snapshot-1").write_text('{"id": 1}')
    (table / "snapshot" / "LATEST").write_text("1")
    result = run("inspect", table)
    assert result.exit_code == 6
    assert "not a Paimon snapshot file" in all_output(result)
    assert "snapshot-1" in all_output(result)


def test_a_folder_with_a_schema_folder_but_no_schema_file_is_no_table(tmp_path: Path) -> None:
    (tmp_path / "schema").mkdir()
    (tmp_path / "schema" / "notes.txt").write_text("not a schema")
    result = run("inspect", tmp_path)
    assert result.exit_code == 5 and "Paimon" in all_output(result)


@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("bucket-0/data-1.parquet", "{root}/bucket-0/data-1.parquet"),
        ("file:/elsewhere/data-1.parquet", "/elsewhere/data-1.parquet"),
        ("file:///elsewhere/data-1.parquet", "/elsewhere/data-1.parquet"),
        ("/elsewhere/data-1.parquet", "/elsewhere/data-1.parquet"),
        ("s3://bucket/ext/data-1.parquet", "s3://bucket/ext/data-1.parquet"),
    ],
)
def test_where_a_manifest_path_lives(tmp_path: Path, path: str, location: str) -> None:
    table = PaimonTable(Storage.for_table(str(_created(tmp_path / "t"))))
    assert table.location_of(path) == location.format(root=table.location)


def test_without_pyiceberg_a_paimon_table_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _created(tmp_path / "orders")
    monkeypatch.setitem(sys.modules, "pyiceberg.avro", None)  # import fails as if absent
    result = run("inspect", table)
    assert result.exit_code == 2
    assert "needs pyiceberg" in all_output(result) and "dvtool[paimon]" in all_output(result)
