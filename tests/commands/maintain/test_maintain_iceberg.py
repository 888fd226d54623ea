"""`dvtool maintain` on Iceberg tables (pyiceberg-written, no JVM; the fixture tables of
Iceberg Spark are in tests/reference/test_iceberg_maintain.py).

The lake: a Delta table (deltalake), an Iceberg v2 path table of six appends (one data file
each, 50 rows) with position deletes written by `dvtool delete` (half of the first file's
rows; 8% of the third's, in two commits, so two position delete files apply to it), and an
Iceberg v1 table with `gc.enabled=false` (nothing applies to it but listing).

Oracles: pyiceberg, DuckDB and polars (tests/iceberg_oracles.py) read the rows the test
expects, computed from the ids deleted; the files to purge are found with pyiceberg's
`inspect.files()` (the file whose ids the deletes cut by at least the ratio); the vacuum
is compared with `dvtool vacuum --dry-run` on the same table; `tree_hashes` shows a dry
run or a second run writing nothing.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyiceberg.table import StaticTable

from tests.cli_helpers import all_output, run, run_wide
from tests.iceberg.commit_tables import SCHEMA, new_path_table, rows, through_dvtool
from tests.iceberg_oracles import ORACLES, oracle_rows
from tests.oracles import tree_hashes

ICEBERG_STEPS = ["purge", "rewrite-deletes", "compaction", "checkpoint", "vacuum", "log-cleanup"]
DELTA_ONLY = {"checkpoint", "log-cleanup"}
EXPIRE_AT_ONCE = {"history.expire.max-snapshot-age-ms": "1"}
DELETES = ("id < 25", "id >= 100 AND id < 105", "id >= 105 AND id < 108")
TEN_DAYS = 10 * 24 * 3600


def _latest_metadata(folder: Path) -> Path:
    files = (folder / "metadata").glob("v*.metadata.json")
    return max(files, key=lambda p: int(p.name[1:].split(".")[0]))


def _rows(folder: Path) -> list[dict[str, Any]]:
    """The table's rows; every oracle must agree."""
    metadata = _latest_metadata(folder)
    first, *others = [oracle_rows(oracle, metadata) for oracle in ORACLES]
    assert all(rows == first for rows in others)
    return first


def _expected(ids: range, deleted: set[int]) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"n{i}"} for i in ids if i not in deleted]


def _appended(folder: Path, version: int, files: int, properties: dict[str, str]) -> Path:
    """A path table of `files` appends of 50 rows each (one data file each)."""
    table = through_dvtool(new_path_table(str(folder), version, properties=properties))
    for k in range(files):
        table.append(rows(k * 50, k * 50 + 50))
    return folder


def _json(*args: str | Path, code: int = 0) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == code, all_output(result)
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


@dataclass(frozen=True)
class Lake:
    root: Path
    delta: Path
    ice: Path
    v1: Path
    deleted: set[int]


def _lake(root: Path) -> Lake:
    """The tables of the module docstring."""
    delta = root / "delta_t"
    write_deltalake(str(delta), pa.table({"id": pa.array(range(10), pa.int64())}))
    ice = _appended(root / "ice", 2, 6, EXPIRE_AT_ONCE)
    for where in DELETES:
        assert run("delete", ice, "--where", where, "--mode", "dv").exit_code == 0
    v1 = _appended(root / "sub" / "v1", 1, 2, {"gc.enabled": "false"})
    deleted = set(range(25)) | set(range(100, 108))
    return Lake(root, delta, ice, v1, deleted)


def _files_at_least(folder: Path, ratio: float, deleted: set[int]) -> set[str]:
    """The data files whose deleted ids make at least `ratio` of their rows (pyiceberg)."""
    files = StaticTable.from_metadata(str(_latest_metadata(folder))).inspect.files().to_pylist()
    out = set()
    for f in files:
        if f["content"] != 0:
            continue
        bounds = f["readable_metrics"]["id"]
        ids = range(bounds["lower_bound"], bounds["upper_bound"] + 1)
        if len(deleted.intersection(ids)) / f["record_count"] >= ratio:
            out.add(f["file_path"])
    return out


def _actions(doc: dict[str, Any], location: Path) -> dict[str, dict[str, Any]]:
    table = next(t for t in doc["tables"] if t["location"] == str(location))
    return {a["step"]: a for a in table["actions"]}


# -- the loop --------------------------------------------------------------------------------


def test_maintain_a_prefix_with_delta_and_iceberg_tables(tmp_path: Path) -> None:
    lake = _lake(tmp_path / "lake")
    expected = _expected(range(300), lake.deleted)
    assert _rows(lake.ice) == expected
    to_purge = _files_at_least(lake.ice, 0.2, lake.deleted)
    v1_before = tree_hashes(lake.v1)

    doc = _json("maintain", lake.root, "-r")

    tables = {t["location"]: t for t in doc["tables"]}
    assert set(tables) == {str(lake.delta), str(lake.ice), str(lake.v1)}
    assert [tables[str(p)]["format"] for p in (lake.delta, lake.ice, lake.v1)] == [
        "delta",
        "iceberg",
        "iceberg",
    ]
    assert all(t["status"] == "ok" for t in doc["tables"]) and doc["exit_code"] == 0
    ice = tables[str(lake.ice)]
    assert [a["step"] for a in ice["actions"]] == ICEBERG_STEPS
    steps = _actions(doc, lake.ice)
    assert {s: steps[s]["status"] for s in ICEBERG_STEPS} == {
        "purge": "done",
        "rewrite-deletes": "done",
        "compaction": "done",
        "checkpoint": "not-applicable",
        "vacuum": "done",
        "log-cleanup": "not-applicable",
    }
    [purged] = steps["purge"]["result"]["bins"]
    assert set(purged["files"]) == to_purge
    assert (ice["metrics"]["purged_files"], ice["metrics"]["purged_rows"]) == (1, 25)
    assert ice["metrics"]["rewritten_delete_files"] == 2  # the third file's two
    assert ice["metrics"]["compacted_files"] == 6
    assert len(ice["metrics"]["versions"]) == 3 == len(ice["metrics"]["snapshot_ids"])
    assert ice["metrics"]["expired_snapshots"] > 0 and ice["metrics"]["vacuumed_files"] > 0
    assert _rows(lake.ice) == expected
    files = StaticTable.from_metadata(str(_latest_metadata(lake.ice))).inspect.files()
    assert files.num_rows == 1  # one data file, no delete file left
    # The v1 table with gc.enabled=false: nothing applies, nothing changed.
    v1 = _actions(doc, lake.v1)
    assert {a["status"] for a in v1.values()} == {"not-applicable"}
    assert "gc.enabled=false" in v1["vacuum"]["detail"]
    assert tree_hashes(lake.v1) == v1_before

    # A second run finds nothing to do, and writes nothing.
    before = tree_hashes(lake.ice)
    again = _json("maintain", lake.root, "-r")
    statuses = {a["status"] for a in _actions(again, lake.ice).values()}
    assert statuses == {"nothing-to-do", "not-applicable"}
    assert tree_hashes(lake.ice) == before


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    lake = _lake(tmp_path / "lake")
    before = tree_hashes(lake.root)
    doc = _json("maintain", lake.root, "-r", "--dry-run")
    assert tree_hashes(lake.root) == before
    steps = _actions(doc, lake.ice)
    assert [steps[s]["status"] for s in ("purge", "rewrite-deletes", "compaction", "vacuum")] == [
        "planned"
    ] * 4
    [purged] = steps["purge"]["result"]["bins"]
    assert set(purged["files"]) == _files_at_least(lake.ice, 0.2, lake.deleted)
    assert steps["vacuum"]["result"]["dry_run"] is True
    ice = next(t for t in doc["tables"] if t["location"] == str(lake.ice))
    assert ice["metrics"]["versions"] == [] and ice["metrics"]["purged_files"] == 0

    human = run_wide("maintain", lake.root, "-r", "--dry-run")
    assert human.exit_code == 0, all_output(human)
    assert "rewrite deletes" in human.stdout and "n/a" in human.stdout
    assert "would" in human.stdout
    assert tree_hashes(lake.root) == before


def test_the_vacuum_step_is_dvtool_vacuum(tmp_path: Path) -> None:
    """On a table where only the vacuum is due (three appends, snapshots expiring at once,
    an orphan file 10 days old), maintain deletes exactly what `dvtool vacuum --dry-run`
    lists; afterwards `dvtool vacuum` finds nothing more."""
    folder = _appended(tmp_path / "t", 2, 3, EXPIRE_AT_ONCE)
    orphan = folder / "data" / "orphan.parquet"
    orphan.write_bytes(b"not a table file")
    old = time.time() - TEN_DAYS
    os.utime(orphan, (old, old))
    listed = _json("vacuum", folder, "--dry-run")
    assert listed["num_files"] > 0 and listed["expired_snapshots"]

    doc = _json("maintain", folder)

    steps = _actions(doc, folder)
    assert [steps[s]["status"] for s in ("purge", "rewrite-deletes", "compaction")] == [
        "nothing-to-do"
    ] * 3
    vacuum = steps["vacuum"]
    assert vacuum["status"] == "done"
    assert [f["path"] for f in vacuum["result"]["files"]] == [f["path"] for f in listed["files"]]
    assert vacuum["result"]["expired_snapshots"] == listed["expired_snapshots"]
    assert vacuum["result"]["deleted_files"] == listed["num_files"]
    assert not orphan.exists()
    after = _json("vacuum", folder, "--dry-run")
    assert after["num_files"] == 0 and after["expired_snapshots"] == []
    assert _rows(folder) == _expected(range(150), set())


def test_a_broken_table_fails_alone_and_the_budget_skips(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    good = _appended(root / "good", 2, 2, {})
    broken = _appended(root / "broken", 2, 2, {})
    _latest_metadata(broken).write_text("{not json")
    doc = _json("maintain", root, "-r", code=6)
    tables = {t["location"]: t for t in doc["tables"]}
    assert tables[str(good)]["status"] == "ok"
    assert tables[str(broken)]["status"] == "failed"
    assert doc["exit_code"] == tables[str(broken)]["exit_code"] == 6

    before = tree_hashes(root)
    skipped = _json("maintain", good, "--time-budget", "0s")
    [outcome] = skipped["tables"]
    assert outcome["status"] == "skipped"
    assert tree_hashes(root) == before


def test_a_catalog_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--catalog NAME namespace.table`: a table of a SQL catalog (written by pyiceberg),
    committed through the catalog."""
    import pyiceberg.catalog
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.utils.config import Config

    root = tmp_path / "warehouse"
    root.mkdir()
    uri = f"sqlite:///{root}/catalog.db"
    catalog = SqlCatalog("mx", uri=uri, warehouse=f"file://{root}")
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    for k in range(6):
        table.append(rows(k * 50, k * 50 + 50))
    monkeypatch.setenv("PYICEBERG_CATALOG__MX__URI", uri)
    monkeypatch.setenv("PYICEBERG_CATALOG__MX__WAREHOUSE", f"file://{root}")
    monkeypatch.setattr(pyiceberg.catalog, "_ENV_CONFIG", Config())  # read at import

    doc = _json("maintain", "--catalog", "mx", "db.t")

    [outcome] = doc["tables"]
    assert (outcome["location"], outcome["format"], outcome["status"]) == ("db.t", "iceberg", "ok")
    assert _actions(doc, Path("db.t"))["compaction"]["status"] == "done"
    loaded = catalog.load_table("db.t")
    assert oracle_rows("duckdb", loaded) == _expected(range(300), set())
    assert oracle_rows("pyiceberg", loaded) == _expected(range(300), set())
    assert len(loaded.inspect.files()) == 1
    refused = run("maintain", "--catalog", "mx", "-r", "db")
    assert refused.exit_code == 2 and "--catalog" in all_output(refused)


def test_time_budget_spent_after_the_purge_starts_nothing_more(tmp_path: Path) -> None:
    """A clock that jumps past the budget once the purge has started: the later Iceberg
    steps are skipped, the Delta-only ones still not applicable; the table reads the same."""
    from dvtool.commands.maintain.command import MaintainRequest, run_maintain

    lake = _lake(tmp_path / "lake")
    readings = iter([0.0, 0.0, 0.0])  # the deadline, the table's start, the purge's start

    def clock() -> float:
        return next(readings, 3600.0)

    result = run_maintain([str(lake.ice)], MaintainRequest(time_budget_ms=60_000), clock=clock)
    [outcome] = result.tables
    assert outcome.status == "partial" and result.exit_code == 0
    assert [(a.step, a.status) for a in outcome.actions] == [
        ("purge", "done"),
        ("rewrite-deletes", "skipped"),
        ("compaction", "skipped"),
        ("checkpoint", "not-applicable"),
        ("vacuum", "skipped"),
        ("log-cleanup", "not-applicable"),
    ]
    assert _rows(lake.ice) == _expected(range(300), lake.deleted)


def test_iceberg_thresholds_come_from_flags_then_table_properties(tmp_path: Path) -> None:
    day = 24 * 3600 * 1000
    properties = {
        "dvtool.maintain.purgeRatio": "0.5",
        "write.target-file-size-bytes": "1048576",
        "history.expire.max-snapshot-age-ms": str(2 * day),
    }
    folder = _appended(tmp_path / "t", 2, 1, properties)
    settings = _json("maintain", folder, "--dry-run")["tables"][0]["plan"]["settings"]
    assert settings == {
        "purge_ratio": {"value": 0.5, "source": "property", "name": "dvtool.maintain.purgeRatio"},
        "target_size": {
            "value": 1048576,
            "source": "property",
            "name": "write.target-file-size-bytes",
        },
        "checkpoint_interval": {"value": None, "source": "not-applicable", "name": None},
        "retention_ms": {
            "value": 2 * day,
            "source": "property",
            "name": "history.expire.max-snapshot-age-ms",
        },
    }
    flags = ("--purge-ratio", "0.1", "--target-size", "2MiB", "--retain", "1d", "--dry-run")
    settings = _json("maintain", folder, *flags)["tables"][0]["plan"]["settings"]
    assert settings["purge_ratio"] == {"value": 0.1, "source": "flag", "name": None}
    assert settings["target_size"] == {"value": 2 * 1048576, "source": "flag", "name": None}
    assert settings["retention_ms"]["value"] == 2 * day  # a shorter --retain is ignored
    # A longer one is used for snapshots and orphans alike, never below Iceberg's 3 days.
    longer = _json("maintain", folder, "--retain", "60h", "--dry-run")["tables"][0]
    assert longer["plan"]["settings"]["retention_ms"] == {
        "value": 3 * day,
        "source": "flag",
        "name": None,
    }
    vacuum = {a["step"]: a for a in longer["actions"]}["vacuum"]["result"]
    assert vacuum["retention_ms"] == vacuum["orphan_retention_ms"] == 3 * day
