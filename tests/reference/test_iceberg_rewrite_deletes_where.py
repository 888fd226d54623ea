"""`dvtool optimize --rewrite-deletes --where` against Iceberg Spark's
`rewrite_position_delete_files(where => ...)` on a second copy of the same table.

Spark turns the filter into a partition filter by inclusive projection, per spec, and
rewrites every position delete file whose partition may match (`rewrite-all`, so it skips no
small group). dvtool's REWRITE rewrites only the partitions that need it (more than one
position delete file, or a dangling one), so: every delete file dvtool rewrites is one
Spark rewrites, each one Spark rewrites and dvtool does not is the only delete file of its
partition, the partitions Spark leaves alone keep exactly their delete files in dvtool's
copy too, and both copies delete the same (data file, position) pairs and read the same
rows through every reader. (Spark refuses a filter it cannot turn into an Iceberg
expression, such as `upper(cat) = 'Z'`; dvtool widens such a part to every partition, as
tests/commands/test_iceberg_partition_filter.py checks.)
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.engines.jvm_engines import JvmSession
from tests.reference.iceberg_writes import cli_json, copy_into_catalog, readers_agree
from tests.reference.test_iceberg_optimize_deletes import _deleted_positions

NAMESPACE = "dvrewritewhere"
CASES = [
    # identity partition only (bucket(3, id) projects nothing from `id < 30`)
    ("v2_part", "cat = 'a' AND id < 30", 0),
    # an OR of an identity value and a bucket value
    ("v2_part", "cat IN ('b', 'c') OR id = 7", 1),
    # four specs (cat; cat, bucket; bucket, days; days): a day and a category
    ("v2_evolved", "d >= DATE '2024-01-02' AND cat != 'b'", 2),
    # partition a holds a dangling delete file: outside the filter it stays, as in Spark
    ("v2_compacted", "cat != 'a'", 3),
]


def _position_files(session: JvmSession, table: str) -> dict[str, str]:
    """Live position delete files (path -> partition key: spec id and values)."""
    session.sql(f"REFRESH TABLE {table}")
    rows = session.rows(f"SELECT file_path, spec_id, partition FROM {table}.delete_files")
    return {
        Path(r["file_path"]).name: f"{r['spec_id']}:"
        + json.dumps(r["partition"], default=str, sort_keys=True)
        for r in rows
    }


@pytest.mark.parametrize(("name", "where", "case"), CASES)
def test_rewrite_deletes_where_equals_iceberg_spark(
    name: str, where: str, case: int, iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    entry = iceberg_tables[name]
    ours, our_table = copy_into_catalog(iceberg_spark, entry, NAMESPACE, f"{name}_w{case}")
    theirs, their_table = copy_into_catalog(iceberg_spark, entry, NAMESPACE, f"{name}_w{case}s")
    before = _position_files(iceberg_spark, our_table)
    positions = _deleted_positions(iceberg_spark, our_table, ours)
    cli_json("optimize", ours, "--rewrite-deletes", "--where", where)
    spark_where = where.replace("'", '"')
    iceberg_spark.sql(
        f"CALL local.system.rewrite_position_delete_files(table => '{NAMESPACE}.{name}_w{case}s',"
        f" where => '{spark_where}', options => map('rewrite-all', 'true'))"
    )
    ours_after = _position_files(iceberg_spark, our_table)
    spark_after = _position_files(iceberg_spark, their_table)
    ours_removed = before.keys() - ours_after.keys()
    spark_removed = before.keys() - spark_after.keys()
    assert ours_removed and ours_removed <= spark_removed
    crowded = Counter(before.values())
    assert all(crowded[before[f]] == 1 for f in spark_removed - ours_removed)
    assert spark_removed != before.keys()  # the filter left some delete files alone
    spark_partitions = {before[f] for f in spark_removed}
    untouched = {f: p for f, p in before.items() if p not in spark_partitions}
    assert {f: p for f, p in ours_after.items() if p not in spark_partitions} == untouched
    assert all(n == 1 for p, n in Counter(ours_after.values()).items() if p in spark_partitions)
    if name == "v2_compacted":
        assert any(before.get(f, "").endswith('{"cat": "a"}') for f in ours_after)
    assert _deleted_positions(iceberg_spark, our_table, ours) == positions
    assert _deleted_positions(iceberg_spark, their_table, theirs) == positions
    readers_agree(iceberg_spark, ours, our_table, entry["expected"])
