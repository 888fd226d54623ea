"""`dvtool maintain` on Iceberg Spark's fixture tables, under one prefix with a Delta table.

Copies of `v2_part` (position deletes; its snapshots set to expire at once, so the vacuum
has work), `v3_part` (deletion vectors) and `v2_equality` (an equality delete file) in the
Spark session's `local` catalog, and `v2_part` upgraded to format version 3 (its Parquet
position deletes become DVs), beside a deltalake table, all under one prefix; then:

- a dry run writes nothing, and plans to purge exactly the data files whose deleted ratio
  (Iceberg Spark's count of each file's live rows, `_file`, against its `record_count`) is at
  least the purge ratio;
- the run purges exactly those files, and leaves no live data file at or above the ratio;
  pyiceberg, DuckDB, polars and Iceberg Spark read exactly the rows they read before
  (`readers_agree`), and `inspect --verify` finds nothing wrong (the purge ratio is 0.5,
  above some files' ratios, so deletes stay for the rewrite of delete files);
- no Parquet position delete file is left on the upgraded table; equality deletes left are
  named in the plan;
- the vacuum of `v2_part` leaves nothing for `dvtool vacuum` to expire or delete;
- a second run finds nothing to do and writes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake

from tests.engines.jvm_engines import JvmSession
from tests.oracles import tree_hashes
from tests.reference.iceberg_tables import warehouse
from tests.reference.iceberg_writes import cli_json, copy_into_catalog, readers_agree

NAMESPACE = "dvmaintain"
TABLES = ("v2_part", "v3_part", "v2_equality")
RATIO = 0.5  # above some files' ratios: their deletes stay for the rewrite of deletes


def _ratios(session: JvmSession, table: str) -> dict[str, float]:
    """Each live data file's deleted ratio, by Iceberg Spark: (records - live rows) / records
    (as dvtool computes it: 1 - 4/5 is below 0.2 in floating point, 1/5 is not)."""
    session.sql(f"REFRESH TABLE {table}")
    records = {
        r["path"]: r["n"]
        for r in session.rows(
            f"SELECT file_path AS path, record_count AS n FROM {table}.data_files"
        )
    }
    live = {
        r["f"]: r["n"]
        for r in session.rows(f"SELECT _file AS f, count(*) AS n FROM {table} GROUP BY _file")
    }
    return {path: (n - live.get(path, 0)) / n for path, n in records.items()}


def _delete_files(session: JvmSession, table: str) -> list[dict[str, Any]]:
    session.sql(f"REFRESH TABLE {table}")
    return session.rows(f"SELECT content, file_format FROM {table}.delete_files")


def _actions(doc: dict[str, Any], folder: Path) -> dict[str, dict[str, Any]]:
    table = next(t for t in doc["tables"] if t["location"] == str(folder))
    assert table["format"] == "iceberg" and table["status"] == "ok", table["error"]
    return {a["step"]: a for a in table["actions"]}


def _purged(actions: dict[str, dict[str, Any]]) -> set[str]:
    result = actions["purge"]["result"] or {"bins": []}
    return {path for b in result["bins"] for path in b["files"]}


def test_maintain_iceberg_spark_tables_under_a_prefix(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    prefix = warehouse(iceberg_spark) / NAMESPACE
    copies = {
        name: copy_into_catalog(iceberg_spark, iceberg_tables[name], NAMESPACE, name)
        for name in TABLES
    }
    upgraded = copy_into_catalog(iceberg_spark, iceberg_tables["v2_part"], NAMESPACE, "v2_v3")
    iceberg_spark.sql(f"ALTER TABLE {upgraded[1]} SET TBLPROPERTIES ('format-version'='3')")
    _, v2_name = copies["v2_part"]
    iceberg_spark.sql(
        f"ALTER TABLE {v2_name} SET TBLPROPERTIES ('history.expire.max-snapshot-age-ms'='1')"
    )
    delta = prefix / "delta_t"
    write_deltalake(str(delta), pa.table({"id": pa.array(range(10), pa.int64())}))
    due = {
        name: {p for p, r in _ratios(iceberg_spark, table).items() if r >= RATIO}
        for name, (_, table) in copies.items()
    }
    assert any(due.values())

    before = tree_hashes(prefix)
    planned = cli_json("maintain", prefix, "-r", "--dry-run", "--purge-ratio", str(RATIO))
    assert tree_hashes(prefix) == before
    for name, (folder, _) in copies.items():
        assert _purged(_actions(planned, folder)) == due[name], name

    doc = cli_json("maintain", prefix, "-r", "--purge-ratio", str(RATIO))

    assert doc["exit_code"] == 0 and doc["num_tables"] == 5
    delta_outcome = next(t for t in doc["tables"] if t["location"] == str(delta))
    assert (delta_outcome["format"], delta_outcome["status"]) == ("delta", "ok")
    for name, (folder, table) in copies.items():
        actions = _actions(doc, folder)
        assert _purged(actions) == due[name], name
        assert actions["checkpoint"]["status"] == "not-applicable"
        readers_agree(iceberg_spark, folder, table, iceberg_tables[name]["expected"])
        assert all(r < RATIO for r in _ratios(iceberg_spark, table).values()), name
    assert _actions(doc, upgraded[0])["rewrite-deletes"]["status"] == "done"
    readers_agree(iceberg_spark, *upgraded, iceberg_tables["v2_part"]["expected"])
    formats = {f["file_format"] for f in _delete_files(iceberg_spark, upgraded[1])}
    assert formats <= {"PUFFIN"}
    vacuum = _actions(doc, copies["v2_part"][0])["vacuum"]
    assert vacuum["status"] == "done" and vacuum["result"]["expired_snapshots"]
    after = cli_json("vacuum", copies["v2_part"][0], "--dry-run")
    assert after["num_files"] == 0 and after["expired_snapshots"] == []

    settled = tree_hashes(prefix)
    again = cli_json("maintain", prefix, "-r", "--purge-ratio", str(RATIO))
    for folder, _ in [*copies.values(), upgraded]:
        statuses = {a["status"] for a in _actions(again, folder).values()}
        assert statuses <= {"nothing-to-do", "not-applicable"}, json.dumps(again, indent=1)
    folder, table = copies["v2_equality"]
    if any(f["content"] == 2 for f in _delete_files(iceberg_spark, table)):
        reason = _actions(again, folder)["rewrite-deletes"]["detail"]
        assert "equality delete files left" in reason
    assert tree_hashes(prefix) == settled
