"""Acceptance tests of `dvtool vacuum`, on real tables and checked against independent oracles.

- What must survive is computed here from the JSON commits alone (`replay_json`: live adds by
  (path, DV id)) and DV file names derived by the test's own Z85 decoder (`dv_file`); every
  other non-hidden file of the table is expected to go.
- After a real vacuum the rows are read again by polars (`read_delta`, delta-kernel-rs) and
  by the raw reader of `tests.oracles`, which fails if any live data or DV file is missing.
- On a table without DVs, dvtool's dry-run list is compared with deltalake's own vacuum.
- The storage helpers vacuum relies on (`Storage.walk`, `real_relative_to_root`,
  `remove_empty_dir`) are tested point by point at the end.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import dvtool.commands.vacuum.command as vacuum_module
from dvtool.commands.delete.command import DeleteRequest, run_delete
from dvtool.commands.optimize.command import OptimizeRequest, run_optimize
from dvtool.commands.vacuum.command import (
    EXPIRED_CHANGE_DATA,
    EXPIRED_TOMBSTONE,
    ORPHAN_DATA,
    ORPHAN_DV,
    VacuumRequest,
    VacuumResult,
    parse_duration,
    run_vacuum,
)
from dvtool.delta.log.reader import DeltaLog, open_log
from dvtool.engines.arrow import ArrowEngine
from dvtool.errors import (
    LogError,
    StorageError,
    UnsupportedFeatureError,
    UsageError,
    WriteRefusedError,
)
from dvtool.storage.table_storage import Storage
from tests.oracles import (
    canon,
    commit_actions,
    commit_versions,
    copy_golden,
    dv_file,
    raw_rows,
    replay_json,
    tree_hashes,
)

HOUR = 3_600_000
DAY = 24 * HOUR


# -- helpers ---------------------------------------------------------------------------------


def _vacuum(table: Path, **kwargs: Any) -> VacuumResult:
    now_ms = kwargs.pop("now_ms", None)
    progress = kwargs.pop("progress", None)
    return run_vacuum(open_log(str(table)), VacuumRequest(**kwargs), progress, now_ms)


def _backdate(table: Path, age_ms: int) -> None:
    """Set the modification time of every file outside `_delta_log` `age_ms` into the past."""
    moment = time.time() - age_ms / 1000
    for root, dirs, files in os.walk(table):
        dirs[:] = [d for d in dirs if d != "_delta_log"]
        for name in files:
            os.utime(os.path.join(root, name), (moment, moment), follow_symlinks=False)


def _set_age(path: Path, age_ms: int) -> None:
    moment = time.time() - age_ms / 1000
    os.utime(path, (moment, moment), follow_symlinks=False)


def _visible_files(table: Path) -> set[str]:
    """Every file vacuum may look at, by Delta's rules for an unpartitioned table: outside
    `_delta_log`, in no directory or file whose name starts with '_' or '.' (except
    `_change_data`)."""
    out = set()
    for root, dirs, files in os.walk(table):
        rel_root = os.path.relpath(root, table)
        dirs[:] = [
            d
            for d in dirs
            if not d.startswith((".", "_")) or (rel_root == "." and d == "_change_data")
        ]
        for name in files:
            if not name.startswith((".", "_")):
                out.add(os.path.normpath(os.path.join(rel_root, name)))
    return out


def _expected_survivors(table: Path) -> set[str]:
    """Live data files and their DV files, from the JSON commits alone."""
    _, live = replay_json(table)
    keep = set()
    for (path, _), add in live.items():
        keep.add(path)
        dv = add.get("deletionVector")
        if dv and dv["storageType"] == "u":
            keep.add(str(dv_file(table, dv).relative_to(table)))
    return keep


def _commit(table: Path, version: int, actions: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(a) + "\n" for a in actions)
    (table / "_delta_log" / f"{version:020d}.json").write_text(text)


def _info(operation: str = "WRITE") -> dict[str, Any]:
    return {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": operation}}


def _rows(table: Path) -> list[tuple[Any, ...]]:
    return canon(pl.read_delta(str(table)).to_dicts())


def _engine(_: int) -> ArrowEngine:
    return ArrowEngine()


def _dv_table_with_shared_dv(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """basic-dv-no-checkpoint after a DV delete touching both files (one new DV file shared by
    both) and a purge of one of them; returns the table and the files that matter."""
    table = copy_golden("basic-dv-no-checkpoint", tmp_path)
    _, live0 = replay_json(table)
    ((file0, dv0),) = [
        (p, a["deletionVector"]) for (p, _), a in live0.items() if p.startswith("part-00000")
    ]
    old_dv = str(dv_file(table, dv0).relative_to(table))
    run_delete(open_log(str(table)), DeleteRequest("id IN (2, 7)"))
    _, live1 = replay_json(table)
    dvs = {a["deletionVector"]["pathOrInlineDv"] for a in live1.values()}
    assert len(dvs) == 1, "both files should share the new DV file"
    shared = str(dv_file(table, next(iter(live1.values()))["deletionVector"]).relative_to(table))
    run_optimize(open_log(str(table)), OptimizeRequest(purge=True, min_deleted_ratio=0.5), _engine)
    _, live2 = replay_json(table)
    assert file0 not in {p for p, _ in live2}, "the purge should have rewritten file 0"
    file1 = next(p for p, _ in live2 if p.startswith("part-00001"))
    return table, {"file0": file0, "file1": file1, "old_dv": old_dv, "shared_dv": shared}


# -- parse_duration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("168h", 168 * HOUR),
        ("7d", 7 * DAY),
        ("30m", 30 * 60_000),
        ("0h", 0),
        ("90s", 90_000),
        ("1w", 7 * DAY),
        ("500ms", 500),
        ("1.5h", 90 * 60_000),
        (" 2D ", 2 * DAY),
        ("7 days", 7 * DAY),
        ("interval 1 weeks", 7 * DAY),
    ],
)
def test_parse_duration(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize("text", ["", "7", "h", "7x", "7 parsecs", "abc", "1 month", "7dd"])
def test_parse_duration_rejects_garbage(text: str) -> None:
    with pytest.raises(UsageError, match="not a duration") as e:
        parse_duration(text)
    assert e.value.hint and "168h" in e.value.hint


@pytest.mark.parametrize("text", ["-1h", "-0.5d", "interval -1 days"])
def test_parse_duration_rejects_negative(text: str) -> None:
    with pytest.raises(UsageError, match="negative"):
        parse_duration(text)


# -- DV tables: what survives, what goes ------------------------------------------------------


def test_vacuum_after_delete_and_purge_keeps_live_files_and_shared_dv(tmp_path: Path) -> None:
    table, names = _dv_table_with_shared_dv(tmp_path)
    (table / "stray.parquet").write_bytes(b"not referenced")
    (table / "_tmp").mkdir()
    (table / "_tmp" / "hidden.parquet").write_bytes(b"hidden dir")
    (table / ".hidden.parquet").write_bytes(b"hidden file")
    _backdate(table, HOUR)
    rows_before = _rows(table)
    expected = _visible_files(table) - _expected_survivors(table)
    assert {names["file0"], names["old_dv"], "stray.parquet"} <= expected
    assert names["shared_dv"] not in expected

    dry = _vacuum(table, retain_ms=0, force=True, dry_run=True)
    assert {f.path for f in dry.files} == expected
    reasons = {f.path: f.reason for f in dry.files}
    assert reasons[names["file0"]] == EXPIRED_TOMBSTONE
    assert reasons[names["old_dv"]] == ORPHAN_DV
    assert reasons["stray.parquet"] == ORPHAN_DATA
    assert dry.num_bytes == sum((table / p).stat().st_size for p in expected)
    assert dry.start_version is None and dry.deleted_files == 0

    real = _vacuum(table, retain_ms=0, force=True)
    assert [(f.path, f.size, f.reason) for f in real.files] == [
        (f.path, f.size, f.reason) for f in dry.files
    ]
    assert real.deleted_files == len(expected) and not real.failed
    assert real.deleted_bytes == dry.num_bytes
    for path in expected:
        assert not (table / path).exists(), path
    for path in _expected_survivors(table):
        assert (table / path).exists(), path
    assert (table / names["shared_dv"]).exists()
    assert (table / names["file1"]).exists()
    assert (table / "_tmp" / "hidden.parquet").exists()
    assert (table / ".hidden.parquet").exists()
    assert _rows(table) == rows_before
    assert canon(raw_rows(table)) == rows_before


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    table, _ = _dv_table_with_shared_dv(tmp_path)
    _backdate(table, HOUR)
    before = tree_hashes(table)
    result = _vacuum(table, retain_ms=0, force=True, dry_run=True)
    assert result.files and result.dry_run
    assert tree_hashes(table) == before
    assert result.to_json()["num_files"] == len(result.files)


def test_unexpired_tombstones_and_recent_files_are_kept(tmp_path: Path) -> None:
    table = copy_golden("basic-dv-no-checkpoint", tmp_path)
    run_delete(open_log(str(table)), DeleteRequest("id >= 5"))  # removes file 1 entirely
    _, live = replay_json(table)
    removed = "part-00001-1c9b5e60-ab86-4017-9ec9-a6fe4150cdd5-c000.snappy.parquet"
    assert removed not in {p for p, _ in live}
    _backdate(table, 2 * HOUR)
    (table / "fresh.parquet").write_bytes(b"written a moment ago")
    # 1h: the tombstone (deleted just now) is within retention although the file is old.
    kept = _vacuum(table, retain_ms=HOUR, force=True, dry_run=True)
    assert removed not in {f.path for f in kept.files}
    assert "fresh.parquet" not in {f.path for f in kept.files}
    # 0h: the tombstone has expired.
    gone = _vacuum(
        table, retain_ms=0, force=True, dry_run=True, now_ms=int(time.time() * 1000) + 1000
    )
    assert {f.path: f.reason for f in gone.files}[removed] == EXPIRED_TOMBSTONE
    assert "fresh.parquet" in {f.path for f in gone.files}


def test_default_retention_is_the_table_property(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    (table / "eight-days.parquet").write_bytes(b"x")
    (table / "six-days.parquet").write_bytes(b"y")
    _set_age(table / "eight-days.parquet", 8 * DAY)
    _set_age(table / "six-days.parquet", 6 * DAY)
    result = _vacuum(table, dry_run=True)
    assert result.retention_ms == 7 * DAY and result.specified_retention_ms is None
    assert {f.path for f in result.files} == {"eight-days.parquet"}

    # A table that keeps tombstones for one hour.
    versions = commit_versions(table)
    metadata = next(a for a in commit_actions(table, 0) if "metaData" in a)["metaData"]
    metadata["configuration"]["delta.deletedFileRetentionDuration"] = "interval 1 hours"
    _commit(table, versions[-1] + 1, [_info("SET TBLPROPERTIES"), {"metaData": metadata}])
    _set_age(table / "six-days.parquet", 2 * HOUR)
    (table / "recent.parquet").write_bytes(b"z")
    _set_age(table / "recent.parquet", 30 * 60_000)
    result = _vacuum(table, dry_run=True)
    assert result.retention_ms == HOUR and result.default_retention_ms == HOUR
    assert {f.path for f in result.files} == {"eight-days.parquet", "six-days.parquet"}
    # Longer than the table's: allowed without --force.
    assert _vacuum(table, retain_ms=3 * HOUR, dry_run=True).retention_ms == 3 * HOUR


def test_short_retention_is_refused_without_force(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    before = tree_hashes(table)
    for dry_run in (True, False):
        with pytest.raises(WriteRefusedError, match="shorter than the table's") as e:
            _vacuum(table, retain_ms=HOUR, dry_run=dry_run)
        assert "168h" not in e.value.message or "7d" in e.value.message
        assert e.value.hint and "--force" in e.value.hint
    assert tree_hashes(table) == before
    assert _vacuum(table, retain_ms=HOUR, force=True, dry_run=True).retention_ms == HOUR
    with pytest.raises(UsageError, match="negative"):
        _vacuum(table, retain_ms=-1, force=True, dry_run=True)


def test_unparseable_table_retention_needs_retain_and_force(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    metadata = next(a for a in commit_actions(table, 0) if "metaData" in a)["metaData"]
    metadata["configuration"]["delta.deletedFileRetentionDuration"] = "interval 1 month"
    _commit(table, 2, [_info("SET TBLPROPERTIES"), {"metaData": metadata}])
    with pytest.raises(WriteRefusedError, match="interval 1 month"):
        _vacuum(table, dry_run=True)
    with pytest.raises(WriteRefusedError, match="interval 1 month"):
        _vacuum(table, retain_ms=30 * DAY, dry_run=True)
    assert _vacuum(table, retain_ms=30 * DAY, force=True, dry_run=True).files == []


def test_unknown_writer_feature_is_refused(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors", "fancyFutureFeature"],
    }
    _commit(table, 2, [_info("UPGRADE"), {"protocol": protocol}])
    (table / "stray.parquet").write_bytes(b"x")
    _set_age(table / "stray.parquet", 30 * DAY)
    for dry_run in (True, False):
        with pytest.raises(UnsupportedFeatureError, match="fancyFutureFeature"):
            _vacuum(table, retain_ms=0, force=True, dry_run=dry_run)
    assert (table / "stray.parquet").exists()
    assert commit_versions(table)[-1] == 2


def test_vacuum_protocol_check_feature_is_honoured(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors", "vacuumProtocolCheck"],
        "writerFeatures": ["deletionVectors", "vacuumProtocolCheck"],
    }
    _commit(table, 2, [_info("UPGRADE"), {"protocol": protocol}])
    assert _vacuum(table, retain_ms=0, force=True, dry_run=True).read_version == 2
    protocol["writerFeatures"] = [*protocol["writerFeatures"], "someWriterOnlyThing"]
    _commit(table, 3, [_info("UPGRADE"), {"protocol": protocol}])
    with pytest.raises(UnsupportedFeatureError, match="someWriterOnlyThing"):
        _vacuum(table, retain_ms=0, force=True, dry_run=True)


# -- commits ----------------------------------------------------------------------------------


def test_vacuum_start_and_end_commits(tmp_path: Path) -> None:
    table, _ = _dv_table_with_shared_dv(tmp_path)
    _backdate(table, HOUR)
    read_version = commit_versions(table)[-1]
    result = _vacuum(table, retain_ms=0, force=True)
    assert result.start_version == read_version + 1
    assert result.end_version == read_version + 2
    start = commit_actions(table, read_version + 1)
    end = commit_actions(table, read_version + 2)
    assert [list(a) for a in start] == [["commitInfo"]]
    assert [list(a) for a in end] == [["commitInfo"]]
    s, e = start[0]["commitInfo"], end[0]["commitInfo"]
    assert s["operation"] == "VACUUM START"
    assert s["operationParameters"] == {
        "retentionCheckEnabled": "false",
        "defaultRetentionMillis": str(7 * DAY),
        "specifiedRetentionMillis": "0",
    }
    assert s["operationMetrics"] == {
        "numFilesToDelete": str(result.num_files),
        "sizeOfDataToDelete": str(result.num_bytes),
    }
    assert s["readVersion"] == read_version
    assert e["operation"] == "VACUUM END"
    assert e["operationParameters"] == {"status": "COMPLETED"}
    assert e["operationMetrics"]["numDeletedFiles"] == str(result.deleted_files)
    assert e["operationMetrics"]["numVacuumedDirectories"] == str(result.deleted_directories)

    history = DeltaTable(str(table)).history(2)
    assert [h["operation"] for h in history] == ["VACUUM END", "VACUUM START"]
    assert history[1]["operationMetrics"]["numFilesToDelete"] in (
        result.num_files,
        str(result.num_files),
    )
    # The table is still readable by others after the two commits.
    assert _rows(table) == canon(raw_rows(table))


def test_nothing_to_delete_still_records_start_and_end(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    result = _vacuum(table)
    assert result.files == [] and result.deleted_files == 0
    assert (result.start_version, result.end_version) == (2, 3)
    default_only = commit_actions(table, 2)[0]["commitInfo"]["operationParameters"]
    assert default_only == {"retentionCheckEnabled": "true", "defaultRetentionMillis": str(7 * DAY)}


def test_progress_and_failed_deletes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    for i in range(5):
        (table / f"stray-{i}.parquet").write_bytes(b"x" * (i + 1))
    _backdate(table, HOUR)
    real_delete = Storage.delete

    def flaky_delete(self: Storage, location: str) -> None:
        if location.endswith("stray-3.parquet"):
            raise StorageError(f"cannot delete {location}: permission denied")
        real_delete(self, location)

    def failing_bulk(self: Storage, locations: Any) -> None:
        raise StorageError("bulk delete failed")

    monkeypatch.setattr(Storage, "delete", flaky_delete)
    monkeypatch.setattr(Storage, "delete_many", failing_bulk)
    totals: list[int] = []
    advanced: list[int] = []

    def progress(total: int) -> Callable[[int], None]:
        totals.append(total)
        return advanced.append

    result = _vacuum(table, retain_ms=0, force=True, progress=progress)
    assert totals == [5] and sum(advanced) == 5
    assert [f.path for f in result.failed] == ["stray-3.parquet"]
    assert "permission denied" in result.failed[0].error
    assert result.deleted_files == 4 and result.deleted_bytes == 1 + 2 + 3 + 5
    assert (table / "stray-3.parquet").exists()
    end = commit_actions(table, result.end_version or -1)[0]["commitInfo"]
    assert end["operationParameters"] == {"status": "FAILED"}
    assert not (table / "_delta_log" / "_last_vacuum_info").exists()


def test_end_is_recorded_as_failed_when_deleting_crashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    (table / "stray.parquet").write_bytes(b"x")
    _backdate(table, HOUR)

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(vacuum_module, "_delete", boom)
    with pytest.raises(KeyboardInterrupt):
        _vacuum(table, retain_ms=0, force=True)
    ops = [commit_actions(table, v)[0]["commitInfo"] for v in (2, 3)]
    assert [o["operation"] for o in ops] == ["VACUUM START", "VACUUM END"]
    assert ops[1]["operationParameters"] == {"status": "FAILED"}


# -- layout: hidden names, change data, partitions, directories --------------------------------


def test_change_data_and_hidden_names(tmp_path: Path) -> None:
    table = copy_golden("cdf-table-with-cdc-and-dvs", tmp_path)
    cdc = sorted(p.name for p in (table / "_change_data").iterdir())
    assert cdc
    (table / "_change_data" / ".cdc.crc").write_bytes(b"hidden")
    (table / "_other").mkdir()
    (table / "_other" / "x.parquet").write_bytes(b"hidden dir")
    (table / "sub" / "_nested").mkdir(parents=True)
    (table / "sub" / "_nested" / "y.parquet").write_bytes(b"hidden nested dir")
    (table / "sub" / "orphan.parquet").write_bytes(b"orphan")
    _backdate(table, 2 * HOUR)
    rows = _rows(table)
    result = _vacuum(table, retain_ms=HOUR, force=True, dry_run=True)
    reasons = {f.path: f.reason for f in result.files}
    for name in cdc:
        assert reasons[f"_change_data/{name}"] == EXPIRED_CHANGE_DATA
    assert reasons["sub/orphan.parquet"] == ORPHAN_DATA
    assert not any(p.startswith(("_other", "_delta_log", "sub/_nested")) for p in reasons)
    assert "_change_data/.cdc.crc" not in reasons
    assert set(reasons) == _visible_files(table) - _expected_survivors(table)
    _vacuum(table, retain_ms=HOUR, force=True)
    assert _rows(table) == rows
    assert (table / "_other" / "x.parquet").exists()
    assert (table / "_change_data" / ".cdc.crc").exists()
    assert not (table / "sub" / "orphan.parquet").exists()
    assert (table / "sub" / "_nested" / "y.parquet").exists()


def test_partition_directories_with_hidden_looking_names(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(
        str(path), pa.table({"id": [1, 2, 3], "_p": ["x", "y", "y"]}), partition_by=["_p"]
    )
    write_deltalake(
        str(path), pa.table({"id": [9], "_p": ["x"]}), partition_by=["_p"], mode="overwrite"
    )
    (path / "_q=1").mkdir()
    (path / "_q=1" / "not-a-partition.parquet").write_bytes(b"x")
    _backdate(path, HOUR)
    result = _vacuum(path, retain_ms=0, force=True, dry_run=True)
    paths = {f.path for f in result.files}
    assert paths == {p for p in _all_files(path) if p.startswith(("_p=x/", "_p=y/"))} - {
        p for p, _ in replay_json(path)[1]
    }
    assert len(paths) == 2
    assert not any(p.startswith("_q=1") for p in paths)


def _all_files(table: Path) -> set[str]:
    return {
        str(p.relative_to(table))
        for p in table.rglob("*")
        if p.is_file() and "_delta_log" not in p.parts
    }


def test_empty_directories_are_removed(tmp_path: Path) -> None:
    path = tmp_path / "t"
    data = pa.table({"id": [1, 2, 3, 4], "part": ["a", "b", "c", "c"]})
    write_deltalake(str(path), data, partition_by=["part"])
    DeltaTable(str(path)).delete("part = 'b' OR part = 'c'")
    (path / "old-empty").mkdir()
    (path / "old-empty" / "deeper").mkdir()
    (path / "new-empty").mkdir()
    (path / "part=c" / ".keep.crc").write_bytes(b"hidden")
    _backdate(path, 2 * HOUR)
    for d in ("old-empty/deeper", "old-empty"):
        _set_age(path / d, 2 * HOUR)
    _set_age(path / "new-empty", -HOUR)  # modified after the cutoff
    result = _vacuum(path, retain_ms=0, force=True, now_ms=int(time.time() * 1000) + 1000)
    assert {f.path.split("/")[0] for f in result.files} == {"part=b", "part=c"}
    assert not (path / "part=b").exists()
    assert (path / "part=c" / ".keep.crc").exists()  # a hidden file keeps its directory
    assert not (path / "old-empty").exists()
    assert (path / "new-empty").exists()  # too recent: a writer may be about to use it
    assert (path / "part=a").exists()
    assert result.deleted_directories == 3  # part=b, old-empty/deeper, old-empty
    assert canon(pl.read_delta(str(path)).to_dicts()) == canon([{"id": 1, "part": "a"}])


def test_checksum_sidecars_go_with_their_files(tmp_path: Path) -> None:
    """Spark's local file system writes a hidden `.NAME.crc` beside each file and Delta
    Spark's VACUUM deletes it with the file; dvtool does too, so the directory it leaves
    empty goes. Other hidden files stay (a `.crc` of a file that is not deleted, too)."""
    path = tmp_path / "t"
    data = pa.table({"id": [1, 2, 3], "part": ["a", "b", "b"]})
    write_deltalake(str(path), data, partition_by=["part"])
    DeltaTable(str(path)).delete("part = 'b'")
    sidecars = [path / p.parent / f".{p.name}.crc" for p in _data_files(path)]
    for sidecar in sidecars:
        sidecar.write_bytes(b"crc")
    (path / "part=a" / ".other.crc").write_bytes(b"hidden")
    _backdate(path, 2 * HOUR)
    result = _vacuum(path, retain_ms=0, force=True, now_ms=int(time.time() * 1000) + 1000)
    assert [f.path.split("/")[0] for f in result.files] == ["part=b"]
    assert not (path / "part=b").exists()
    assert [s.name for s in sidecars if s.exists()] == [
        s.name for s in sidecars if s.parent.name == "part=a"
    ]
    assert (path / "part=a" / ".other.crc").exists()


def _data_files(table: Path) -> list[Path]:
    return [p.relative_to(table) for p in table.rglob("*.parquet") if "_delta_log" not in p.parts]


def test_absolute_paths_inside_the_root_are_kept(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    (table / "abs.parquet").write_bytes(b"absolute add")
    (table / "uri.parquet").write_bytes(b"file uri add")
    (table / "odd name %.parquet").write_bytes(b"escaped add")
    adds = [
        str(table / "abs.parquet"),
        (table / "uri.parquet").as_uri(),
        "odd%20name%20%25.parquet",
    ]
    _commit(
        table,
        2,
        [_info()]
        + [
            {
                "add": {
                    "path": p,
                    "partitionValues": {},
                    "size": 1,
                    "modificationTime": 1,
                    "dataChange": True,
                }
            }
            for p in adds
        ],
    )
    _backdate(table, HOUR)
    result = _vacuum(table, retain_ms=0, force=True, dry_run=True)
    assert result.files == []
    assert result.num_ignored_log_paths == 0
    # The same table reached through a symbolic link to its directory.
    link = tmp_path / "link-to-table"
    link.symlink_to(table, target_is_directory=True)
    assert _vacuum(link, retain_ms=0, force=True, dry_run=True).files == []


# -- lite -------------------------------------------------------------------------------------


def test_lite_vacuum(tmp_path: Path) -> None:
    table, names = _dv_table_with_shared_dv(tmp_path)
    (table / "stray.parquet").write_bytes(b"only a full vacuum finds me")
    _backdate(table, HOUR)
    rows = _rows(table)
    now = int(time.time() * 1000) + 2000
    last = commit_versions(table)[-1]

    dry = _vacuum(table, retain_ms=0, force=True, lite=True, dry_run=True, now_ms=now)
    assert {f.path: f.reason for f in dry.files} == {
        names["file0"]: EXPIRED_TOMBSTONE,
        names["old_dv"]: ORPHAN_DV,
    }
    assert dry.lite_commits == (0, last)
    real = _vacuum(table, retain_ms=0, force=True, lite=True, now_ms=now)
    assert [f.path for f in real.files] == [f.path for f in dry.files]
    assert real.deleted_files == 2
    assert not (table / names["file0"]).exists() and not (table / names["old_dv"]).exists()
    assert (table / names["shared_dv"]).exists() and (table / "stray.parquet").exists()
    info = json.loads((table / "_delta_log" / "_last_vacuum_info").read_text())
    assert info == {"latestCommitVersionOutsideOfRetentionWindow": last}
    assert real.last_vacuum_version == last
    assert _rows(table) == rows

    # The next run starts after the recorded version: only VACUUM START/END commits remain.
    again = _vacuum(table, retain_ms=0, force=True, lite=True, now_ms=now + 1000)
    assert again.files == [] and again.lite_commits == (last + 1, last + 2)
    # A new delete: lite finds exactly its expired tombstone.
    run_delete(open_log(str(table)), DeleteRequest("id >= 5"))
    _backdate(table, HOUR)
    third = _vacuum(
        table, retain_ms=0, force=True, lite=True, now_ms=int(time.time() * 1000) + 2000
    )
    # File 1 was the last file naming the shared DV file: it goes with it.
    assert {f.path: f.reason for f in third.files} == {
        names["file1"]: EXPIRED_TOMBSTONE,
        names["shared_dv"]: ORPHAN_DV,
    }
    # Only a full vacuum deletes the file no commit ever mentioned.
    full = _vacuum(table, retain_ms=0, force=True)
    assert "stray.parquet" in {f.path for f in full.files}
    assert _rows(table) == canon(raw_rows(table))


def test_lite_keeps_unexpired_tombstones_for_the_next_run(tmp_path: Path) -> None:
    table = copy_golden("basic-dv-no-checkpoint", tmp_path)
    run_delete(open_log(str(table)), DeleteRequest("id >= 5"))  # version 2 removes file 1
    _backdate(table, 2 * HOUR)
    for version in (0, 1):
        _set_age(table / "_delta_log" / f"{version:020d}.json", 3 * HOUR)
    now = int(time.time() * 1000) + 2000
    result = _vacuum(table, retain_ms=HOUR, force=True, lite=True, now_ms=now)
    # Commit 2 is newer than the cutoff: not read, nothing recorded past version 1.
    assert result.files == []
    assert result.lite_commits is None or result.lite_commits[1] < 2
    info = json.loads((table / "_delta_log" / "_last_vacuum_info").read_text())
    assert info["latestCommitVersionOutsideOfRetentionWindow"] < 2
    later = _vacuum(table, retain_ms=0, force=True, lite=True, now_ms=now + 1000)
    assert "part-00001-1c9b5e60-ab86-4017-9ec9-a6fe4150cdd5-c000.snappy.parquet" in {
        f.path for f in later.files
    }


def test_lite_refuses_when_the_log_was_cleaned_up(tmp_path: Path) -> None:
    table = copy_golden("basic-dv-with-checkpoint", tmp_path)
    log_dir = table / "_delta_log"
    checkpoints = sorted(int(p.name[:20]) for p in log_dir.glob("*.checkpoint.parquet"))
    first_kept = checkpoints[0]
    for version in range(first_kept):
        (log_dir / f"{version:020d}.json").unlink()
    rows = _rows(table)
    with pytest.raises(WriteRefusedError, match="--lite") as e:
        _vacuum(table, retain_ms=0, force=True, lite=True, dry_run=True)
    assert "version 0" in e.value.message
    assert e.value.hint and "full vacuum" in e.value.hint

    # A recorded vacuum older than the log: refused too, naming the missing commits.
    (log_dir / "_last_vacuum_info").write_text(
        '{"latestCommitVersionOutsideOfRetentionWindow":2}\n'
    )
    with pytest.raises(WriteRefusedError, match="versions 3 to") as e:
        _vacuum(table, retain_ms=0, force=True, lite=True, dry_run=True)
    assert e.value.hint and "full vacuum" in e.value.hint

    # A full vacuum records where the next lite run starts.
    _backdate(table, HOUR)
    now = int(time.time() * 1000) + 2000
    full = _vacuum(table, retain_ms=0, force=True, now_ms=now)
    latest = commit_versions(table)[-3]
    assert full.last_vacuum_version == latest
    lite = _vacuum(table, retain_ms=0, force=True, lite=True, dry_run=True, now_ms=now + 1000)
    assert lite.files == [] and lite.lite_commits == (latest + 1, latest + 2)
    assert _rows(table) == rows


# -- deltalake's vacuum as an oracle ----------------------------------------------------------


def _history_of_writes(path: Path) -> None:
    part = pa.table({"id": list(range(10)), "part": ["a"] * 5 + ["b"] * 5})
    write_deltalake(str(path), part, partition_by=["part"])
    more = pa.table({"id": list(range(10, 20)), "part": ["a"] * 5 + ["c"] * 5})
    write_deltalake(str(path), more, partition_by=["part"], mode="append")
    DeltaTable(str(path)).delete("id < 3 OR id = 17")
    write_deltalake(
        str(path), pa.table({"id": [100], "part": ["b"]}), partition_by=["part"], mode="append"
    )
    DeltaTable(str(path)).delete("part = 'b'")


@pytest.mark.parametrize("layout", ["partitioned", "unpartitioned"])
def test_dry_run_matches_deltalake_vacuum(tmp_path: Path, layout: str) -> None:
    path = tmp_path / "t"
    if layout == "partitioned":
        _history_of_writes(path)
    else:
        for i in range(3):
            write_deltalake(str(path), pa.table({"id": [i, i + 10]}), mode="append")
        DeltaTable(str(path)).delete("id = 1")
        write_deltalake(str(path), pa.table({"id": [7]}), mode="overwrite")
        write_deltalake(str(path), pa.table({"id": [8]}), mode="append")
    (path / "stray.parquet").write_bytes(b"orphan")
    _backdate(path, HOUR)
    theirs = DeltaTable(str(path)).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=True, full=True
    )
    assert theirs, "the scenario should leave files to vacuum"
    ours = _vacuum(path, retain_ms=0, force=True, dry_run=True)
    assert {f.path for f in ours.files} == {_normalize(path, p) for p in theirs}
    rows = canon(pl.read_delta(str(path)).to_dicts())
    _vacuum(path, retain_ms=0, force=True)
    assert canon(pl.read_delta(str(path)).to_dicts()) == rows
    for p in theirs:
        assert not (path / _normalize(path, p)).exists()


def _normalize(table: Path, path: str) -> str:
    if path.startswith("file://"):
        path = path[len("file://") :]
    if os.path.isabs(path):
        path = os.path.relpath(path, table)
    return path


# -- storage: walk, real_relative_to_root, remove_empty_dir ------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    for rel in ("a.txt", "d/b.txt", "d/e/c.txt", "_skip/s.txt", ".h/x.txt", "_delta_log/0.json"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"12345")
    (root / "empty").mkdir()
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "secret.txt").write_bytes(b"secret")
    (root / "link-dir").symlink_to(outside, target_is_directory=True)
    (root / "link-file.txt").symlink_to(outside / "deep" / "secret.txt")
    yield root, outside


def test_walk_local(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    storage = Storage.for_table(str(root))
    _set_age(root / "a.txt", HOUR)
    entries = {
        e.relative_path: e
        for e in storage.walk(storage.root, lambda d: not d.startswith(("_", ".")))
    }
    assert {p for p, e in entries.items() if e.kind == "file"} == {"a.txt", "d/b.txt", "d/e/c.txt"}
    assert {p for p, e in entries.items() if e.kind == "dir"} == {
        "d",
        "d/e",
        "empty",
        "_skip",
        ".h",
        "_delta_log",
    }
    assert {p for p, e in entries.items() if e.kind == "symlink"} == {"link-dir", "link-file.txt"}
    a = entries["a.txt"]
    assert a.size == 5 and a.location == str(root / "a.txt")
    assert a.modification_time_ms is not None
    assert abs(a.modification_time_ms - (time.time() * 1000 - HOUR)) < 5000
    everything = {e.relative_path for e in storage.walk(storage.root)}
    assert {"_skip/s.txt", ".h/x.txt", "_delta_log/0.json"} <= everything
    assert not any("secret" in p for p in everything)
    assert list(storage.walk(storage.join("missing"))) == []


def test_walk_memory() -> None:
    storage = Storage.for_table("memory://vacuum-walk-test/t")
    for rel in ("a.txt", "d/b.txt", "_delta_log/0.json", "_skip/x/y.txt"):
        storage.write(storage.join(rel), b"abc")
    entries = list(storage.walk(storage.root, lambda d: not d.startswith("_")))
    assert {e.relative_path for e in entries} == {"a.txt", "d/b.txt"}
    assert all(e.kind == "file" and e.size == 3 for e in entries)
    assert {e.location for e in entries} == {storage.join("a.txt"), storage.join("d/b.txt")}
    assert storage.remove_empty_dir(storage.join("d")) is False
    assert storage.real_relative_to_root(storage.join("d/b.txt")) == "d/b.txt"
    assert storage.real_relative_to_root("memory://elsewhere/x") is None


def test_real_relative_to_root(tree: tuple[Path, Path], tmp_path: Path) -> None:
    root, outside = tree
    storage = Storage.for_table(str(root))
    assert storage.real_relative_to_root(str(root / "d" / "b.txt")) == "d/b.txt"
    assert storage.real_relative_to_root(str(root / "link-dir" / "deep" / "secret.txt")) is None
    assert storage.real_relative_to_root(str(root / "link-file.txt")) is None
    assert storage.real_relative_to_root(str(outside / "deep")) is None
    assert storage.real_relative_to_root(str(root / ".." / "outside")) is None
    assert storage.real_relative_to_root("s3://bucket/x") is None
    assert storage.real_relative_to_root(str(root)) == ""
    link = tmp_path / "root-link"
    link.symlink_to(root, target_is_directory=True)
    via_link = Storage.for_table(str(link))
    assert via_link.relative_to_root(str(root / "a.txt")) is None
    assert via_link.real_relative_to_root(str(root / "a.txt")) == "a.txt"


def test_remove_empty_dir(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    storage = Storage.for_table(str(root))
    assert storage.remove_empty_dir(storage.join("empty")) is True
    assert not (root / "empty").exists()
    assert storage.remove_empty_dir(storage.join("empty")) is False  # gone already
    assert storage.remove_empty_dir(storage.join("d")) is False  # not empty
    assert storage.remove_empty_dir(storage.root) is False
    (outside / "hollow").mkdir()
    (root / "link-empty").symlink_to(outside / "hollow", target_is_directory=True)
    assert storage.remove_empty_dir(storage.join("link-empty")) is False
    assert (outside / "hollow").is_dir() and (root / "link-empty").is_symlink()
    assert storage.remove_empty_dir(storage.join("a.txt")) is False
    assert (root / "a.txt").exists()


def test_vacuum_on_an_object_store(tmp_path: Path) -> None:
    """memory:// stands for object stores: flat listings, implicit directories."""
    source = copy_golden("basic-dv-no-checkpoint", tmp_path)
    storage = Storage.for_table(f"memory://vacuum-{uuid.uuid4().hex}/t")
    for path in source.rglob("*"):
        if path.is_file():
            storage.write(storage.join(str(path.relative_to(source))), path.read_bytes())
    storage.write(storage.join("stray.parquet"), b"orphan")
    storage.write(storage.join("sub/stray.parquet"), b"orphan in a directory")
    storage.write(storage.join("_hidden/x.parquet"), b"hidden")
    log = DeltaLog(storage)
    now = int(time.time() * 1000) + 5000
    dry = run_vacuum(log, VacuumRequest(retain_ms=0, force=True, dry_run=True), None, now)
    assert {f.path: f.reason for f in dry.files} == {
        "stray.parquet": ORPHAN_DATA,
        "sub/stray.parquet": ORPHAN_DATA,
    }
    real = run_vacuum(log, VacuumRequest(retain_ms=0, force=True), None, now)
    assert real.deleted_files == 2 and real.deleted_directories == 0
    assert not storage.exists(storage.join("stray.parquet"))
    assert storage.exists(storage.join("_hidden/x.parquet"))
    for path in _expected_survivors(source):
        assert storage.exists(storage.join(path)), path
    assert real.end_version == 3


def test_malformed_dv_descriptor_of_a_live_file_is_refused(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    bad_dv = {"storageType": "u", "pathOrInlineDv": "tooShort", "sizeInBytes": 10, "cardinality": 1}
    body = {"partitionValues": {}, "size": 1, "modificationTime": 1, "dataChange": True}
    _commit(
        table,
        2,
        [
            _info(),
            {"remove": {"path": "old.parquet", "deletionTimestamp": 1, "deletionVector": bad_dv}},
        ],
    )
    _backdate(table, HOUR)
    ignored = _vacuum(table, retain_ms=0, force=True, dry_run=True)
    assert [(p.path, p.action) for p in ignored.ignored_log_paths] == [("tooShort", "remove")]
    _commit(table, 3, [_info(), {"add": {"path": "new.parquet", **body, "deletionVector": bad_dv}}])
    with pytest.raises(LogError, match=r"new\.parquet"):
        _vacuum(table, retain_ms=0, force=True, dry_run=True)


@pytest.mark.parametrize(
    "name",
    [
        "table-with-dv-small",
        "with-short-dv",
        "basic-dv-with-checkpoint",
        "dv-partitioned-with-checkpoint/delta",
        "dv-with-columnmapping/delta",
        "log-replay-dv-key-cases/delta",
        "cdf-table-with-dv",
        "cdf-table-with-cdc-and-dvs",
        "compacted-log-files-table",
    ],
)
def test_golden_dv_tables_keep_exactly_their_live_files(tmp_path: Path, name: str) -> None:
    table = copy_golden(name, tmp_path)
    _backdate(table, HOUR)
    rows = canon(raw_rows(table))  # polars cannot read column mapping
    expected = _visible_files(table) - _expected_survivors(table)
    result = _vacuum(table, retain_ms=0, force=True)
    assert {f.path for f in result.files} == expected
    assert result.deleted_files == len(expected) and not result.failed
    for path in _expected_survivors(table):
        assert (table / path).is_file(), path
    assert canon(raw_rows(table)) == rows
