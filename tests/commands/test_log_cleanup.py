"""The log cleanup (`dvtool vacuum --log`, and after every checkpoint dvtool writes), on tables
written by deltalake, by hand as Delta Spark writes them (in-commit timestamps) and golden
Delta Spark tables, checked against independent oracles:

- what is deleted is computed here from the file times or in-commit timestamps the test set
  (`expected_deleted`: the protocol's steps, written out again), and compared exactly;
- every version from the cutoffCommit on is read again by deltalake (`DeltaTable(path,
  version=v)`) and polars (`read_delta(version=v)`) and equals what they read before;
- deltalake's own `cleanup_metadata()` on an identical copy leaves the same log.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from dvtool.commands.delete.command import DeleteRequest, run_delete
from dvtool.commands.downgrade.command import run_downgrade
from dvtool.commands.log_cleanup import LogCleanupRequest, LogCleanupResult, run_log_cleanup
from dvtool.delta.log.reader import open_log
from dvtool.errors import WriteRefusedError
from tests.cli_helpers import run
from tests.oracles import commit_versions, copy_golden
from tests.writers import DeltaLog, compact_json, delta_field, metadata_action, write_spark_parquet

DAY_MS = 86_400_000
NOW_MS = int(time.time() * 1000)
# Midnight UTC 30 days ago: the default retention's cutOffTimestamp.
CUTOFF_MS = (NOW_MS - 30 * DAY_MS) - (NOW_MS - 30 * DAY_MS) % DAY_MS
OLD_MS = CUTOFF_MS - 10 * DAY_MS  # well before the cutoff
Rows = list[tuple[Any, ...]]


# -- tables and times ------------------------------------------------------------------------


def deltalake_table(path: Path, commits: int, checkpoints: Iterable[int], **config: str) -> Path:
    """`commits` appends of one row (id = version) by deltalake, with deltalake's
    `create_checkpoint()` after the versions in `checkpoints`."""
    wanted = set(checkpoints)
    for v in range(commits):
        data = pa.table({"id": pa.array([v], pa.int64())})
        write_deltalake(str(path), data, mode="append", configuration=config or None)
        if v in wanted:
            DeltaTable(str(path)).create_checkpoint()
    return path


def version_of(name: str) -> int | None:
    """The version a log file (or its hidden .crc) belongs to, by its 20-digit prefix."""
    base = name.rpartition("/")[2].lstrip(".")
    return int(base[:20]) if base[:20].isdigit() else None


def below(name: str, version: int) -> bool:
    """Whether log file `name` belongs to a version before `version`."""
    v = version_of(name)
    return v is not None and v < version


def set_times(table: Path, times: dict[int, int]) -> None:
    """Give every file of version v in `_delta_log` (commit, checkpoint parts, checksums and
    their .crc files) the modification time times[v] (ms)."""
    for path in (table / "_delta_log").rglob("*"):
        v = version_of(path.name)
        if path.is_file() and v is not None and v in times:
            os.utime(path, (times[v] / 1000, times[v] / 1000))


def log_names(table: Path) -> set[str]:
    log = table / "_delta_log"
    return {p.relative_to(log).as_posix() for p in log.rglob("*") if p.is_file()}


def expected_deleted(table: Path, commit_times: dict[int, int]) -> tuple[int, set[str]]:
    """(cutoffCommit, the files to delete) by the protocol's steps, from the commit times the
    test chose: the newest commit at or before the cutoff, the newest complete single-file
    or multi-part checkpoint at or before it, then every file whose version is lower."""
    names = log_names(table)
    cutoff_commit = max(v for v, t in commit_times.items() if t <= CUTOFF_MS)
    checkpoints = {
        v
        for n in names
        if ".checkpoint." in n and not n.startswith((".", "_")) and (v := version_of(n)) is not None
    }
    boundary = max(v for v in checkpoints if v <= cutoff_commit)
    gone = {n for n in names if not n.startswith("_") and below(n, boundary)}
    return cutoff_commit, gone


def deltalake_rows(table: Path, version: int) -> Rows:
    """The rows deltalake reads at `version` (DataFusion's scan, which applies DVs)."""
    query = QueryBuilder().register("t", DeltaTable(str(table), version=version))
    batches = query.execute("select * from t").read_all()
    data = pa.Table.from_batches(batches) if isinstance(batches, list) else batches
    return sorted(zip(*(c.to_pylist() for c in data.columns), strict=True))


def versions_rows(table: Path, versions: Iterable[int], *, polars: bool = True) -> dict[int, Rows]:
    """Each version's rows as deltalake reads them, and polars too (which must agree)
    unless `polars` is False (it has no v2Checkpoint support)."""
    out = {}
    for v in versions:
        out[v] = deltalake_rows(table, v)
        if polars:
            assert sorted(pl.read_delta(str(table), version=v).rows()) == out[v], v
    return out


def cleanup(table: Path, dry_run: bool = False, now_ms: int = NOW_MS) -> LogCleanupResult:
    return run_log_cleanup(open_log(str(table)), LogCleanupRequest(dry_run, now_ms))


def check_cleanup(table: Path, commit_times: dict[int, int]) -> LogCleanupResult:
    """Run the cleanup and check it against the oracles: exactly the expected files are
    gone, and every version from the cutoffCommit on reads as before."""
    set_times(table, commit_times)
    cutoff_commit, gone = expected_deleted(table, commit_times)
    latest = max(commit_times)
    before = versions_rows(table, range(cutoff_commit, latest + 1))
    names = log_names(table)
    result = cleanup(table)
    assert result.cutoff_commit == cutoff_commit
    assert {f.name for f in result.files} == gone
    assert log_names(table) == names - gone
    assert versions_rows(table, range(cutoff_commit, latest + 1)) == before
    assert run("inspect", table, "--verify").exit_code == 0
    return result


# -- file modification times -------------------------------------------------------------------


def test_removes_exactly_the_expired_files_by_file_time(tmp_path: Path) -> None:
    table = deltalake_table(tmp_path / "t", 14, [3, 6, 9, 12])
    times = {v: OLD_MS + v * 1000 if v <= 7 else NOW_MS - (14 - v) * 1000 for v in range(14)}
    result = check_cleanup(table, times)
    assert (result.cutoff_commit, result.cutoff_checkpoint) == (7, 6)
    assert commit_versions(table)[0] == 6 and result.deleted_bytes > 0


def test_deltalake_cleanup_metadata_leaves_the_same_log(tmp_path: Path) -> None:
    """deltalake's own cleanup on an identical copy: the same files remain (its cutoff is not
    truncated to midnight, so no commit lies between the two cutoffs here)."""
    table = deltalake_table(tmp_path / "t", 12, [4, 8])
    times = {v: OLD_MS + v * 1000 if v <= 9 else NOW_MS for v in range(12)}
    set_times(table, times)
    twin = tmp_path / "twin"
    shutil.copytree(table, twin)
    cleanup(table)
    DeltaTable(str(twin)).cleanup_metadata()
    assert log_names(table) == log_names(twin)
    assert commit_versions(table)[0] == 8


def test_a_commit_at_midnight_is_the_cutoff_commit(tmp_path: Path) -> None:
    table = deltalake_table(tmp_path / "t", 6, [1, 3])
    times = {0: OLD_MS, 1: OLD_MS + 1, 2: OLD_MS + 2, 3: CUTOFF_MS, 4: CUTOFF_MS + 1, 5: NOW_MS}
    result = check_cleanup(table, times)
    assert (result.cutoff_commit, result.cutoff_checkpoint) == (3, 3)


def test_checkpoints_too_new_mean_nothing_to_do(tmp_path: Path) -> None:
    table = deltalake_table(tmp_path / "t", 8, [6])
    set_times(table, {v: OLD_MS + v if v < 5 else NOW_MS for v in range(8)})
    names = log_names(table)
    result = cleanup(table)
    assert result.deleted_files == 0 and result.files == ()
    assert result.reason == "no complete checkpoint at or before version 4"
    assert log_names(table) == names


def test_young_table_nothing_to_do(tmp_path: Path) -> None:
    table = deltalake_table(tmp_path / "t", 3, [1])
    result = cleanup(table)
    assert result.reason == "no commit is older than the cutoff" and result.deleted_files == 0


def test_retention_property_and_dry_run(tmp_path: Path) -> None:
    table = deltalake_table(
        tmp_path / "t", 6, [2, 4], **{"delta.logRetentionDuration": "interval 2 days"}
    )
    three_days = NOW_MS - 3 * DAY_MS
    set_times(table, {v: three_days + v if v <= 4 else NOW_MS for v in range(6)})
    names = log_names(table)
    plan = cleanup(table, dry_run=True)
    assert plan.dry_run and plan.retention_ms == 2 * DAY_MS
    assert log_names(table) == names, "a dry run deletes nothing"
    done = cleanup(table)
    assert [f.name for f in done.files] == [f.name for f in plan.files]
    assert commit_versions(table) == [4, 5]
    doc = done.to_json()
    assert json.loads(json.dumps(doc)) == doc and doc["deleted_files"] == done.deleted_files


def test_disabled_by_the_table(tmp_path: Path) -> None:
    config = {"delta.enableExpiredLogCleanup": "false", "delta.checkpointInterval": "5"}
    table = deltalake_table(tmp_path / "t", 5, [2], **config)
    set_times(table, {v: OLD_MS + v for v in range(5)})
    names = log_names(table)
    result = cleanup(table)
    assert not result.enabled and "enableExpiredLogCleanup is false" in str(result.reason)
    # Nor after a checkpoint dvtool writes (version 5 is due with checkpointInterval 5).
    run_delete(open_log(str(table)), DeleteRequest("id = 0", mode="cow"))
    assert names <= log_names(table)
    assert (table / "_delta_log" / "00000000000000000005.checkpoint.parquet").exists()


def test_unreadable_property_is_refused(tmp_path: Path) -> None:
    table = deltalake_table(tmp_path / "t", 3, [1], **{"delta.logRetentionDuration": "forever"})
    with pytest.raises(WriteRefusedError, match=r"delta\.logRetentionDuration"):
        cleanup(table)
    result = run("vacuum", table, "--log")
    assert result.exit_code == 7 and "forever" in result.stderr


def test_last_checkpoint_bounds_the_cleanup(tmp_path: Path) -> None:
    """`_last_checkpoint` naming an older checkpoint than the cutoff one (its writer died
    before moving it): readers that start there must still find every commit after it."""
    table = deltalake_table(tmp_path / "t", 3, [2])
    stale = (table / "_delta_log" / "_last_checkpoint").read_text()
    deltalake_table(table, 6, [2])  # versions 3..8, checkpoint at 5
    (table / "_delta_log" / "_last_checkpoint").write_text(stale)
    set_times(table, {v: OLD_MS + v for v in range(9)})
    result = cleanup(table)
    assert (result.cutoff_commit, result.cutoff_checkpoint) == (8, 2)
    assert commit_versions(table)[0] == 2
    assert pl.read_delta(str(table)).height == 9
    assert DeltaTable(str(table)).to_pyarrow_table().num_rows == 9


# -- in-commit timestamps ----------------------------------------------------------------------

ICT_FROM = 4


def ict_table(path: Path, icts: dict[int, int], checkpoints: Iterable[int]) -> Path:
    """A table as Delta Spark writes it: appends of one row (id = version); version ICT_FROM
    enables in-commit timestamps (protocol 1/7 with `inCommitTimestamp`, the enablement
    version and timestamp properties), and every commit from it on carries its ICT first
    in commitInfo. deltalake writes the checkpoints."""
    log = DeltaLog(path)
    fields = [delta_field("id", "long")]
    table_id = str(uuid.uuid4())
    wanted = set(checkpoints)
    for v in sorted(icts):
        info: dict[str, Any] = {"timestamp": icts[v], "operation": "WRITE"}
        info.update(operationParameters={"mode": "Append"}, isBlindAppend=True)
        if v >= ICT_FROM:
            info = {"inCommitTimestamp": icts[v], **info}
        actions: list[dict[str, Any]] = [{"commitInfo": info}]
        if v == 0:
            actions.append({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}})
            actions.append(metadata_action(fields, created_time=icts[0], table_id=table_id))
        if v == ICT_FROM:
            features = ["appendOnly", "invariants", "inCommitTimestamp"]
            protocol = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": features}
            config = {
                "delta.enableInCommitTimestamps": "true",
                "delta.inCommitTimestampEnablementVersion": str(v),
                "delta.inCommitTimestampEnablementTimestamp": str(icts[v]),
            }
            actions.append({"protocol": protocol})
            actions.append(
                metadata_action(
                    fields, created_time=icts[0], table_id=table_id, configuration=config
                )
            )
        name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        data = pa.table({"id": pa.array([v], pa.int64())})
        size = write_spark_parquet(path / name, data, spark_version="3.5.2")
        stats = {"numRecords": 1, "minValues": {"id": v}, "maxValues": {"id": v}}
        add = {"path": name, "partitionValues": {}, "size": size}
        add.update(modificationTime=icts[v], dataChange=True, stats=compact_json(stats))
        log.commit([*actions, {"add": add}])
        if v in wanted:
            DeltaTable(str(path)).create_checkpoint()
    return path


def test_in_commit_timestamps_decide_from_their_enablement_version(tmp_path: Path) -> None:
    """Files all written now, in-commit timestamps from version 4 on in the past: the cutoff
    follows the ICTs there; before version 4 (no ICT) the file times count."""
    n = 14
    icts = {v: OLD_MS + v * 1000 if v <= 9 else NOW_MS - (n - v) * 1000 for v in range(n)}
    table = ict_table(tmp_path / "t", icts, [2, 6, 8, 11])
    files = {v: OLD_MS + v for v in range(ICT_FROM)} | {v: NOW_MS for v in range(ICT_FROM, n)}
    set_times(table, files)
    before = versions_rows(table, range(9, n))
    result = cleanup(table)
    assert (result.cutoff_commit, result.cutoff_checkpoint) == (9, 8)
    assert commit_versions(table) == list(range(8, n))
    assert versions_rows(table, range(9, n)) == before


def test_commit_files_before_the_enablement_decide_by_file_time(tmp_path: Path) -> None:
    """The cutoff lies before the first ICT: versions 0..3 by file time (3 is young)."""
    icts = {v: NOW_MS - (10 - v) * 1000 for v in range(10)}
    table = ict_table(tmp_path / "t", icts, [1, 2])
    set_times(table, {0: OLD_MS, 1: OLD_MS + 1, 2: OLD_MS + 2} | {v: NOW_MS for v in range(3, 10)})
    result = cleanup(table)
    assert (result.cutoff_commit, result.cutoff_checkpoint) == (2, 2)
    assert commit_versions(table)[0] == 2


def test_new_files_with_old_in_commit_timestamps_expire(tmp_path: Path) -> None:
    """A table copied yesterday (every file time new): its ICTs still say how old it is,
    and the versions before the enablement are older than its (old) enablement timestamp."""
    icts = {v: OLD_MS + v * 1000 for v in range(8)}
    table = ict_table(tmp_path / "t", icts, [5])
    set_times(table, {v: NOW_MS for v in range(8)})
    before = versions_rows(table, [7])
    result = cleanup(table)
    assert (result.cutoff_commit, result.cutoff_checkpoint) == (7, 5)
    assert commit_versions(table) == [5, 6, 7]
    assert versions_rows(table, [7]) == before


# -- checkpoint formats and the golden tables --------------------------------------------------


def golden_times(table: Path, old_until: int) -> dict[int, int]:
    versions = commit_versions(table)
    return {v: OLD_MS + v * 1000 if v <= old_until else NOW_MS for v in versions}


def test_multi_part_checkpoint_golden(tmp_path: Path) -> None:
    table = copy_golden("v1-multi-part-partitioned-struct-stats-only", tmp_path)
    result = check_cleanup(table, golden_times(table, 5))
    assert result.cutoff_checkpoint == 5
    assert sorted(n for n in log_names(table) if not n.startswith(".")) == [
        "00000000000000000005.checkpoint.0000000001.0000000003.parquet",
        "00000000000000000005.checkpoint.0000000002.0000000003.parquet",
        "00000000000000000005.checkpoint.0000000003.0000000003.parquet",
        "00000000000000000005.crc",
        "00000000000000000005.json",
        "_last_checkpoint",
    ]


@pytest.mark.parametrize(
    "name", ["v2-checkpoints-parquet-with-sidecars", "v2-checkpoints-json-with-sidecars"]
)
def test_v2_checkpoints_and_their_sidecars(tmp_path: Path, name: str) -> None:
    """Cutoff checkpoint 3: the UUID checkpoints 1 and 2 go, and the sidecars only they
    referenced (old enough); checkpoint 3's and the newer ones' sidecars stay."""
    table = copy_golden(name, tmp_path)
    times = golden_times(table, 3)
    set_times(table, times)
    sidecars = {n for n in log_names(table) if n.startswith("_sidecars/")}
    before = versions_rows(table, range(3, 7), polars=False)
    result = cleanup(table)
    assert result.cutoff_checkpoint == 3
    gone = {f.name for f in result.files}
    assert {n for n in gone if n.startswith("_sidecars/")} == {n for n in sidecars if below(n, 3)}
    assert all(below(n, 3) for n in gone)
    assert commit_versions(table)[0] == 3
    assert versions_rows(table, range(3, 7), polars=False) == before
    assert run("inspect", table, "--verify").exit_code == 0


def test_garbage_in_the_log_stays(tmp_path: Path) -> None:
    """Files that are no log entries, some named almost like one, are never deleted; a file
    named like a checkpoint before the cutoff checkpoint is, as the protocol says."""
    table = copy_golden("basic-dv-with-checkpoint", tmp_path)
    junk = {
        "00000000000000000001.json.bak",
        "0000000000000000001.json",
        "00000000000000000001.checkpoint.parquet.tmp",
        "00000000000000000003.00000000000000000001.compacted.json",
        ".00000000000000000001.json.swp",
        "notes.txt",
    }
    for name in junk:
        (table / "_delta_log" / name).write_bytes(b"garbage")
    fake = "00000000000000000002.checkpoint.parquet"
    (table / "_delta_log" / fake).write_bytes(b"not parquet")
    times = golden_times(table, 30)
    set_times(table, times)
    _, gone = expected_deleted(table, times)
    before = versions_rows(table, [30, 46])
    result = cleanup(table)
    assert result.cutoff_checkpoint == 30 and fake in gone
    assert {f.name for f in result.files} == gone - junk
    assert junk <= log_names(table)
    assert versions_rows(table, [30, 46]) == before


def test_an_unreadable_cutoff_checkpoint_stops_the_cleanup(tmp_path: Path) -> None:
    """A log never starts at a checkpoint that cannot be opened (cut in half, or naming a
    sidecar that is gone): nothing is deleted and the result says why."""
    table = copy_golden("basic-dv-with-checkpoint", tmp_path)
    checkpoint = table / "_delta_log" / "00000000000000000030.checkpoint.parquet"
    checkpoint.write_bytes(checkpoint.read_bytes()[:100])
    set_times(table, golden_times(table, 30))
    names = log_names(table)
    result = cleanup(table)
    assert result.deleted_files == 0 and "cannot be read" in str(result.reason)
    assert checkpoint.name in str(result.reason) and log_names(table) == names

    v2 = copy_golden("v2-checkpoints-json-with-sidecars", tmp_path / "v2")
    for sidecar in (v2 / "_delta_log" / "_sidecars").glob("00000000000000000003.*"):
        sidecar.unlink()
    set_times(v2, golden_times(v2, 3))
    names = log_names(v2)
    result = cleanup(v2)
    assert result.deleted_files == 0 and "missing sidecar" in str(result.reason)
    assert log_names(v2) == names


def test_compactions_go_with_the_commits_they_cover(tmp_path: Path) -> None:
    table = copy_golden("compacted-log-files-table", tmp_path)
    assert run("checkpoint", table).exit_code == 0  # the table has no checkpoint: at 25
    set_times(table, golden_times(table, 25))
    before = versions_rows(table, [25])
    result = cleanup(table)
    assert result.cutoff_checkpoint == 25
    assert {n for n in log_names(table) if not n.startswith(".")} == {
        "00000000000000000025.json",
        "00000000000000000025.checkpoint.parquet",
        "_last_checkpoint",
    }
    assert sum(".compacted." in f.name for f in result.files) == 3
    assert versions_rows(table, [25]) == before


def test_checkpoint_protection(tmp_path: Path) -> None:
    """After a downgrade (protected version V with barrier checkpoints before it) the history
    before V goes only all at once: with the cutoff checkpoint a barrier before V nothing is
    deleted; once V itself is old enough, everything before it."""
    table = copy_golden("table-with-dv-small", tmp_path)
    protected = run_downgrade(open_log(str(table))).version
    assert protected is not None
    versions = commit_versions(table)
    set_times(table, {v: OLD_MS + v * 1000 if v < protected else NOW_MS for v in versions})
    names = log_names(table)
    result = cleanup(table)
    assert result.deleted_files == 0 and "checkpointProtection" in str(result.reason)
    assert log_names(table) == names
    check_cleanup(table, {v: OLD_MS + v * 1000 for v in versions})
    assert commit_versions(table) == [protected]


# -- after dvtool's own checkpoints, and the motivating case -----------------------------------


def test_cleanup_runs_after_a_checkpoint_dvtool_writes(tmp_path: Path) -> None:
    table = deltalake_table(tmp_path / "t", 10, [5])
    set_times(table, {v: OLD_MS + v for v in range(10)})
    result = run_delete(open_log(str(table)), DeleteRequest("id = 3", mode="cow"))
    assert result.version == 10 and result.checkpoint_warning is None
    assert commit_versions(table) == list(range(5, 11))
    assert versions_rows(table, range(9, 11))[10] == [(v,) for v in range(10) if v != 3]


def test_a_failed_cleanup_is_a_warning_and_the_commit_stands(tmp_path: Path) -> None:
    table = deltalake_table(tmp_path / "t", 10, [5], **{"delta.logRetentionDuration": "1 month"})
    result = run_delete(open_log(str(table)), DeleteRequest("id = 3", mode="cow"))
    assert result.version == 10
    assert "log cleanup" in str(result.checkpoint_warning)
    assert "delta.logRetentionDuration" in str(result.checkpoint_warning)
    assert (table / "_delta_log" / "00000000000000000010.checkpoint.parquet").exists()


def test_twenty_vacuum_runs_do_not_grow_the_log(tmp_path: Path) -> None:
    """The issue's case: a vacuum a (simulated) week apart, twenty times. Each run commits
    twice and every tenth version is checkpointed, after which the log loses what expired:
    it stops growing, and every version inside the retention stays readable."""
    table = deltalake_table(tmp_path / "t", 3, [])
    sizes = []
    for _ in range(20):
        for path in (table / "_delta_log").rglob("*"):  # a week passes
            moment = path.stat().st_mtime - 7 * 86_400
            os.utime(path, (moment, moment))
        assert run("vacuum", table).exit_code == 0
        sizes.append(len(commit_versions(table)))
    assert max(sizes) <= 10 + 5 * 2 + 2, sizes  # retention (5 weeks) + a checkpoint interval
    assert max(sizes[10:]) <= max(sizes[:10]), sizes
    assert sizes[-1] < 43 and commit_versions(table)[0] > 0
    times = {
        int(p.name[:20]): int(p.stat().st_mtime * 1000)
        for p in (table / "_delta_log").glob("*.json")
    }
    cutoff_commit = max(v for v, t in times.items() if t <= CUTOFF_MS)
    rows = versions_rows(table, range(cutoff_commit, max(times) + 1))
    assert all(r == [(0,), (1,), (2,)] for r in rows.values())


# -- the command line --------------------------------------------------------------------------


def test_cli_vacuum_log(tmp_path: Path) -> None:
    table = deltalake_table(tmp_path / "t", 8, [3, 5])
    set_times(table, {v: OLD_MS + v if v <= 5 else NOW_MS for v in range(8)})
    dry = run("vacuum", table, "--log", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    doc = json.loads(dry.stdout)
    assert doc["dry_run"] and doc["cutoff_checkpoint"] == 5 and doc["deleted_files"] == 6
    assert commit_versions(table)[0] == 0
    human = run("vacuum", table, "--log", "--dry-run", "--limit", "2")
    assert "would delete 6 log files" in human.stdout and "4 more files" in human.stdout
    done = run("vacuum", table, "--log")
    assert done.exit_code == 0 and "deleted 6 log files" in done.stdout
    assert commit_versions(table)[0] == 5
    again = run("vacuum", table, "--log", "--json")
    assert json.loads(again.stdout)["reason"].startswith("nothing before the cutoff checkpoint")
    for extra in (["--retain", "7d"], ["--lite"], ["--force"]):
        refused = run("vacuum", table, "--log", *extra)
        assert refused.exit_code == 2 and "cannot be combined with --log" in refused.stderr


def test_cli_vacuum_log_disabled(tmp_path: Path) -> None:
    table = deltalake_table(tmp_path / "t", 3, [1], **{"delta.enableExpiredLogCleanup": "false"})
    result = run("vacuum", table, "--log")
    assert result.exit_code == 0
    assert "nothing deleted: delta.enableExpiredLogCleanup is false" in result.stdout
