"""`--verify` for Iceberg tables (dvtool/iceberg/verify.py) on tables Iceberg's Spark
runtime wrote, sound and damaged.

Sound: every snapshot of every fixture table (v2 position deletes, v3 deletion vectors, a
v2 table upgraded to v3, equality deletes; tests/reference/iceberg_tables.py) verifies
without a problem, and the counts of what was checked are what pyiceberg's own manifest
reader lists (`ManifestFile.fetch_manifest_entry`, not dvtool's reader): live data files,
position and equality delete files, DVs (Puffin entries). The progress callback advances
by the snapshot summary's file totals.

Damaged: one table per problem kind (tests/iceberg/damaged_tables.py says how each is
made, from a writable copy of a fixture table): verify reports exactly the kinds the
damage shows, each problem naming the damaged file, and never raises.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import DataFileContent, FileFormat
from pyiceberg.table import StaticTable

from dvtool.iceberg import verify_deletes, verify_dvs
from dvtool.iceberg.delete_index import DeleteContent, DeleteFileEntry
from dvtool.iceberg.verify import PROBLEM_KINDS, IcebergVerifyReport, verify_snapshot, verify_total
from dvtool.iceberg.verify_deletes import check_position_delete_file, field_ids
from tests.engines.jvm_engines import JvmSession
from tests.iceberg.damaged_tables import DAMAGES
from tests.iceberg.table_edits import Copy, restored, writable_copy
from tests.reference.iceberg_tables import SPECS


def pyiceberg_counts(table: StaticTable, snapshot: Any) -> tuple[int, int, int]:
    """Live data files, position and equality delete files, and DVs, as pyiceberg lists
    them."""
    counts = [0, 0, 0]
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            record = entry.data_file
            if record.content == DataFileContent.DATA:
                counts[0] += 1
            elif record.file_format == FileFormat.PUFFIN:
                counts[2] += 1
            else:
                counts[1] += 1
    return counts[0], counts[1], counts[2]


def verify_both_ways(table: StaticTable, snapshot: Any) -> IcebergVerifyReport:
    """Verify with Puffin files read whole (small files) and blob by blob (large ones):
    the same problems either way."""
    report = verify_snapshot(table.metadata, snapshot, table.io)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(verify_dvs, "WHOLE_FILE_BYTES", 0)
        by_blob = verify_snapshot(table.metadata, snapshot, table.io)
    assert by_blob == report
    return report


def check_json(report: IcebergVerifyReport) -> None:
    document = json.loads(json.dumps(report.to_json()))
    assert document["ok"] is report.ok
    assert len(document["problems"]) == len(report.problems)


@pytest.mark.parametrize("name", [spec.name for spec in SPECS])
def test_every_snapshot_of_a_spark_written_table_verifies(
    name: str, iceberg_tables: dict[str, Any]
) -> None:
    table = StaticTable.from_metadata(iceberg_tables[name]["metadata"])
    for snapshot in table.metadata.snapshots:
        advanced: list[int] = []
        report = verify_snapshot(table.metadata, snapshot, table.io, advanced.append)
        assert report.problems == [], f"snapshot {snapshot.snapshot_id}"
        assert verify_both_ways(table, snapshot) == report
        counts = pyiceberg_counts(table, snapshot)
        assert (report.files_checked, report.delete_files_checked, report.dvs_checked) == counts
        assert sum(advanced) == verify_total(snapshot) == sum(counts)
        check_json(report)


def test_a_table_without_snapshots_has_nothing_to_verify() -> None:
    report = verify_snapshot(None, None, None)  # type: ignore[arg-type]
    assert report.ok and (report.files_checked, report.dvs_checked) == (0, 0)
    assert verify_total(None) == 0


def test_every_problem_kind_has_a_damaged_table() -> None:
    shown = {kind for damage in DAMAGES.values() for kind in damage.kinds}
    assert shown == set(PROBLEM_KINDS)


@pytest.fixture(scope="module")
def copies(
    iceberg_spark: JvmSession,
    iceberg_tables: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[str], Copy]]:
    """A writable copy of a fixture table by name, made once per module; each test puts
    it back as it was (`restored`)."""
    root = tmp_path_factory.mktemp("iceberg-verify")
    made: dict[str, Copy] = {}

    def copy(name: str) -> Copy:
        if name not in made:
            made[name] = writable_copy(iceberg_spark, iceberg_tables[name], root / name)
        return made[name]

    yield copy


def verify_damaged(table: Copy, damage: Callable[[Copy], str]) -> tuple[str, IcebergVerifyReport]:
    with restored(table.root):
        damaged = damage(table)
        loaded = table.table()
        return damaged, verify_both_ways(loaded, loaded.current_snapshot())


@pytest.mark.parametrize("name", list(DAMAGES))
def test_each_damage_is_reported_with_its_kind_and_file(
    name: str, copies: Callable[[str], Copy]
) -> None:
    damage = DAMAGES[name]
    damaged, report = verify_damaged(copies(damage.base), damage.apply)
    assert {p.kind for p in report.problems} == damage.kinds, report.problems
    for problem in report.problems:
        named = (problem.data_file, problem.delete_file)
        assert damaged in named or problem.kind.startswith("manifest"), problem
        assert str(Path(damaged).name) in problem.message
    check_json(report)


def test_a_duckdb_bare_blob_dv_is_named_for_what_it_is(copies: Callable[[str], Copy]) -> None:
    damage = DAMAGES["dv-not-in-puffin"]
    damaged, report = verify_damaged(copies(damage.base), damage.apply)
    (problem,) = report.problems
    assert problem.delete_file == damaged
    assert "no Puffin container (no PFA1 magic, no footer)" in problem.message
    assert "DuckDB" in problem.message


# -- position delete files, streamed in batches (no engine) ----------------------------------

POSITION_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": b"2147483546"}),
        pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": b"2147483545"}),
    ]
)
PATHS = ("s3://b/t/data/a.parquet", "s3://b/t/data/b.parquet", "s3://b/t/data/c.parquet")


def position_delete_file(path: Path, rows: list[tuple[str, int]]) -> DeleteFileEntry:
    columns = {"file_path": [r[0] for r in rows], "pos": [r[1] for r in rows]}
    pq.write_table(pa.table(columns, schema=POSITION_SCHEMA), path, row_group_size=4)
    size = path.stat().st_size
    return DeleteFileEntry(str(path), DeleteContent.POSITION, 0, (), 1, len(rows), size)


@settings(max_examples=40)
@given(
    rows=st.lists(st.tuples(st.sampled_from(PATHS), st.integers(0, 6)), min_size=1, max_size=12),
    counts=st.tuples(*(st.integers(1, 7) for _ in PATHS)),
)
def test_order_and_positions_are_checked_across_batches(
    rows: list[tuple[str, int]], counts: tuple[int, ...]
) -> None:
    """Batches of 3 rows: the first row out of (file_path, pos) order and every data file
    with a position past its record count are found, as sorting the rows in Python says."""
    records = dict(zip(PATHS, counts, strict=True))
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        patch.setattr(verify_deletes, "BATCH_ROWS", 3)
        entry = position_delete_file(Path(folder) / "deletes.parquet", rows)
        problems = check_position_delete_file(PyArrowFileIO(), entry, "PARQUET", records)
    out_of_order = [i + 1 for i in range(len(rows) - 1) if rows[i] > rows[i + 1]]
    unsorted = [p for p in problems if p.kind == "position-delete-unsorted"]
    assert len(unsorted) == bool(out_of_order)
    if out_of_order:
        assert f"row {out_of_order[0]} (from 0) {rows[out_of_order[0]]}" in unsorted[0].message
    past = {p.data_file for p in problems if p.kind == "position-delete-row-index"}
    assert past == {path for path, pos in rows if pos >= records[path]}
    assert {p.kind for p in problems} <= {"position-delete-unsorted", "position-delete-row-index"}


def test_field_ids_are_found_in_nested_columns() -> None:
    inner = pa.field("x", pa.int64(), metadata={b"PARQUET:field_id": b"7"})
    outer = pa.field("s", pa.struct([inner]), metadata={b"PARQUET:field_id": b"6"})
    listed = pa.field(
        "l", pa.list_(pa.field("e", pa.string(), metadata={b"PARQUET:field_id": b"9"}))
    )
    assert field_ids(pa.schema([outer, listed])) == {6: "s", 7: "s", 9: "l"}
