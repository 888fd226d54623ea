"""`dvtool maintain` on prefixes of several tables, on local disk and on the moto S3 server.

The lake: a copy of the golden `table-with-dv-small` (Delta Spark; one file deleting 20% of
its rows), a copy of `dv-partitioned-with-checkpoint` (Delta Spark; two files deleting 33%,
partitions of two small files, a checkpoint), a one-file deltalake table with nothing to do,
and a deltalake table whose commit 1 is missing (broken). Data files are dated 40 days back,
as in a lake that has been running, so that vacuum has expired files to delete.

Oracles: polars `read_delta` and deltalake's `QueryBuilder` read the same rows before and
after; the files to purge are computed from the JSON commits and the DV descriptors
(`tests/oracles.replay_json`), the removes of the REORG commit must be exactly those; file
listings and contents are compared for what must not change (`tree_hashes`).
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake

import dvtool
from dvtool.commands.maintain.command import MaintainRequest, run_maintain
from dvtool.errors import SEVERITY, exit_code_of, worst_kind
from tests.cli_helpers import all_output, run, run_wide
from tests.oracles import (
    canon,
    commit_actions,
    commit_versions,
    copy_golden,
    replay_json,
    tree_hashes,
)
from tests.s3_server import S3Server

STEPS = ["purge", "compaction", "checkpoint", "vacuum", "log-cleanup"]
CLOCK = {"cutoff_ms", "cutoff_timestamp_ms"}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
WEEK_MS = 7 * 24 * 3600 * 1000
FORTY_DAYS_AGO = time.time() - 40 * 24 * 3600


@dataclass(frozen=True)
class Lake:
    """The tables of the module docstring under `root`."""

    root: Path
    small: Path
    partitioned: Path
    nothing: Path
    broken: Path

    @property
    def readable(self) -> list[Path]:
        return [self.small, self.partitioned, self.nothing]


def _one_file_table(path: Path) -> Path:
    write_deltalake(str(path), pa.table({"id": pa.array(range(10), pa.int64())}))
    return path


def _broken_table(path: Path) -> Path:
    """Three deltalake appends, then commit 1 lost: no version after 0 can be read."""
    for k in range(3):
        write_deltalake(str(path), pa.table({"id": pa.array([k], pa.int64())}), mode="append")
    (path / "_delta_log" / f"{1:020d}.json").unlink()
    return path


def _age_data_files(table: Path) -> None:
    """Date every file outside `_delta_log` 40 days back."""
    for path in table.rglob("*"):
        if path.is_file() and "_delta_log" not in path.parts:
            os.utime(path, (FORTY_DAYS_AGO, FORTY_DAYS_AGO))


def _lake(root: Path) -> Lake:
    root.mkdir()
    small = copy_golden("table-with-dv-small", root)
    partitioned = copy_golden("dv-partitioned-with-checkpoint/delta", root / "sub")
    for table in (small, partitioned):
        _age_data_files(table)
    return Lake(
        root,
        small,
        partitioned,
        _one_file_table(root / "nothing"),
        _broken_table(root / "sub" / "broken"),
    )


# -- oracles ---------------------------------------------------------------------------------


def _rows(uri: str, options: dict[str, str] | None = None) -> list[tuple[Any, ...]]:
    """The table's rows; polars and deltalake must agree."""
    by_polars = pl.read_delta(uri, storage_options=options).to_dicts()
    table = DeltaTable(uri, storage_options=options)
    reader = QueryBuilder().register("t", table).execute("select * from t")
    by_deltalake = pa.table(reader.read_all()).to_pylist()
    assert canon(by_polars) == canon(by_deltalake)
    return canon(by_polars)


def _purge_candidates(table: Path, ratio: float) -> set[str]:
    """Live files whose DV deletes at least `ratio` of their rows, from the JSON commits."""
    _, live = replay_json(table)
    out = set()
    for (path, _), add in live.items():
        dv = add.get("deletionVector")
        records = json.loads(add["stats"])["numRecords"]
        if dv and dv["cardinality"] / records >= ratio:
            out.add(path)
    return out


def _operations_after(table: Path, version: int) -> dict[int, list[dict[str, Any]]]:
    """The actions of every commit after `version`."""
    return {v: commit_actions(table, v) for v in commit_versions(table) if v > version}


def _operation(actions: list[dict[str, Any]]) -> str:
    return str(next(a["commitInfo"]["operation"] for a in actions if "commitInfo" in a))


def _removed(commits: dict[int, list[dict[str, Any]]], operation: str | None = None) -> set[str]:
    return {
        unquote(a["remove"]["path"])
        for actions in commits.values()
        if operation is None or _operation(actions) == operation
        for a in actions
        if "remove" in a
    }


def _maintain_json(*args: str | Path, code: int) -> dict[str, Any]:
    result = run("maintain", *args, "--json")
    assert result.exit_code == code, all_output(result)
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _by_location(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["location"]: t for t in doc["tables"]}


# -- a local prefix ----------------------------------------------------------------------------


def test_maintain_a_local_prefix(tmp_path: Path) -> None:
    lake = _lake(tmp_path / "lake")
    old_orphan = lake.small / "part-00009-orphan-from-a-failed-job.snappy.parquet"
    new_orphan = lake.small / "part-00010-being-written-now.snappy.parquet"
    for orphan in (old_orphan, new_orphan):
        orphan.write_bytes(b"PAR1 not committed")
    os.utime(old_orphan, (FORTY_DAYS_AGO, FORTY_DAYS_AGO))
    before = {t: _rows(str(t)) for t in lake.readable}
    purge = {t: _purge_candidates(t, 0.2) for t in (lake.small, lake.partitioned)}
    assert purge[lake.small] and len(purge[lake.partitioned]) == 2
    latest = {t: commit_versions(t)[-1] for t in lake.readable}
    untouched = tree_hashes(lake.nothing)

    # --retain may only lengthen the table's retention: 0h keeps the table's 7 days.
    doc = _maintain_json(lake.root, "--recursive", "--retain", "0h", code=6)

    tables = _by_location(doc)
    assert set(tables) == {str(t) for t in (*lake.readable, lake.broken)}
    broken = tables[str(lake.broken)]
    assert (broken["status"], broken["exit_code"], broken["plan"]) == ("failed", 6, None)
    assert broken["actions"] == [] and broken["metrics"]["versions"] == []
    assert (
        broken["error"]["kind"] == "integrity"
        and "00000000000000000001.json" in (broken["error"]["message"])
    )
    assert (doc["exit_code"], doc["kind"], doc["num_failed"]) == (6, "integrity", 1)
    for table in lake.readable:
        assert _rows(str(table)) == before[table]
        outcome = tables[str(table)]
        assert outcome["status"] == "ok" and outcome["error"] is None
        assert [a["step"] for a in outcome["actions"]] == STEPS
        retention = outcome["plan"]["settings"]["retention_ms"]
        assert (retention["value"], retention["source"]) == (WEEK_MS, "default")

    for table in (lake.small, lake.partitioned):
        commits = _operations_after(table, latest[table])
        # The purge rewrote exactly the files deleting at least 20% of their rows.
        assert [_operation(a) for a in commits.values()][:1] == ["REORG"]
        assert _removed(commits, "REORG") == purge[table]
        _, live = replay_json(table)
        assert all(add.get("deletionVector") is None for add in live.values())
        # Vacuum kept every file the maintenance itself removed (removed just now).
        removed_now = _removed(commits)
        assert removed_now and all((table / path).is_file() for path in removed_now)
        vacuum = next(a for a in tables[str(table)]["actions"] if a["step"] == "vacuum")
        deleted = {f["path"] for f in (vacuum["result"] or {}).get("files", [])}
        assert not deleted & removed_now
        assert not any((table / path).exists() for path in deleted)

    # Compaction packed the small files of each partition into one.
    _, live = replay_json(lake.partitioned)
    directories = [path.rsplit("/", 1)[0] for path, _ in live]
    assert len(directories) == len(set(directories)) == 10
    # The orphan older than the retention went; the one written now stayed.
    assert not old_orphan.exists() and new_orphan.exists()
    # Nothing to do: nothing written, not even an empty VACUUM.
    assert tree_hashes(lake.nothing) == untouched
    nothing = tables[str(lake.nothing)]
    assert {a["status"] for a in nothing["actions"]} == {"nothing-to-do"}
    assert nothing["metrics"]["versions"] == []


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    lake = _lake(tmp_path / "lake")
    old_orphan = lake.small / "part-orphan.snappy.parquet"
    old_orphan.write_bytes(b"orphan")
    os.utime(old_orphan, (FORTY_DAYS_AGO, FORTY_DAYS_AGO))
    before = tree_hashes(lake.root)
    listing = sorted((str(p), p.stat().st_mtime_ns) for p in lake.root.rglob("*"))

    doc = _maintain_json(lake.root, "-r", "--dry-run", code=6)

    assert tree_hashes(lake.root) == before
    assert sorted((str(p), p.stat().st_mtime_ns) for p in lake.root.rglob("*")) == listing
    assert doc["dry_run"] is True
    small = _by_location(doc)[str(lake.small)]
    steps = {a["step"]: a for a in small["actions"]}
    assert steps["purge"]["status"] == "planned"
    [planned_bin] = steps["purge"]["result"]["bins"]
    assert set(planned_bin["inputs"]) == _purge_candidates(lake.small, 0.2)
    assert steps["purge"]["result"]["versions"] == []
    assert steps["vacuum"]["status"] == "planned"
    assert old_orphan.name in {f["path"] for f in steps["vacuum"]["result"]["files"]}
    assert small["metrics"]["versions"] == []

    human = run("maintain", lake.root, "-r", "--dry-run")
    assert human.exit_code == 6
    assert "dry run" in human.stdout and "would" in human.stdout
    assert tree_hashes(lake.root) == before


def test_json_document_shape(tmp_path: Path) -> None:
    table = copy_golden("basic-dv-no-checkpoint", tmp_path)
    doc = _maintain_json(table, code=0)
    assert set(doc) == {
        "dry_run",
        "time_budget_ms",
        "exit_code",
        "kind",
        "num_tables",
        "num_failed",
        "num_skipped",
        "tables",
    }
    [outcome] = doc["tables"]
    assert set(outcome) == {
        "location",
        "format",
        "status",
        "exit_code",
        "plan",
        "actions",
        "metrics",
        "error",
        "recommendation",
    }
    assert outcome["format"] == "delta" and outcome["recommendation"] is None
    plan = outcome["plan"]
    assert set(plan) == {"read_version", "settings", "steps"}
    assert set(plan["settings"]) == {
        "purge_ratio",
        "target_size",
        "checkpoint_interval",
        "retention_ms",
    }
    assert plan["settings"]["purge_ratio"] == {"value": 0.2, "source": "default", "name": None}
    assert [s["step"] for s in plan["steps"]] == STEPS
    assert all(set(s) == {"step", "due", "reason", "files"} for s in plan["steps"])
    assert [a["step"] for a in outcome["actions"]] == STEPS
    assert all(set(a) == {"step", "status", "detail", "result"} for a in outcome["actions"])
    assert set(outcome["metrics"]) == {
        "versions",
        "purged_files",
        "purged_rows",
        "compacted_files",
        "compaction_output_files",
        "checkpoint_version",
        "vacuumed_files",
        "vacuumed_bytes",
        "deleted_log_files",
    }
    # basic-dv-no-checkpoint: one of its two files deletes 40% of its rows.
    assert (outcome["metrics"]["purged_files"], outcome["metrics"]["purged_rows"]) == (1, 2)
    assert outcome["metrics"]["compacted_files"] == 2  # the two small files became one
    assert outcome["metrics"]["versions"] == [2, 3]


def test_thresholds_come_from_flags_then_table_properties(tmp_path: Path) -> None:
    table = _one_file_table(tmp_path / "t")
    properties = {"dvtool.maintain.purgeRatio": "0.5", "delta.checkpointInterval": "4"}
    DeltaTable(str(table)).alter.set_table_properties(properties, raise_if_not_exists=False)
    settings = _maintain_json(table, "--dry-run", code=0)["tables"][0]["plan"]["settings"]
    assert settings["purge_ratio"] == {
        "value": 0.5,
        "source": "property",
        "name": "dvtool.maintain.purgeRatio",
    }
    assert settings["checkpoint_interval"]["value"] == 4
    assert settings["target_size"] == {"value": 256 * 1024**2, "source": "default", "name": None}
    args = ("--purge-ratio", "0.1", "--target-size", "1MB", "--retain", "30d", "--dry-run")
    settings = _maintain_json(table, *args, code=0)["tables"][0]["plan"]["settings"]
    assert settings["purge_ratio"]["value"] == 0.1 and settings["purge_ratio"]["source"] == "flag"
    assert settings["target_size"] == {"value": 1024**2, "source": "flag", "name": None}
    assert settings["retention_ms"] == {
        "value": 30 * 24 * 3600 * 1000,
        "source": "flag",
        "name": None,
    }


# -- time budget -------------------------------------------------------------------------------


def test_time_budget_zero_does_nothing_and_reports_skipped_work(tmp_path: Path) -> None:
    lake = _lake(tmp_path / "lake")
    before = tree_hashes(lake.root)
    doc = _maintain_json(lake.root, "-r", "--time-budget", "0s", code=0)
    assert tree_hashes(lake.root) == before
    assert (doc["time_budget_ms"], doc["num_tables"], doc["num_skipped"]) == (0, 4, 4)
    for outcome in doc["tables"]:
        assert outcome["status"] == "skipped"
        assert [(a["step"], a["status"]) for a in outcome["actions"]] == [
            (step, "skipped") for step in STEPS
        ]
    human = run("maintain", lake.root, "-r", "--time-budget", "0s")
    assert human.exit_code == 0 and "skipped" in human.stdout


def test_time_budget_spent_after_a_step_starts_nothing_more(tmp_path: Path) -> None:
    """A clock that jumps past the budget once the purge has started (no timing involved)."""
    small = copy_golden("table-with-dv-small", tmp_path)
    before = _rows(str(small))
    readings = iter([0.0, 0.0, 0.0])  # the deadline, the table's start, the purge's start

    def clock() -> float:
        return next(readings, 3600.0)

    request = MaintainRequest(time_budget_ms=60_000)
    result = run_maintain([str(small)], request, clock=clock)
    [outcome] = result.tables
    assert outcome.status == "partial" and result.exit_code == 0
    assert [(a.step, a.status) for a in outcome.actions] == [
        ("purge", "done"),
        *((step, "skipped") for step in STEPS[1:]),
    ]
    assert _rows(str(small)) == before
    assert _operation(commit_actions(small, commit_versions(small)[-1])) == "REORG"


@pytest.mark.parametrize("text", ["-1s", "soon", "5 parsecs"])
def test_invalid_time_budget_is_a_usage_error(tmp_path: Path, text: str) -> None:
    result = run("maintain", _one_file_table(tmp_path / "t"), "--time-budget", text)
    assert result.exit_code == 2, all_output(result)
    assert "--time-budget" in result.stderr


# -- exit codes --------------------------------------------------------------------------------


def test_exit_code_is_the_worst_of_the_tables(tmp_path: Path) -> None:
    misconfigured = _one_file_table(tmp_path / "misconfigured")
    DeltaTable(str(misconfigured)).alter.set_table_properties(
        {"dvtool.maintain.purgeRatio": "most"}, raise_if_not_exists=False
    )
    broken = _broken_table(tmp_path / "broken")
    missing = tmp_path / "missing"
    fine = _one_file_table(tmp_path / "fine")

    doc = _maintain_json(fine, misconfigured, code=2)
    error = _by_location(doc)[str(misconfigured)]["error"]
    assert error["kind"] == "usage" and "dvtool.maintain.purgeRatio" in error["message"]
    assert _maintain_json(fine, misconfigured, missing, code=5)["kind"] == "not-found"
    doc = _maintain_json(missing, broken, misconfigured, fine, code=6)
    assert [t["exit_code"] for t in doc["tables"]] == [5, 6, 2, 0]
    assert _by_location(doc)[str(fine)]["status"] == "ok"  # the failures stopped nothing
    human = run("maintain", missing, broken, misconfigured, fine)
    assert human.exit_code == 6
    assert str(broken) in human.stderr and str(misconfigured) in human.stderr


def test_a_bug_on_one_table_is_exit_70_and_the_others_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dvtool.commands.checkpoint as checkpoint

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(checkpoint, "run_checkpoint", crash)
    first = copy_golden("table-with-dv-small", tmp_path)  # its checkpoint is due: it crashes
    second = _one_file_table(tmp_path / "second")
    result = run("maintain", first, second, "--checkpoint-interval", "2", "--json", "-v")
    assert result.exit_code == 70, all_output(result)
    doc = json.loads(result.stdout)
    crashed, fine = doc["tables"]
    assert crashed["error"]["kind"] == "internal" and "simulated bug" in crashed["error"]["message"]
    statuses = [(a["step"], a["status"]) for a in crashed["actions"]]
    assert statuses[:3] == [
        ("purge", "done"),
        ("compaction", "nothing-to-do"),
        ("checkpoint", "failed"),
    ]
    assert fine["status"] == "ok"
    assert "Traceback" in result.stderr and "RuntimeError: simulated bug" in result.stderr


def test_severity_orders_every_exit_code_kind() -> None:
    assert set(SEVERITY) == {
        "ok",
        "error",
        "usage",
        "check-failed",
        "conflict",
        "not-found",
        "integrity",
        "refused",
        "storage",
        "internal",
        "interrupted",
        "terminated",
        "broken-pipe",
    }
    assert worst_kind([]) == "ok"
    assert worst_kind(["conflict", "usage", "ok"]) == "usage"
    assert worst_kind(["refused", "not-found", "storage"]) == "storage"
    assert worst_kind(["storage", "integrity"]) == "integrity"
    assert exit_code_of(worst_kind(["integrity", "internal"])) == 70


# -- checkpoints and log cleanup -----------------------------------------------------------------


def test_a_due_checkpoint_is_written(tmp_path: Path) -> None:
    small = copy_golden("table-with-dv-small", tmp_path)
    before = _rows(str(small))
    doc = _maintain_json(small, "--checkpoint-interval", "2", code=0)
    [outcome] = doc["tables"]
    version = outcome["metrics"]["checkpoint_version"]
    assert version == commit_versions(small)[-1] == 2  # after the purge's REORG
    assert (small / "_delta_log" / f"{version:020d}.checkpoint.parquet").is_file()
    assert _rows(str(small)) == before
    inspected = json.loads(run("inspect", small, "--json").stdout)
    assert (inspected["checkpoint_version"], inspected["commits_since_checkpoint"]) == (2, 0)
    # Once written, the next run finds none due.
    again = _maintain_json(small, "--checkpoint-interval", "2", code=0)["tables"][0]
    assert {a["status"] for a in again["actions"]} == {"nothing-to-do"}


def test_log_cleanup_removes_expired_commits_and_keeps_the_table_readable(
    tmp_path: Path,
) -> None:
    table = tmp_path / "t"
    for k in range(11):
        write_deltalake(str(table), pa.table({"id": pa.array([k], pa.int64())}), mode="append")
    DeltaTable(str(table)).create_checkpoint()  # at version 10, by deltalake
    write_deltalake(str(table), pa.table({"id": pa.array([11], pa.int64())}), mode="append")
    sixty_days_ago = time.time() - 60 * 24 * 3600
    for path in (table / "_delta_log").iterdir():
        os.utime(path, (sixty_days_ago, sixty_days_ago))
    before = _rows(str(table))

    # --target-size 1: no file is small, so only the log is maintained.
    doc = _maintain_json(table, "--target-size", "1", code=0)

    [outcome] = doc["tables"]
    cleanup = next(a for a in outcome["actions"] if a["step"] == "log-cleanup")
    assert cleanup["status"] == "done"
    assert outcome["metrics"]["deleted_log_files"] == cleanup["result"]["deleted_files"] > 0
    assert not (table / "_delta_log" / f"{0:020d}.json").exists()
    assert commit_versions(table) == [10, 11]
    assert _rows(str(table)) == before
    for version in (10, 11):
        assert DeltaTable(str(table), version=version).version() == version


# -- S3 ----------------------------------------------------------------------------------------


def test_maintain_an_s3_prefix(s3_server: S3Server, tmp_path: Path) -> None:
    local = tmp_path / "lake"
    local.mkdir()
    copy_golden("table-with-dv-small", local)
    copy_golden("basic-dv-no-checkpoint", local / "sub")
    _one_file_table(local / "nothing")
    _broken_table(local / "sub" / "broken")
    uri = s3_server.upload(local, "maintain/lake")
    options = s3_server.delta_options()
    readable = {
        "small": f"{uri}/table-with-dv-small",
        "basic": f"{uri}/sub/basic-dv-no-checkpoint",
        "nothing": f"{uri}/nothing",
    }
    before = {name: _rows(u, options) for name, u in readable.items()}
    keys_before = s3_server.keys("maintain/lake/nothing")

    doc = _maintain_json(uri, "--recursive", *s3_server.cli_options(), code=6)

    tables = _by_location(doc)
    assert set(tables) == {*readable.values(), f"{uri}/sub/broken"}
    assert tables[f"{uri}/sub/broken"]["error"]["kind"] == "integrity"
    for name, table_uri in readable.items():
        assert _rows(table_uri, options) == before[name]
    for name in ("small", "basic"):
        metrics = tables[readable[name]]["metrics"]
        assert metrics["purged_files"] == 1 and metrics["versions"]
        copy = s3_server.download(
            readable[name].removeprefix(f"s3://{s3_server.bucket}/"), tmp_path / name
        )
        _, live = replay_json(copy)
        assert all(add.get("deletionVector") is None for add in live.values())
    assert s3_server.keys("maintain/lake/nothing") == keys_before
    assert tables[readable["nothing"]]["metrics"]["versions"] == []


# -- the Python API ------------------------------------------------------------------------------


def _without_clock(doc: Any) -> Any:
    """`doc` without clock readings (vacuum's cutoff) and with random UUIDs masked."""
    if isinstance(doc, dict):
        return {k: _without_clock(v) for k, v in doc.items() if k not in CLOCK}
    if isinstance(doc, list):
        return [_without_clock(v) for v in doc]
    return UUID.sub("UUID", doc) if isinstance(doc, str) else doc


def test_python_api_gives_the_cli_document(tmp_path: Path) -> None:
    first = copy_golden("basic-dv-no-checkpoint", tmp_path / "a")
    second = copy_golden("basic-dv-no-checkpoint", tmp_path / "b")
    api = dvtool.maintain(first, time_budget="1h", retain="30d")
    cli = _maintain_json(second, "--time-budget", "1h", "--retain", "30d", code=0)
    assert api.exit_code == 0 and api.tables[0].metrics["purged_files"] == 1
    text = json.dumps(_without_clock(cli)).replace(str(second), str(first))
    assert _without_clock(api.to_dict()) == json.loads(text)


def test_python_api_on_a_prefix(tmp_path: Path) -> None:
    lake = _lake(tmp_path / "lake")
    before = tree_hashes(lake.root)
    planned = dvtool.maintain(lake.root, recursive=True, dry_run=True)
    assert tree_hashes(lake.root) == before
    assert planned.exit_code == 6 and planned.to_dict()["dry_run"] is True
    assert {t.location for t in planned.tables} == {str(t) for t in (*lake.readable, lake.broken)}
    rows = _rows(str(lake.small))
    result = dvtool.maintain([lake.small, lake.nothing])
    assert [t.status for t in result.tables] == ["ok", "ok"] and result.exit_code == 0
    assert result.tables[0].metrics["purged_files"] == 1
    assert _rows(str(lake.small)) == rows


def test_dry_run_compaction_does_not_count_the_purged_rows_again(tmp_path: Path) -> None:
    """The purge drops the 2 deleted rows of the one file; the compaction planned after it
    sees that file as purged: nothing left to drop, and a single file is not rewritten."""
    table = copy_golden("table-with-dv-small", tmp_path)
    doc = dvtool.maintain(table, dry_run=True).to_dict()
    [outcome] = doc["tables"]
    steps = {a["step"]: a for a in outcome["actions"]}
    [purge_bin] = steps["purge"]["result"]["bins"]
    assert purge_bin["rows_dropped"] == 2
    assert steps["purge"]["detail"].endswith("dropping 2 deleted rows")
    compaction = steps["compaction"]
    assert compaction["status"] == "nothing-to-do", compaction
    assert compaction["result"]["bins"] == []
    reason = next(s for s in outcome["plan"]["steps"] if s["step"] == "compaction")["reason"]
    assert "0 deleting more than 5%" in reason  # the purged file is not counted again
    human = run_wide("maintain", table, "--dry-run")
    assert human.stdout.count("deleted rows") == 1, human.stdout
    assert "purge: would rewrite 1 file into 1, dropping 2 deleted rows" in human.stdout


def test_files_planned_as_purged_are_for_a_dry_run_compaction_only(tmp_path: Path) -> None:
    from dvtool.commands.optimize.command import OptimizeRequest, run_optimize
    from dvtool.delta.log.reader import open_log
    from dvtool.engines.arrow import ArrowEngine
    from dvtool.errors import UsageError

    table = copy_golden("table-with-dv-small", tmp_path)
    log = open_log(str(table))
    for request in (
        OptimizeRequest(purged=frozenset({"x"})),
        OptimizeRequest(purge=True, dry_run=True, purged=frozenset({"x"})),
    ):
        with pytest.raises(UsageError, match="dry-run compaction only"):
            run_optimize(log, request, lambda _n: ArrowEngine())
