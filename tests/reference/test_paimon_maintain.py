"""`dvtool maintain` on a prefix of Paimon tables written by Paimon's Java API.

The lake: copies of every fixture table (tests/reference/paimon_tables.py) in the folder
Paimon's filesystem catalog gives a database (`fixtures.db`), every file dated two days
back and the strays of test_paimon_vacuum.py planted (orphans, leftovers of failed
commits, files that must stay). Oracles, Paimon's own:

- the vacuum step lists (dry run) and deletes exactly what Paimon's `LocalOrphanFilesClean`
  would delete at the same cutoff;
- the inspect step's deleted ratio is what Paimon's reader sees (the cardinalities of the
  DVs of the files its splits read, over their rows), and the small-files gate allows one
  file per bucket the reader reads from; the table's recommendation is there exactly when
  a gate fails (none with a high purge ratio and a 1-byte target size; every fixture has
  more small files than buckets at Paimon's target size);
- its level-0 files are those Paimon's file store scan lists at level 0, after two commits
  of a writer in `write-only` mode (no compaction: the rows stay invisible to DV readers);
- after the run Paimon's reader returns the same rows (the fixture's expected rows), and a
  second run deletes nothing and changes no file.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import dvtool
from tests.engines.jvm_engines import JvmSession
from tests.oracles import tree_hashes
from tests.reference.iceberg_writes import cli_json
from tests.reference.paimon_state import paimon_scan
from tests.reference.paimon_tables import SPECS, copy_table, part_of
from tests.reference.test_paimon_vacuum import DAY_MS, PAIMON_CLEAN, _age, _strays

NOT_APPLICABLE = {"purge", "compaction", "checkpoint", "log-cleanup"}

# Runs in the engine's process: commit args["batches"] of upserts with a writer in
# `write-only` mode (its files stay at level 0), then count the level-0 files of the latest
# snapshot as Paimon's file store scan lists them.
WRITE_ONLY = """
P = jvm.org.apache.paimon
table = P.table.FileStoreTableFactory.create(
    P.fs.local.LocalFileIO.create(), P.fs.Path(args["path"]))
options = jvm.java.util.HashMap()
options.put("write-only", "true")
table = table.copy(options)
for batch in args["batches"]:
    builder = P.table.sink.BatchWriteBuilderImpl(table)
    write = builder.newWrite()
    write.withIOManager(P.disk.IOManager.create(args["tmp"]))
    for i, part, v in batch:
        row = P.data.GenericRow(3)
        row.setField(0, i)
        row.setField(1, P.data.BinaryString.fromString(part))
        row.setField(2, P.data.BinaryString.fromString(v))
        write.write(row)
    commit = builder.newCommit()
    commit.commit(write.prepareCommit())
    write.close()
    commit.close()
entries = table.store().newScan().plan().files()
result = sum(1 for e in entries if e.file().level() == 0)
"""


def _lake(paimon_tables: dict[str, Any], root: Path) -> dict[str, tuple[Path, set[str]]]:
    """The lake of the module docstring: each table's copy and its orphans."""
    out = {}
    for spec in SPECS:
        entry = paimon_tables[spec.name]
        table = root / "fixtures.db" / spec.name
        shutil.copytree(entry["path"], table)
        _age(table, 2 * DAY_MS)
        orphans, _kept = _strays(table)
        if entry["orphan"]:
            orphans.add(Path(entry["orphan"]).relative_to(entry["path"]).as_posix())
        out[spec.name] = (table, orphans)
    return out


def _by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {Path(t["location"]).name: t for t in doc["tables"]}


def _actions(table: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["step"]: a for a in table["actions"]}


def _check_inspection(table: dict[str, Any], scan: dict[str, Any], ratio: float) -> None:
    """The inspect step against Paimon's read (module docstring)."""
    inspect = _actions(table)["inspect"]
    assert inspect["status"] == "done"
    checks = {c["name"]: c for c in inspect["result"]["checks"]}
    rows = sum(f["rows"] for f in scan["files"])
    deleted = sum(len(f["dv"]["positions"]) for f in scan["files"] if f["dv"])
    assert checks["max-deleted-ratio"]["actual"] == pytest.approx(deleted / rows)
    assert checks["max-deleted-ratio"]["limit"] == ratio
    buckets = {f["path"].rpartition("/")[0] for f in scan["files"]}
    assert checks["max-small-files"]["limit"] == len(buckets)
    due = any(not c["passed"] for c in checks.values())
    assert inspect["result"]["compaction_due"] is due
    recommendation = table["recommendation"]
    assert (recommendation is not None) is due
    if due:
        assert recommendation["action"] == "paimon-full-compaction"
        assert "fixtures." in recommendation["how"] and "compact_strategy" in recommendation["how"]
        assert inspect["detail"].startswith("run Paimon's full compaction: ")


def test_maintain_a_prefix_of_paimon_tables(
    paimon_tables: dict[str, Any], paimon_java: JvmSession, tmp_path: Path
) -> None:
    lake = _lake(paimon_tables, tmp_path / "lake")
    scans = {name: paimon_scan(paimon_java, table) for name, (table, _) in lake.items()}
    hashes = tree_hashes(tmp_path / "lake")

    healthy = ("--purge-ratio", "0.5", "--target-size", "1")
    plan = cli_json("maintain", tmp_path / "lake", "-r", "--dry-run", *healthy)
    assert tree_hashes(tmp_path / "lake") == hashes
    assert set(_by_name(plan)) == set(lake)
    for name, table in _by_name(plan).items():
        root, orphans = lake[name]
        assert table["format"] == "paimon" and table["status"] == "ok"
        actions = _actions(table)
        assert all(actions[s]["status"] == "not-applicable" for s in NOT_APPLICABLE)
        assert "Paimon's writers own compaction" in actions["compaction"]["detail"]
        vacuum = actions["vacuum"]
        assert vacuum["status"] == "planned"
        listed = {f["path"] for f in vacuum["result"]["files"]}
        cutoff = vacuum["result"]["cutoff_ms"]
        java = paimon_java.python(PAIMON_CLEAN, path=str(root), older_than=cutoff)
        assert listed == {Path(p).relative_to(root).as_posix() for p in java} == orphans
        _check_inspection(table, scans[name], 0.5)
        assert table["recommendation"] is None

    done = cli_json("maintain", tmp_path / "lake", "-r", "--purge-ratio", "0.05")
    for name, table in _by_name(done).items():
        root, orphans = lake[name]
        vacuum = _actions(table)["vacuum"]
        assert vacuum["status"] == "done" and table["metrics"]["vacuumed_files"] == len(orphans)
        assert not any((root / orphan).exists() for orphan in orphans)
        _check_inspection(table, scans[name], 0.05)
        after = paimon_scan(paimon_java, root)
        assert after["rows"] == scans[name]["rows"] == len(paimon_tables[name]["expected"])

    hashes = tree_hashes(tmp_path / "lake")
    again = dvtool.maintain(tmp_path / "lake", recursive=True)
    assert tree_hashes(tmp_path / "lake") == hashes and again.exit_code == 0
    for outcome in again.tables:
        step = next(a for a in outcome.actions if a.step == "vacuum")
        assert outcome.format == "paimon" and step.status == "nothing-to-do"


def test_level0_files_call_for_a_full_compaction(
    paimon_tables: dict[str, Any], paimon_java: JvmSession, tmp_path: Path
) -> None:
    root = copy_table(paimon_tables["pk_dv"], tmp_path / "pk_dv")
    before = paimon_scan(paimon_java, root)
    batches = [[(i, part_of(i), f"{k}{i}") for i in range(60)] for k in ("w", "x")]
    level0 = paimon_java.python(
        WRITE_ONLY, path=str(root), tmp=str(tmp_path / "io"), batches=batches
    )
    assert level0 >= 6  # two commits into every bucket of two partitions

    table = cli_json("maintain", root, "--dry-run", "--purge-ratio", "1", "--target-size", "1")
    [outcome] = table["tables"]
    checks = {c["name"]: c for c in _actions(outcome)["inspect"]["result"]["checks"]}
    assert checks["max-level0-files"] == {
        "name": "max-level0-files",
        "limit": 5,
        "actual": level0,
        "passed": False,
    }
    assert [c["name"] for c in outcome["recommendation"]["checks"]] == ["max-level0-files"]
    assert outcome["recommendation"]["reasons"] == [
        f"level-0 files (not read by DV readers yet): {level0} (above 5)"
    ]
    assert paimon_scan(paimon_java, root)["rows"] == before["rows"]
