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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.manifest import DataFileContent, FileFormat
from pyiceberg.table import StaticTable

from dvtool.iceberg.verify import PROBLEM_KINDS, IcebergVerifyReport, verify_snapshot, verify_total
from tests.engines.jvm_engines import JvmSession
from tests.iceberg.damaged_tables import DAMAGES, Copy, restored, writable_copy
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
        return damaged, verify_snapshot(loaded.metadata, loaded.current_snapshot(), loaded.io)


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
