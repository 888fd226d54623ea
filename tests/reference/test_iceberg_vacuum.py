"""`dvtool vacuum` on Iceberg tables against Iceberg Spark's `expire_snapshots` and
`remove_orphan_files` on a second copy of the same table with the same options.

The fixture tables with a history (tests/reference/iceberg_tables.py: compaction, expiry,
partition spec evolution) are copied twice into the Spark session's `local` (Hadoop)
catalog; the same files are planted in both copies (orphans older and newer than the
cutoff, in the data and metadata folders and in a partition folder, a hidden file, a file
at the table root, and one beside the table, outside its location). dvtool vacuums one copy,
Iceberg Spark's procedures the other; then:

- the same snapshots and refs are left, and the same files (relative to each copy) are gone;
- every reader (pyiceberg, DuckDB, polars, Iceberg Spark) reads the fixture's expected rows,
  and each kept snapshot reads as it does in the untouched fixture (time travel);
- a dry run first lists exactly the files the run then deletes, and deletes nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.table import StaticTable

from tests.cli_helpers import all_output, run
from tests.engines.jvm_engines import JvmSession
from tests.iceberg_oracles import ORACLES, oracle_rows
from tests.reference.iceberg_tables import copy_table, latest_metadata, warehouse

HISTORY = ["v2_compacted", "v3_compacted", "v2_evolved"]
NAMESPACE = "vacuum_tests"
DAY = 86_400


def _json(*args: str | Path, code: int = 0) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == code, all_output(result)
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _copy(session: JvmSession, entry: dict[str, Any], label: str) -> tuple[Path, str]:
    """A copy of the fixture in the `local` catalog: its folder and its Spark name."""
    name = f"{label}_{uuid.uuid4().hex[:8]}"
    dst = warehouse(session) / NAMESPACE / name
    dst.parent.mkdir(parents=True, exist_ok=True)
    copy_table(session, entry, dst)
    return dst, f"local.{NAMESPACE}.{name}"


def _plant(location: Path, now: float) -> None:
    """The same planted files in each copy: (path, age in seconds)."""
    partition = next((p for p in (location / "data").iterdir() if p.is_dir()), None)
    planted = [
        ("data/orphan-old.parquet", 10 * DAY),
        ("data/orphan-new.parquet", 3600),
        ("metadata/orphan-old.avro", 10 * DAY),
        ("metadata/orphan-new.avro", 60),
        ("data/.hidden-old", 10 * DAY),
        ("stray-old.txt", 10 * DAY),  # at the top: Iceberg 1.12 lists it
    ]
    if partition is not None:
        planted.append((f"data/{partition.name}/orphan-old.parquet", 10 * DAY))
    for relative, age in planted:
        path = location / relative
        path.write_bytes(b"not a table file")
        os.utime(path, (now - age, now - age))
    outside = location.parent / f"{location.name}-outside.parquet"
    outside.write_bytes(b"beside the table")
    os.utime(outside, (now - 10 * DAY, now - 10 * DAY))


def _tree(location: Path) -> set[str]:
    """The files under the table folder (not Hadoop's hidden checksum files), relative."""
    return {
        str(p.relative_to(location))
        for p in location.rglob("*")
        if p.is_file() and not p.name.endswith(".crc")
    }


def _timestamp(epoch_s: float) -> str:
    moment = dt.datetime.fromtimestamp(epoch_s, dt.timezone.utc)
    return f"TIMESTAMP '{moment.strftime('%Y-%m-%d %H:%M:%S.%f')} UTC'"


# Runs in the engine's process: the action `remove_orphan_files` runs, called directly,
# since the procedure refuses intervals under 24 hours (dvtool's floor is 3 days, --force).
DELETE_ORPHANS = """
table = jvm.org.apache.iceberg.hadoop.HadoopTables(
    spark.sparkContext._jsc.hadoopConfiguration()).load(args["location"])
jvm.org.apache.iceberg.spark.actions.SparkActions.get().deleteOrphanFiles(table).olderThan(
    args["older_than"]).execute()
"""


def _spark_vacuum(
    session: JvmSession, table: str, location: Path, older_than: float, retain_last: int | None
) -> None:
    """`expire_snapshots`, then `remove_orphan_files`'s action, with the same cutoff."""
    ident = table.split(".", 1)[1]
    last = f", retain_last => {retain_last}" if retain_last is not None else ""
    session.sql(
        f"CALL local.system.expire_snapshots(table => '{ident}', "
        f"older_than => {_timestamp(older_than)}{last})"
    )
    session.python(DELETE_ORPHANS, location=str(location), older_than=int(older_than * 1000))


def _snapshots(location: Path) -> tuple[set[int], dict[str, int]]:
    meta = StaticTable.from_metadata(str(latest_metadata(location))).metadata
    return {s.snapshot_id for s in meta.snapshots}, {n: r.snapshot_id for n, r in meta.refs.items()}


def _assert_reads(
    session: JvmSession, entry: dict[str, Any], location: Path, table: str, kept: set[int]
) -> None:
    """Every oracle reads the expected rows; each kept snapshot as in the fixture."""
    metadata = latest_metadata(location)
    for oracle in ORACLES:
        assert oracle_rows(oracle, metadata) == entry["expected"], oracle
    session.sql(f"REFRESH TABLE {table}")
    spark = sorted(session.rows(f"SELECT * FROM {table}"), key=lambda r: r["id"])
    assert spark == entry["expected"]
    for sid in sorted(kept):
        assert oracle_rows("pyiceberg", metadata, snapshot_id=sid) == oracle_rows(
            "pyiceberg", entry["metadata"], snapshot_id=sid
        )
        travel = session.rows(f"SELECT * FROM {table} VERSION AS OF {sid}")
        assert sorted(travel, key=lambda r: r["id"]) == oracle_rows(
            "pyiceberg", entry["metadata"], snapshot_id=sid
        )


def _run_both(
    session: JvmSession,
    entry: dict[str, Any],
    label: str,
    retain_days: float,
    retain_last: int | None,
) -> tuple[Path, str, Path, set[str], set[str], dict[str, Any]]:
    """Vacuum one copy with dvtool (after a dry run) and another with Iceberg Spark."""
    now = time.time()
    mine, mine_table = _copy(session, entry, f"{label}_dvtool")
    theirs, theirs_table = _copy(session, entry, f"{label}_spark")
    for location in (mine, theirs):
        _plant(location, now)
    options = ["--retain", f"{int(retain_days * 24 * 3600)}s", "--force"]
    if retain_last is not None:
        options += ["--retain-last", str(retain_last)]
    before = _tree(mine)
    current = latest_metadata(mine)
    outside = sorted(mine.parent.glob(f"{mine.name}-outside*"))
    dry = _json("vacuum", mine, *options, "--dry-run")
    assert _tree(mine) == before  # a dry run deletes nothing
    doc = _json("vacuum", mine, *options)
    gone_mine = before - _tree(mine)
    assert gone_mine == {f["path"] for f in dry["files"]} == {f["path"] for f in doc["files"]}
    assert doc["deleted_files"] == len(gone_mine) and not doc["failed"]
    assert all(p.exists() for p in outside)  # never a file outside the location
    assert current.exists() and (mine / "metadata" / "version-hint.text").exists()
    theirs_before = _tree(theirs)
    _spark_vacuum(session, theirs_table, theirs, time.time() - retain_days * DAY, retain_last)
    gone_theirs = theirs_before - _tree(theirs)
    return mine, mine_table, theirs, gone_mine, gone_theirs, doc


@pytest.mark.parametrize("name", HISTORY)
def test_expiry_and_orphans_equal_iceberg_spark(
    name: str, iceberg_spark: JvmSession, iceberg_tables: dict[str, Any]
) -> None:
    """Every snapshot but the last expires (retention 0, retain last 1), with the files
    only they reached and the orphans (all older than now)."""
    entry = iceberg_tables[name]
    mine, table, theirs, gone_mine, gone_theirs, doc = _run_both(
        iceberg_spark, entry, name, 0, retain_last=1
    )
    assert _snapshots(mine) == _snapshots(theirs)
    assert doc["expired_snapshots"], "the fixture has snapshots to expire"
    assert gone_mine == gone_theirs
    assert {"data/orphan-old.parquet", "metadata/orphan-old.avro", "stray-old.txt"} <= gone_mine
    assert "data/.hidden-old" not in gone_mine
    _assert_reads(iceberg_spark, entry, mine, table, _snapshots(mine)[0])


def test_orphans_newer_than_the_retention_stay(
    iceberg_spark: JvmSession, iceberg_tables: dict[str, Any]
) -> None:
    """A 2-day retention: no snapshot is that old; the old orphans go, the new stay."""
    entry = iceberg_tables["v2_evolved"]
    mine, table, theirs, gone_mine, gone_theirs, doc = _run_both(
        iceberg_spark, entry, "young", 2, retain_last=None
    )
    assert doc["expired_snapshots"] == [] and doc["committed_metadata_location"] is None
    assert _snapshots(mine) == _snapshots(theirs)
    assert gone_mine == gone_theirs
    names = {p.rsplit("/", 1)[-1] for p in gone_mine}
    assert names == {"orphan-old.parquet", "orphan-old.avro", "stray-old.txt"}
    assert {"data/orphan-new.parquet", "metadata/orphan-new.avro"} <= _tree(mine)
    _assert_reads(iceberg_spark, entry, mine, table, _snapshots(mine)[0])
