"""The Iceberg fixture tables (tests/reference/iceberg_tables.py) are what they claim to be.

For every table: Iceberg's Spark runtime reads the rows the builder's steps intend; the
metadata JSON has the format version and the delete files have the kind the table is for
(Parquet position deletes in v2, Puffin deletion vectors in v3, both after an upgrade,
equality deletes); the Puffin blobs decode, from the spec, to as many positions as Iceberg
counted; and two readers that share no code with Iceberg Java agree: a plain pyarrow read
that drops the deleted positions itself, and pyiceberg 0.12 (which applies v2 position
deletes and v3 deletion vectors, and refuses equality deletes: "PyIceberg does not yet
support equality deletes"). A copy made with `copy_table` reads the same from its own files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable

from tests.engines.jvm_engines import JvmError, JvmSession
from tests.reference.dv_files import iceberg_dv_blob, puffin_deletion_vectors
from tests.reference.iceberg_tables import SPECS, copy_table

NAMES = [spec.name for spec in SPECS]
# v3 data files also hold row-lineage columns (`_row_id`, ...): read the table's own.
COLUMNS = ["id", "cat", "d", "v"]
FORMAT_VERSIONS = {"v2_flat": 2, "v2_part": 2, "v3_flat": 3, "v3_part": 3, "v2_to_v3": 3}
POSITION_DELETES = (1, "PARQUET")
DELETION_VECTORS = (1, "PUFFIN")
EQUALITY_DELETES = (2, "PARQUET")
DELETE_KINDS = {
    "v2_flat": {POSITION_DELETES},
    "v2_part": {POSITION_DELETES},
    "v3_flat": {DELETION_VECTORS},
    "v3_part": {DELETION_VECTORS},
    "v2_to_v3": {POSITION_DELETES, DELETION_VECTORS},
    "v2_equality": {EQUALITY_DELETES},
}
PARTITION_TRANSFORMS = {
    "v2_flat": [],
    "v2_part": ["identity", "bucket[3]"],
    "v3_flat": [],
    "v3_part": ["identity", "day"],
    "v2_to_v3": ["identity", "bucket[3]"],
    "v2_equality": [],
}
WITHOUT_EQUALITY = [n for n in NAMES if EQUALITY_DELETES not in DELETE_KINDS[n]]


def by_id(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r["id"])


@pytest.mark.parametrize("name", NAMES)
def test_iceberg_spark_reads_the_intended_rows(
    name: str, iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    entry = iceberg_tables[name]
    assert iceberg_spark.rows(f"SELECT * FROM {entry['table']} ORDER BY id") == entry["expected"]


@pytest.mark.parametrize("name", NAMES)
def test_metadata_has_the_format_version_and_partitioning(
    name: str, iceberg_tables: dict[str, Any]
) -> None:
    metadata = json.loads(Path(iceberg_tables[name]["metadata"]).read_text())
    assert metadata["format-version"] == FORMAT_VERSIONS.get(name, 2)
    for mode in ("write.delete.mode", "write.update.mode", "write.merge.mode"):
        assert metadata["properties"][mode] == "merge-on-read"
    specs = {s["spec-id"]: s for s in metadata["partition-specs"]}
    spec = specs[metadata["default-spec-id"]]
    assert [field["transform"] for field in spec["fields"]] == PARTITION_TRANSFORMS[name]


@pytest.fixture(scope="module")
def live_files(iceberg_tables: dict[str, Any], iceberg_spark: JvmSession) -> dict[str, Any]:
    """Every table's live data files and delete files, from Iceberg's metadata tables (one
    query each per table, shared by the tests below)."""
    deletes = (
        "SELECT content, file_format, file_path, referenced_data_file, content_offset,"
        " content_size_in_bytes, record_count FROM {}.delete_files"
    )
    return {
        name: {
            "data": iceberg_spark.rows(f"SELECT file_path FROM {entry['table']}.data_files"),
            "deletes": iceberg_spark.rows(deletes.format(entry["table"])),
        }
        for name, entry in iceberg_tables.items()
    }


@pytest.mark.parametrize("name", NAMES)
def test_delete_files_are_of_the_claimed_kind(name: str, live_files: dict[str, Any]) -> None:
    kinds = {(f["content"], f["file_format"]) for f in live_files[name]["deletes"]}
    assert kinds == DELETE_KINDS[name]
    assert len(live_files[name]["data"]) > 1


@pytest.mark.parametrize("name", ["v3_flat", "v3_part", "v2_to_v3"])
def test_puffin_deletion_vectors_decode_per_spec(name: str, live_files: dict[str, Any]) -> None:
    """Each live DV: the blob at its content offset decodes to `record_count` positions, and
    the Puffin footer names the same data file and cardinality."""
    dvs = [f for f in live_files[name]["deletes"] if f["file_format"] == "PUFFIN"]
    assert dvs
    for dv in dvs:
        vectors = puffin_deletion_vectors(Path(dv["file_path"]))
        bitmap, props = vectors[dv["referenced_data_file"]]
        assert len(bitmap.positions) == dv["record_count"] == int(props["cardinality"])


def deleted_positions(delete_files: list[dict[str, Any]]) -> dict[str, set[int]]:
    """Deleted positions by data file, from Parquet position deletes and Puffin DVs (only
    the blob each live DV names: a Puffin file may also hold blobs replaced since)."""
    deleted: dict[str, set[int]] = {}
    for f in delete_files:
        if f["file_format"] == "PUFFIN":
            with open(f["file_path"], "rb") as puffin:
                puffin.seek(f["content_offset"])
                bitmap = iceberg_dv_blob(puffin.read(f["content_size_in_bytes"]))
            deleted.setdefault(f["referenced_data_file"], set()).update(bitmap.positions)
        else:
            for row in pq.read_table(f["file_path"], columns=["file_path", "pos"]).to_pylist():
                deleted.setdefault(row["file_path"], set()).add(row["pos"])
    return deleted


def plain_read(files: dict[str, Any]) -> list[dict[str, Any]]:
    """The live rows read with pyarrow: each live data file minus its deleted positions."""
    deleted = deleted_positions(files["deletes"])
    rows: list[dict[str, Any]] = []
    for f in files["data"]:
        data = pq.read_table(f["file_path"], columns=COLUMNS)
        keep = np.ones(data.num_rows, dtype=bool)
        keep[sorted(deleted.get(f["file_path"], ()))] = False
        rows += data.filter(pa.array(keep)).to_pylist()
    return by_id(rows)


@pytest.mark.parametrize("name", WITHOUT_EQUALITY)
def test_a_plain_pyarrow_read_applying_the_deletes_agrees(
    name: str, iceberg_tables: dict[str, Any], live_files: dict[str, Any]
) -> None:
    assert plain_read(live_files[name]) == iceberg_tables[name]["expected"]


@pytest.mark.parametrize("name", WITHOUT_EQUALITY)
def test_pyiceberg_reads_the_intended_rows(name: str, iceberg_tables: dict[str, Any]) -> None:
    entry = iceberg_tables[name]
    table = StaticTable.from_metadata(entry["metadata"])
    assert table.format_version == FORMAT_VERSIONS[name]
    assert by_id(table.scan().to_arrow().to_pylist()) == entry["expected"]


def test_pyiceberg_refuses_equality_deletes(iceberg_tables: dict[str, Any]) -> None:
    table = StaticTable.from_metadata(iceberg_tables["v2_equality"]["metadata"])
    with pytest.raises(ValueError, match="PyIceberg does not yet support equality deletes"):
        table.scan().to_arrow()


def test_a_copied_table_reads_the_same_from_its_own_files(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession, tmp_path: Path
) -> None:
    entry = iceberg_tables["v3_part"]
    metadata = copy_table(iceberg_spark, entry, tmp_path / "copy")
    table = StaticTable.from_metadata(str(metadata))
    assert by_id(table.scan().to_arrow().to_pylist()) == entry["expected"]
    tasks = list(table.scan().plan_files())
    paths = [t.file.file_path for t in tasks] + [d.file_path for t in tasks for d in t.delete_files]
    assert all(p.startswith(str(tmp_path / "copy")) for p in paths)
    count = "result = spark.read.format('iceberg').load(args['path']).count()"
    assert iceberg_spark.python(count, path=str(tmp_path / "copy")) == len(entry["expected"])


def test_iceberg_cannot_rewrite_the_paths_of_the_upgraded_table(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession, tmp_path: Path
) -> None:
    """Known limit of Iceberg 1.12 (copy_table's docstring): when this fails, it is fixed."""
    with pytest.raises(JvmError, match="INTERNAL_ERROR"):
        copy_table(iceberg_spark, iceberg_tables["v2_to_v3"], tmp_path / "copy")
