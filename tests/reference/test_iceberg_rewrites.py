"""dvtool's Iceberg data file rewrites against Iceberg Spark's: purge, compaction, cow delete.

- `optimize --purge` (MERGE) is compared with Iceberg Spark's `rewrite_data_files` with
  `delete-file-threshold=1` on a second copy: both read the table's rows through every
  reader; afterwards no delete file applies to any live data file (`inspect`'s
  `files_with_dvs`), every surviving row keeps the data sequence number of its file (Spark's
  `entries` metadata table, per row through `_file`) and, v3, its `_row_id` and
  `_last_updated_sequence_number`; Spark's DELETE and MERGE then go on on the result.
- compaction of a table of many small files (Spark INSERTs) is compared with Spark's
  bin-pack `rewrite_data_files`: the same rows, and the same new files (partition, record
  count, the starting snapshot's sequence number) as Spark's `entries` lists them.
- `delete --mode cow` reads as the merge-on-read delete of a second copy, and adds no
  delete file.
- dry runs write nothing; a Spark DELETE committed while a purge or a cow delete writes
  makes it plan again, an equality delete committed meanwhile only makes the purge re-apply
  its changes; no delete is lost.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dvtool.commands.delete.command import DeleteRequest
from dvtool.commands.delete.iceberg import run_delete_iceberg, scan_storage
from dvtool.commands.optimize.iceberg import IcebergOptimizeRequest, run_optimize_iceberg
from dvtool.iceberg.tables import open_iceberg
from tests.engines.jvm_engines import JvmSession
from tests.reference.iceberg_tables import (
    COMMIT_EQUALITY_DELETES,
    TableSpec,
    build_table,
    delete_multiples,
    insert,
    make_rows,
)
from tests.reference.iceberg_writes import cli_json, copy_into_catalog, readers_agree

NAMESPACE = "dvrewrite"
LINEAGE = "SELECT id, _row_id, _last_updated_sequence_number FROM {t} ORDER BY id"


def _copy(session: JvmSession, entry: dict[str, Any], name: str) -> tuple[Path, str]:
    return copy_into_catalog(session, entry, NAMESPACE, name)


def _row_sequence_numbers(session: JvmSession, table: str) -> dict[int, int]:
    """Each live row's data sequence number: that of the live data file holding it."""
    session.sql(f"REFRESH TABLE {table}")
    seqs = {
        r["path"]: r["seq"]
        for r in session.rows(
            f"SELECT data_file.file_path AS path, sequence_number AS seq FROM {table}.entries "
            "WHERE status < 2 AND data_file.content = 0"
        )
    }
    return {r["id"]: seqs[r["f"]] for r in session.rows(f"SELECT id, _file AS f FROM {table}")}


def _last_operation(session: JvmSession, table: str) -> str:
    rows = session.rows(f"SELECT operation FROM {table}.snapshots ORDER BY committed_at DESC")
    return str(rows[0]["operation"])


def _files_with_deletes(folder: Path) -> int:
    return int(cli_json("inspect", folder)["files_with_dvs"])


PURGED = ["v2_part", "v3_part", "v3_compacted", "v2_equality", "v2_flink_part"]


@pytest.mark.parametrize("name", PURGED)
def test_purge_equals_iceberg_spark(
    name: str, iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    entry = iceberg_tables[name]
    ours, our_table = _copy(iceberg_spark, entry, f"{name}_purge")
    theirs, their_table = _copy(iceberg_spark, entry, f"{name}_purge_spark")
    v3 = entry["format_version"] >= 3
    lineage = iceberg_spark.rows(LINEAGE.format(t=our_table)) if v3 else None
    sequences = _row_sequence_numbers(iceberg_spark, our_table)
    assert _files_with_deletes(ours) > 0

    doc = cli_json("optimize", ours, "--purge")
    assert doc["snapshot_id"] is not None and doc["operation"] == "purge"
    assert doc["metrics"]["rewrittenDataFiles"] > 0
    iceberg_spark.sql(
        f"CALL local.system.rewrite_data_files(table => '{NAMESPACE}.{name}_purge_spark', "
        "options => map('delete-file-threshold', '1'))"
    )
    readers_agree(iceberg_spark, ours, our_table, entry["expected"])
    assert iceberg_spark.rows(f"SELECT * FROM {their_table} ORDER BY id") == entry["expected"]
    assert _files_with_deletes(ours) == 0 == _files_with_deletes(theirs)
    assert _last_operation(iceberg_spark, our_table) == "replace"
    assert _row_sequence_numbers(iceberg_spark, our_table) == sequences
    if v3:
        assert iceberg_spark.rows(LINEAGE.format(t=our_table)) == lineage
        assert iceberg_spark.rows(LINEAGE.format(t=their_table)) == lineage
    assert cli_json("optimize", ours, "--purge")["snapshot_id"] is None  # nothing left

    # Spark goes on writing the purged table.
    iceberg_spark.sql(f"DELETE FROM {our_table} WHERE id % 9 = 4")
    iceberg_spark.sql(
        f"MERGE INTO {our_table} t USING (SELECT * FROM {our_table} WHERE id % 9 = 5) s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.v = s.v + 1"
    )
    expected = [
        {**r, "v": r["v"] + 1} if r["id"] % 9 == 5 else r
        for r in entry["expected"]
        if r["id"] % 9 != 4
    ]
    readers_agree(iceberg_spark, ours, our_table, expected)


def test_purge_with_a_minimum_deleted_ratio(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    entry = iceberg_tables["v3_part"]
    folder, table = _copy(iceberg_spark, entry, "v3_part_ratio")
    plan = cli_json("optimize", folder, "--purge", "--dry-run")
    ratios = sorted(b["deleted_rows"] / (b["rows"] + b["deleted_rows"]) for b in plan["bins"])
    threshold = ratios[len(ratios) // 2]
    doc = cli_json("optimize", folder, "--purge", "--min-deleted-ratio", str(threshold))
    assert doc["metrics"]["rewrittenDataFiles"] == sum(r >= threshold for r in ratios)
    readers_agree(iceberg_spark, folder, table, entry["expected"])
    assert 0 < _files_with_deletes(folder) < len(ratios)


def _data_file_names(session: JvmSession, table: str) -> set[str]:
    session.sql(f"REFRESH TABLE {table}")
    rows = session.rows(f"SELECT file_path FROM {table}.files WHERE content = 0")
    return {Path(r["file_path"]).name for r in rows}


def test_purge_where_chooses_the_files_iceberg_spark_chooses(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    """`--where` on a data column: of the files with deletes, those whose metrics may match
    are rewritten, the same ones Spark's `rewrite_data_files(where => ...)` rewrites (Spark
    also bin-packs small files without deletes, which a purge leaves alone)."""
    entry, where = iceberg_tables["v3_part"], "id < 30"
    ours, our_table = _copy(iceberg_spark, entry, "v3_part_where")
    _, their_table = _copy(iceberg_spark, entry, "v3_part_where_spark")
    before = _data_file_names(iceberg_spark, our_table)
    rows = iceberg_spark.rows(f"SELECT referenced_data_file AS f FROM {our_table}.delete_files")
    with_deletes = {Path(r["f"]).name for r in rows}
    doc = cli_json("optimize", ours, "--purge", "--where", where)
    assert doc["metrics"]["rewrittenDataFiles"] > 0
    iceberg_spark.sql(
        f"CALL local.system.rewrite_data_files(table => '{NAMESPACE}.v3_part_where_spark', "
        f"where => '{where}', options => map('delete-file-threshold', '1'))"
    )
    kept_ours = before & _data_file_names(iceberg_spark, our_table)
    kept_theirs = before & _data_file_names(iceberg_spark, their_table)
    assert kept_ours & with_deletes == kept_theirs & with_deletes
    assert 0 < len(kept_ours & with_deletes) < len(with_deletes)
    assert before - with_deletes <= kept_ours  # a purge rewrites only files with deletes
    readers_agree(iceberg_spark, ours, our_table, entry["expected"])


def _small_files_spec(name: str, version: int) -> TableSpec:
    inserts = tuple(insert(make_rows(i * 6, i * 6 + 6)) for i in range(8))
    return TableSpec(name, version, "cat", (*inserts, delete_multiples(7)))


def _new_files(session: JvmSession, table: str) -> Counter[tuple[str, int, int]]:
    session.sql(f"REFRESH TABLE {table}")
    rows = session.rows(
        f"SELECT sequence_number AS seq, data_file.partition.cat AS cat, "
        f"data_file.record_count AS n FROM {table}.entries "
        "WHERE status < 2 AND data_file.content = 0"
    )
    return Counter((r["cat"], r["seq"], r["n"]) for r in rows)


def _built(session: JvmSession, name: str, version: int) -> tuple[Path, str, list[Any]]:
    entry = build_table(session, _small_files_spec(name, version), NAMESPACE)
    expected = [{**r, "d": dt.date.fromisoformat(r["d"])} for r in entry["expected"]]
    return Path(entry["location"]), entry["table"], expected


def _tree(folder: Path) -> list[Path]:
    return sorted(p.relative_to(folder) for p in folder.rglob("*"))


@pytest.mark.parametrize("version", [2, 3])
def test_compaction_equals_iceberg_spark(version: int, iceberg_spark: JvmSession) -> None:
    ours, our_table, expected = _built(iceberg_spark, f"small_v{version}", version)
    _, their_table, _ = _built(iceberg_spark, f"small_v{version}_spark", version)
    lineage = iceberg_spark.rows(LINEAGE.format(t=our_table)) if version >= 3 else None

    before = _tree(ours)
    dry = cli_json("optimize", ours, "--dry-run")
    assert dry["snapshot_id"] is None and _tree(ours) == before
    doc = cli_json("optimize", ours)
    assert doc["operation"] == "compact" and doc["snapshot_id"] is not None
    assert len(dry["bins"]) == doc["metrics"]["addedDataFiles"] == 3  # one per partition
    iceberg_spark.sql(
        f"CALL local.system.rewrite_data_files(table => '{NAMESPACE}.small_v{version}_spark')"
    )
    readers_agree(iceberg_spark, ours, our_table, expected)
    assert iceberg_spark.rows(f"SELECT * FROM {their_table} ORDER BY id") == expected
    assert _new_files(iceberg_spark, our_table) == _new_files(iceberg_spark, their_table)
    assert _last_operation(iceberg_spark, our_table) == "replace"
    assert _files_with_deletes(ours) == 0
    if lineage is not None:
        assert iceberg_spark.rows(LINEAGE.format(t=our_table)) == lineage
    assert cli_json("optimize", ours)["snapshot_id"] is None  # nothing left to compact


def _delete_files(session: JvmSession, table: str) -> int:
    session.sql(f"REFRESH TABLE {table}")
    return len(session.rows(f"SELECT file_path FROM {table}.delete_files"))


@pytest.mark.parametrize("name", ["v2_part", "v3_part", "v2_equality"])
def test_cow_delete_reads_as_the_mor_delete(
    name: str, iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    entry = iceberg_tables[name]
    cow, cow_table = _copy(iceberg_spark, entry, f"{name}_cow")
    mor, mor_table = _copy(iceberg_spark, entry, f"{name}_mor")
    where = "id % 5 = 2 OR v > 7000"
    deletes_before = _delete_files(iceberg_spark, cow_table)
    # Without write.delete.mode, auto is copy-on-write (Iceberg's default).
    iceberg_spark.sql(f"ALTER TABLE {cow_table} UNSET TBLPROPERTIES ('write.delete.mode')")
    doc = cli_json("delete", cow, "--where", where)
    assert doc["mode"] == "cow" and doc["snapshot_id"] is not None
    assert {f["action"] for f in doc["files"]} <= {"rewrite", "remove"}
    assert cli_json("delete", mor, "--where", where, "--mode", "dv")["mode"] == "dv"
    expected = [r for r in entry["expected"] if not (r["id"] % 5 == 2 or r["v"] > 7000)]
    readers_agree(iceberg_spark, cow, cow_table, expected)
    readers_agree(iceberg_spark, mor, mor_table, expected)
    assert _delete_files(iceberg_spark, cow_table) <= deletes_before
    assert _last_operation(iceberg_spark, cow_table) in ("overwrite", "delete")


def test_dry_runs_write_nothing(iceberg_tables: dict[str, Any], iceberg_spark: JvmSession) -> None:
    folder, _ = _copy(iceberg_spark, iceberg_tables["v2_flink_part"], "v2_flink_part_dry")
    before = _tree(folder)
    purge = cli_json("optimize", folder, "--purge", "--dry-run")
    assert purge["dry_run"] and purge["snapshot_id"] is None and purge["bins"]
    compact = cli_json("optimize", folder, "--dry-run", "--target-size", "1MB")
    assert compact["dry_run"] and compact["snapshot_id"] is None
    cow = cli_json("delete", folder, "--where", "id < 30", "--mode", "cow", "--dry-run")
    actions = {f["action"] for f in cow["files"]}
    assert cow["snapshot_id"] is None and "rewrite" in actions and actions <= {"rewrite", "remove"}
    assert _tree(folder) == before


@pytest.mark.parametrize("name", ["v2_part", "v3_part"])
def test_purge_against_a_concurrent_spark_delete(
    name: str,
    iceberg_tables: dict[str, Any],
    iceberg_spark: JvmSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Spark's DELETE adds deletes to files the purge rewrites: planned again, merged."""
    import dvtool.commands.optimize.iceberg as command

    entry = iceberg_tables[name]
    folder, table = _copy(iceberg_spark, entry, f"{name}_purge_race")
    original = command.write_rewrites
    fired: list[bool] = []

    def write_then_delete(*args: Any, **kwargs: Any) -> Any:
        changes = original(*args, **kwargs)
        if not fired:
            fired.append(True)
            iceberg_spark.sql(f"DELETE FROM {table} WHERE id % 7 = 2")
        return changes

    monkeypatch.setattr(command, "write_rewrites", write_then_delete)
    result = run_optimize_iceberg(open_iceberg(str(folder)), IcebergOptimizeRequest("purge"))
    assert result.snapshot_id is not None and fired and result.attempts > 1
    expected = [r for r in entry["expected"] if r["id"] % 7 != 2]
    readers_agree(iceberg_spark, folder, table, expected)
    assert _files_with_deletes(folder) == 0


def _commit_equality_deletes(session: JvmSession, folder: Path, ids: list[int]) -> None:
    """Commit an equality delete file on `id` with Iceberg's Java API (`RowDelta`), as
    Flink would while dvtool works."""
    field = pa.field("id", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"1"})
    path = folder / "data" / f"race-eq-deletes-{uuid.uuid4()}.parquet"
    pq.write_table(pa.table({"id": ids}, schema=pa.schema([field])), path)
    session.python(
        COMMIT_EQUALITY_DELETES,
        location=str(folder),
        field_ids=[1],
        path=str(path),
        size=path.stat().st_size,
        count=len(ids),
    )


def test_purge_keeps_a_concurrent_equality_delete(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An equality delete committed meanwhile has a higher sequence number than the kept
    ones of the new files: it still applies to them, so the purge is only re-applied."""
    import dvtool.commands.optimize.iceberg as command

    entry = iceberg_tables["v2_equality"]
    folder, table = _copy(iceberg_spark, entry, "v2_equality_purge_race")
    original = command.write_rewrites
    gone = [5, 6, 60]

    def write_then_delete(*args: Any, **kwargs: Any) -> Any:
        changes = original(*args, **kwargs)
        monkeypatch.setattr(command, "write_rewrites", original)
        _commit_equality_deletes(iceberg_spark, folder, gone)
        return changes

    monkeypatch.setattr(command, "write_rewrites", write_then_delete)
    result = run_optimize_iceberg(open_iceberg(str(folder)), IcebergOptimizeRequest("purge"))
    assert result.snapshot_id is not None and result.attempts == 1 and result.retries == 1
    iceberg_spark.sql(f"REFRESH TABLE {table}")
    expected = [r for r in entry["expected"] if r["id"] not in gone]
    readers_agree(iceberg_spark, folder, table, expected)


def test_cow_delete_against_a_concurrent_spark_delete(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark's DELETE adds position deletes to files the cow delete rewrites: planned again."""
    import dvtool.commands.delete.iceberg_cow as cow

    entry = iceberg_tables["v2_part"]
    folder, table = _copy(iceberg_spark, entry, "v2_part_cow_race")
    original = cow.write_rewrites

    def write_then_delete(*args: Any, **kwargs: Any) -> Any:
        changes = original(*args, **kwargs)
        monkeypatch.setattr(cow, "write_rewrites", original)
        iceberg_spark.sql(f"DELETE FROM {table} WHERE id % 7 = 2")
        return changes

    monkeypatch.setattr(cow, "write_rewrites", write_then_delete)
    opened = open_iceberg(str(folder))
    request = DeleteRequest("id % 5 = 1", mode="cow")
    result = run_delete_iceberg(opened, request, scan_storage(opened, {}))
    assert result.snapshot_id is not None and result.attempts > 1
    iceberg_spark.sql(f"REFRESH TABLE {table}")
    expected = [r for r in entry["expected"] if r["id"] % 7 != 2 and r["id"] % 5 != 1]
    readers_agree(iceberg_spark, folder, table, expected)
