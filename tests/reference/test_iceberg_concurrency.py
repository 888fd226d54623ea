"""dvtool's Iceberg writes against Iceberg Spark writers committing in between.

Each test runs dvtool in-process and makes Iceberg Spark commit to the same table at a
chosen point: after dvtool planned and wrote its delete files, before its metadata swap
(the engine's scan is wrapped so the concurrent commit lands then). dvtool must then
either re-apply its changes on the new head (when what landed does not touch what it
planned) or plan again; never lose the other writer's deletes, never resurrect a row.
Afterwards every reader reads the original rows minus the union of both deletes, and
`inspect --verify` finds nothing wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyroaring import BitMap64

from dvtool.commands.delete.command import DeleteRequest
from dvtool.commands.delete.iceberg import run_delete_iceberg, scan_storage
from dvtool.commands.optimize.iceberg import IcebergOptimizeRequest, run_optimize_iceberg
from dvtool.engines.arrow import ArrowEngine
from dvtool.engines.base import Progress, ScanFile, TableLayout
from dvtool.iceberg.tables import open_iceberg
from dvtool.predicate import Predicate
from tests.engines.jvm_engines import JvmSession
from tests.reference.iceberg_writes import copy_into_catalog, readers_agree

NAMESPACE = "dvrace"
Row = dict[str, Any]


class ConcurrentEngine(ArrowEngine):
    """The arrow engine, which runs `meanwhile` once, after its first scan: another writer
    commits while dvtool has planned but not yet committed."""

    def __init__(self, meanwhile: Callable[[], None]) -> None:
        super().__init__()
        self.meanwhile: Callable[[], None] | None = meanwhile

    def find_matches(
        self,
        table: TableLayout,
        files: Sequence[ScanFile],
        predicate: Predicate,
        progress: Progress | None = None,
    ) -> list[BitMap64]:
        found = super().find_matches(table, files, predicate, progress)
        if self.meanwhile is not None:
            action, self.meanwhile = self.meanwhile, None
            action()
        return found


def _copy(session: JvmSession, entry: dict[str, Any], name: str) -> tuple[Path, str]:
    return copy_into_catalog(session, entry, NAMESPACE, name)


def _delete(folder: Path, where: str, meanwhile: Callable[[], None]) -> Any:
    table = open_iceberg(str(folder))
    engine = ConcurrentEngine(meanwhile)
    return run_delete_iceberg(table, DeleteRequest(where), scan_storage(table, {}), engine)


@dataclass(frozen=True)
class Race:
    """A fixture table, what Spark commits meanwhile and the rows it removes, and how dvtool
    gets past it (`retry`: the same changes on the new head; `replan`)."""

    table: str
    spark: str
    spark_removes: Callable[[Row], bool] | None
    how: str
    where: str = "id % 5 = 1 OR v < 0"
    matches: Callable[[Row], bool] = lambda r: bool(r["id"] % 5 == 1 or r["v"] < 0)


RACES = {
    # v2: Spark's DELETE merges the file-scoped deletes of the files it touches and removes
    # the old ones, some of which dvtool's plan replaces too: planned again.
    "v2_spark_delete": Race(
        "v2_part", "DELETE FROM {t} WHERE id % 7 = 2", lambda r: r["id"] % 7 == 2, "replan"
    ),
    # v3: Spark's DVs land on data files dvtool writes DVs for: planned again, merged.
    "v3_spark_delete": Race(
        "v3_part", "DELETE FROM {t} WHERE id % 7 = 2", lambda r: r["id"] % 7 == 2, "replan"
    ),
    # v3: Spark's DVs land on other partitions' files: the same changes on the new head.
    "v3_disjoint_delete": Race(
        "v3_part",
        "DELETE FROM {t} WHERE cat = 'b' AND id % 7 = 2",
        lambda r: r["cat"] == "b" and r["id"] % 7 == 2,
        "retry",
        where="cat = 'a' AND id % 5 = 1",
        matches=lambda r: r["cat"] == "a" and r["id"] % 5 == 1,
    ),
    # A manifest rewrite changes no file: the same changes are produced on the new head.
    # (Not on v3: DuckDB 1.5.5's iceberg extension misreads Spark's rewritten v3 manifests,
    # before any dvtool write, so it cannot be an oracle there.)
    "v2_rewrite_manifests": Race(
        "v2_part", "CALL local.system.rewrite_manifests(table => '{n}')", None, "retry"
    ),
    # New rows may match dvtool's predicate (serializable): planned again, deleted too.
    "v2_spark_insert": Race(
        "v2_flat",
        "INSERT INTO {t} VALUES (1001, 'a', DATE'2024-01-01', 5), "
        "(1002, 'b', DATE'2024-01-02', -7)",
        None,
        "replan",
    ),
    # Spark's compaction removes the files dvtool read: planned again on the new files.
    "v3_spark_compaction": Race(
        "v3_flat",
        "CALL local.system.rewrite_data_files(table => '{n}', "
        "options => map('rewrite-all', 'true'))",
        None,
        "replan",
    ),
}
INSERTED = [
    {"id": 1001, "cat": "a", "d": "2024-01-01", "v": 5},
    {"id": 1002, "cat": "b", "d": "2024-01-02", "v": -7},
]


@pytest.mark.parametrize("name", list(RACES))
def test_delete_against_a_concurrent_spark_commit(
    name: str, iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    race = RACES[name]
    folder, table = _copy(iceberg_spark, iceberg_tables[race.table], name)
    sql = race.spark.format(t=table, n=f"{NAMESPACE}.{name}")
    result = _delete(folder, race.where, lambda: iceberg_spark.sql(sql))
    assert result.snapshot_id is not None
    assert (result.attempts > 1) == (race.how == "replan")
    assert (result.retries > 0) == (race.how == "retry")
    iceberg_spark.sql(f"REFRESH TABLE {table}")
    expected = iceberg_tables[race.table]["expected"]
    if "INSERT" in race.spark:
        expected = sorted(expected + INSERTED, key=lambda r: r["id"])
    removes = race.spark_removes
    expected = [r for r in expected if not race.matches(r) and not (removes and removes(r))]
    readers_agree(iceberg_spark, folder, table, expected)


def test_convert_equality_against_a_concurrent_spark_delete(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A concurrent DELETE adds delete files and no data file: the conversion re-applies."""
    import dvtool.commands.optimize.iceberg as command

    entry = iceberg_tables["v2_equality"]
    folder, table = _copy(iceberg_spark, entry, "v2_equality_race")
    original = command.write_plan
    fired: list[bool] = []

    def write_then_delete(*args: Any) -> Any:
        changes = original(*args)
        if not fired:
            fired.append(True)
            iceberg_spark.sql(f"DELETE FROM {table} WHERE id % 7 = 2")
        return changes

    monkeypatch.setattr(command, "write_plan", write_then_delete)
    result = run_optimize_iceberg(
        open_iceberg(str(folder)), IcebergOptimizeRequest("convert-equality")
    )
    assert result.snapshot_id is not None and fired and result.retries == 1
    expected = [r for r in entry["expected"] if r["id"] % 7 != 2]
    readers_agree(iceberg_spark, folder, table, expected)
