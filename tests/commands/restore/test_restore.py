"""`dvtool restore`: tables brought back to an earlier version, read by independent readers.

Every restore is checked with polars (`read_delta`, also with `version=` for the rows the
target version had), deltalake (DataFusion `QueryBuilder`, which applies DVs) and the raw
reader of tests/oracles.py (JSON replay + pyarrow + pyroaring); commits are read as JSON and
compared with what Delta's RESTORE writes (file actions, `operationParameters`, metrics) and,
where it can restore the same table, with deltalake's own `DeltaTable.restore`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake

import dvtool
from dvtool.commands.delete.command import DeleteRequest, run_delete
from dvtool.commands.restore import plan as restore_plan
from dvtool.commands.restore.command import RestoreRequest, run_restore
from dvtool.delta.log.reader import open_log
from dvtool.errors import CommitConflictError
from tests.cli_helpers import error_object, run
from tests.oracles import (
    GOLDEN,
    canon,
    commit_actions,
    commit_versions,
    copy_golden,
    raw_rows,
    row_id_high_water_mark,
    row_tracking_rows,
    tree_hashes,
)
from tests.writers import ROW_TRACKING_DELETED, compact_json, row_tracking_table

Row = dict[str, Any]
ROWS = 20


# -- tables and readers ----------------------------------------------------------------------


def _data(start: int, rows: int = ROWS) -> pa.Table:
    ids = list(range(start, start + rows))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": [f"n{i}" for i in ids],
            "part": [f"p{i % 2}" for i in ids],
        }
    )


def make_table(path: Path, files: int = 3, *, enable: bool = True, **options: Any) -> Path:
    """`files` deltalake appends of ROWS ids each (versions 0..files-1); `dvtool enable`."""
    for k in range(files):
        write_deltalake(str(path), _data(k * ROWS), mode="append", **options)
    if enable:
        ok("enable", path)
    return path


def ok(*args: str | Path) -> Any:
    result = run(*args)
    assert result.exit_code == 0, result.output
    return result


def restore_json(table: Path, *args: str) -> dict[str, Any]:
    result = ok("restore", table, *args, "--json")
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def latest(table: Path) -> int:
    return commit_versions(table)[-1]


def rows(table: Path, version: int | None = None) -> list[tuple[Any, ...]]:
    """The table's rows as polars reads them (at `version`, or the latest)."""
    return canon(pl.read_delta(str(table), version=version).to_dicts())


def assert_reads(table: Path, expected: list[tuple[Any, ...]]) -> None:
    """polars, deltalake and the raw reader all read `expected`; dvtool verifies every file."""
    assert rows(table) == expected, "polars"
    query = QueryBuilder().register("t", DeltaTable(str(table))).execute("select * from t")
    assert canon(pa.table(query.read_all()).to_pylist()) == expected, "deltalake"
    assert canon(raw_rows(table)) == expected, "raw reader"
    ok("inspect", table, "--verify")


def last_commit(table: Path) -> list[dict[str, Any]]:
    return commit_actions(table, latest(table))


def bodies(actions: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [a[kind] for a in actions if kind in a]


def delete(table: Path, where: str, *extra: str) -> int:
    ok("delete", table, "--where", where, *extra)
    return latest(table)


# -- undoing a delete --------------------------------------------------------------------------


def test_restore_undoes_a_dvtool_delete(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t")
    before = latest(table)
    expected = rows(table)
    twin = tmp_path / "twin"
    delete(table, "id % 3 = 0")
    shutil.copytree(table, twin)

    doc = restore_json(table, "--version", str(before))

    assert doc["version"] == before + 2 and doc["restored_version"] == before
    assert_reads(table, expected)
    assert rows(table, before) == expected  # time travel still reads the old version
    actions = last_commit(table)
    info = actions[0]["commitInfo"]
    assert info["operation"] == "RESTORE"
    assert info["operationParameters"] == {"version": before, "timestamp": None}
    assert info["readVersion"] == before + 1 and info["isBlindAppend"] is False
    assert info["operationMetrics"] == {k: str(v) for k, v in doc["metrics"].items()}
    adds, removes = bodies(actions, "add"), bodies(actions, "remove")
    assert len(adds) == len(removes) == 3
    assert all(a["dataChange"] is True and "deletionVector" not in a for a in adds)
    for remove in removes:
        assert remove["dataChange"] is True and remove["extendedFileMetadata"] is True
        assert remove["deletionVector"]["cardinality"] > 0
        assert remove["size"] > 0 and remove["partitionValues"] == {}
    assert {a["path"] for a in adds} == {r["path"] for r in removes}
    assert "protocol" not in {k for a in actions for k in a}  # never downgraded, unchanged
    # The adds are those of the target version, apart from dataChange (and null fields,
    # which deltalake writes and dvtool leaves out).
    at_target = {
        a["path"]: a for v in range(before + 1) for a in bodies(commit_actions(table, v), "add")
    }
    for add in adds:
        then = {k: v for k, v in at_target[add["path"]].items() if v is not None}
        assert add == {**then, "dataChange": True}
    # deltalake restores an identical copy to the same rows, counting the same files.
    metrics = DeltaTable(str(twin)).restore(before)
    assert metrics["numRestoredFile"] == doc["metrics"]["numRestoredFiles"] == 3
    assert metrics["numRemovedFile"] == doc["metrics"]["numRemovedFiles"] == 3
    assert rows(twin) == expected


def test_restore_after_deltalake_copy_on_write_delete(tmp_path: Path) -> None:
    """deltalake's DELETE rewrites files (no DVs): the restore removes the rewritten file and
    re-adds the original, as deltalake's own restore does."""
    table = make_table(tmp_path / "t", enable=False)
    expected = rows(table)
    DeltaTable(str(table)).delete("id % 4 = 1 AND id < 25")
    twin = tmp_path / "twin"
    shutil.copytree(table, twin)
    assert rows(table) != expected

    doc = restore_json(table, "--version", "2")

    assert_reads(table, expected)
    metrics = DeltaTable(str(twin)).restore(2)
    assert metrics["numRestoredFile"] == doc["metrics"]["numRestoredFiles"]
    assert metrics["numRemovedFile"] == doc["metrics"]["numRemovedFiles"]
    assert rows(twin) == expected
    assert doc["metrics"]["numOfFilesAfterRestore"] == 3
    sizes = sum(a["size"] for v in range(3) for a in bodies(commit_actions(table, v), "add"))
    assert doc["metrics"]["tableSizeAfterRestore"] == sizes


def test_restore_across_a_purge_a_compaction_and_an_append(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", partition_by=["part"])
    original = rows(table)
    v_delete = delete(table, "id % 5 = 2")
    after_delete = rows(table)
    ok("optimize", table, "--purge")
    ok("optimize", table)
    write_deltalake(str(table), _data(100), mode="append", partition_by=["part"])
    assert len(rows(table)) == len(after_delete) + ROWS

    doc = restore_json(table, "--version", str(v_delete))
    assert_reads(table, after_delete)
    adds = bodies(last_commit(table), "add")
    assert adds and all(a["deletionVector"]["cardinality"] > 0 for a in adds)
    assert all(a["partitionValues"]["part"] in ("p0", "p1") for a in adds)
    assert doc["metrics"]["numOfFilesAfterRestore"] == len(adds)

    restore_json(table, "--version", str(v_delete - 1))
    assert_reads(table, original)


def test_a_dv_changed_since_the_target_is_swapped_back(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", files=1)
    first = delete(table, "id = 3")
    after_first = rows(table)
    delete(table, "id = 7")
    current_dv = bodies(last_commit(table), "add")[0]["deletionVector"]
    first_dv = bodies(commit_actions(table, first), "add")[0]["deletionVector"]

    restore_json(table, "--version", str(first))

    assert_reads(table, after_first)
    actions = last_commit(table)
    (add,) = bodies(actions, "add")
    (remove,) = bodies(actions, "remove")
    assert add["path"] == remove["path"]
    assert add["deletionVector"] == first_dv and remove["deletionVector"] == current_dv


# -- files that are gone -----------------------------------------------------------------------


def test_vacuumed_files_refuse_the_restore(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", files=2)
    target = delete(table, "id % 3 = 0")  # each file gets a DV, both in one DV file
    ok("optimize", table, "--purge")
    ok("vacuum", table, "--retain", "0h", "--force")
    originals = [a["path"] for a in bodies(commit_actions(table, target), "add")]
    assert not list(table.glob("deletion_vector_*.bin"))  # vacuumed with the originals
    log_before = tree_hashes(table / "_delta_log")

    result = run("restore", table, "--version", str(target), "--json")

    assert result.exit_code == 5, result.output
    error = error_object(result)
    assert error["kind"] == "not-found"
    assert "3 file(s)" in error["message"] and "vacuumed" in error["message"]
    for path in originals:
        assert path in error["message"]
    assert "deletion_vector_" in error["message"]
    assert tree_hashes(table / "_delta_log") == log_before


def test_many_missing_files_are_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = make_table(tmp_path / "t", files=4, enable=False)
    write_deltalake(str(table), _data(500), mode="overwrite")
    for v in range(4):
        for add in bodies(commit_actions(table, v), "add"):
            (table / add["path"]).unlink()
    monkeypatch.setattr(restore_plan, "MISSING_NAMED", 2)
    monkeypatch.setattr(restore_plan, "LIST_DIRECTORY_AT", 3)  # one listing for all four

    with pytest.raises(dvtool.DvtoolError, match=r"4 file\(s\) .*: \S+, \S+ and 2 more"):
        run_restore(open_log(str(table)), RestoreRequest(version=3))


def test_missing_files_by_listing_and_by_lookup_agree(tmp_path: Path) -> None:
    from dvtool.storage.table_storage import Storage

    storage = Storage.for_table(str(tmp_path))
    names = [f"d/f{i}.parquet" for i in range(20)] + ["e/g.parquet"]
    for name in names[::2]:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    locations = [storage.join(n) for n in names]
    missing = restore_plan.missing_files(storage, locations)
    assert missing == [loc for i, loc in enumerate(locations) if i % 2]


# -- options, output and errors ---------------------------------------------------------------


def _set_commit_times(table: Path, start: dt.datetime) -> list[int]:
    """Commit file modification times start, start + 1h, ...; their epoch milliseconds."""
    times = []
    for v in commit_versions(table):
        moment = (start + dt.timedelta(hours=v)).timestamp()
        os.utime(table / "_delta_log" / f"{v:020d}.json", (moment, moment))
        times.append(int(moment * 1000))
    return times


def test_restore_by_timestamp(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t")  # versions 0-2 appends, 3 enable
    delete(table, "id < 30")
    _set_commit_times(table, dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc))

    doc = restore_json(table, "--timestamp", "2024-01-01T01:30:00Z")

    assert doc["restored_version"] == 1
    assert_reads(table, rows(table, 1))
    info = last_commit(table)[0]["commitInfo"]
    assert info["operationParameters"] == {"version": None, "timestamp": "2024-01-01 01:30:00.0"}


def test_in_commit_timestamps_pick_the_version_and_survive_the_restore(tmp_path: Path) -> None:
    """In-commit timestamps turned on at version 3, in 2030 (every file time is earlier): a
    timestamp resolves by them; a restore to before version 3 keeps them on."""
    table = make_table(tmp_path / "t", enable=False)
    ict = int(dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)
    (metadata,) = bodies(commit_actions(table, 0), "metaData")
    metadata["configuration"] = {
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": "3",
        "delta.inCommitTimestampEnablementTimestamp": str(ict),
    }
    writer_features = ["appendOnly", "invariants", "inCommitTimestamp"]
    protocol = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": writer_features}
    enable = _info("SET TBLPROPERTIES", inCommitTimestamp=ict)
    _commit(table, [enable, {"protocol": protocol}, {"metaData": metadata}])
    expected = rows(table)
    delete(table, "id < 30")  # its in-commit timestamp is ict + 1

    doc = restore_json(table, "--timestamp", "2030-01-01T00:00:00Z")

    assert doc["restored_version"] == 3
    assert_reads(table, expected)
    info = last_commit(table)[0]["commitInfo"]
    assert next(iter(info)) == "inCommitTimestamp" and info["inCommitTimestamp"] == ict + 2
    restore_json(table, "--version", "1")
    actions = last_commit(table)
    (restored,) = bodies(actions, "metaData")
    assert restored["configuration"] == metadata["configuration"]
    assert actions[0]["commitInfo"]["inCommitTimestamp"] == ict + 3
    assert_reads(table, rows(table, 1))


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        ((), 2, "exactly one of --version and --timestamp"),
        (("--version", "1", "--timestamp", "2024-01-01"), 2, "exactly one"),
        (("--version", "4"), 2, "nothing to restore"),
        (("--version", "9"), 5, "version 9 does not exist"),
        (("--timestamp", "2023-12-31"), 5, "before the earliest"),
        (("--timestamp", "2030-01-01"), 2, "has not changed since"),
        (("--timestamp", "yesterday"), 2, "ISO 8601"),
        (("--version", "-1"), 2, "-1"),
    ],
)
def test_bad_targets_are_errors(
    tmp_path: Path, args: tuple[str, ...], code: int, words: str
) -> None:
    table = make_table(tmp_path / "t")
    delete(table, "id = 1")
    _set_commit_times(table, dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc))
    before = tree_hashes(table)
    result = run("restore", table, *args)
    assert result.exit_code == code, result.output
    assert words in result.output
    assert "Traceback" not in result.output
    assert tree_hashes(table) == before


def test_a_version_whose_log_was_cleaned_up_names_the_oldest(tmp_path: Path) -> None:
    table = copy_golden("basic-dv-with-checkpoint", tmp_path)
    for v in range(10):
        (table / "_delta_log" / f"{v:020d}.json").unlink()
    result = run("restore", table, "--version", "5")
    assert result.exit_code == 5, result.output
    assert "can no longer be restored" in result.output
    assert "oldest version that can be restored is 10" in result.output


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t")
    delete(table, "id % 2 = 0")
    before = tree_hashes(table)

    doc = restore_json(table, "--version", "2", "--dry-run")
    human = ok("restore", table, "--version", "2", "--dry-run", "--limit", "2")

    assert tree_hashes(table) == before
    assert doc["dry_run"] is True and doc["version"] is None and doc["read_version"] == 4
    assert sorted(f["action"] for f in doc["files"]) == ["add"] * 3 + ["remove"] * 3
    removed = [f for f in doc["files"] if f["action"] == "remove"]
    assert sum(f["deleted_rows"] for f in removed) == 30
    assert all(f["num_records"] == ROWS for f in doc["files"])
    lines = human.stdout.splitlines()
    assert lines[0] == "dry run: restore version 2 on version 4: nothing written"
    assert "... 4 more files; use --json or --limit 0 to list them all" in lines
    totals = " ".join(
        line.strip()
        for line in lines[lines.index(next(x for x in lines if x.startswith("would re-add"))) :]
    )
    assert totals.startswith("would re-add 3 files") and "remove 3" in totals
    assert max(map(len, lines)) <= 80  # the runner's COLUMNS


def test_json_document_and_history(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", files=2)
    delete(table, "id < 5")
    doc = restore_json(table, "--version", "1")
    assert list(doc) == [
        "version",
        "read_version",
        "restored_version",
        "dry_run",
        "operation_parameters",
        "metrics",
        "protocol",
        "protocol_changed",
        "attempts",
        "checkpoint_warning",
        "manifest_warning",
        "files",
    ]
    sizes = [a["size"] for v in (0, 1) for a in bodies(commit_actions(table, v), "add")]
    (removed,) = bodies(last_commit(table), "remove")
    assert doc["metrics"] == {
        "numRestoredFiles": 1,
        "restoredFilesSize": sizes[0],
        "numRemovedFiles": 1,
        "removedFilesSize": removed["size"],
        "numOfFilesAfterRestore": 2,
        "tableSizeAfterRestore": sum(sizes),
    }
    history = json.loads(ok("inspect", table, "--history", "1", "--json").stdout)["history"]
    assert history[0]["operation"] == "RESTORE"
    assert history[0]["operation_metrics"] == doc["metrics"]
    assert history[0]["operation_parameters"]["version"] in (1, "1")
    human = ok("inspect", table, "--history", "1").stdout
    assert "RESTORE" in human and "numRestoredFiles=1" in human


def test_human_output(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", files=2)
    delete(table, "id < 5")
    out = ok("restore", table, "--version", "1").stdout.splitlines()
    assert out[0] == "restored version 1: committed version 4 (read version 3)"
    assert out[1].startswith("re-added 1 file (") and "the table now has 2 files" in out[1]
    assert any(line.startswith("metrics: numRestoredFiles=1, ") for line in out)
    assert "tableSizeAfterRestore=2.4 KiB" in " ".join(out)


def test_python_api_gives_the_cli_document(tmp_path: Path) -> None:
    first = make_table(tmp_path / "a" / "t")
    delete(first, "id = 4")
    second = tmp_path / "b" / "t"
    shutil.copytree(first, second)
    api = dvtool.restore(first, version=2).to_dict()
    cli = restore_json(second, "--version", "2")
    assert json.loads(json.dumps(api)) == cli
    with pytest.raises(dvtool.DvtoolError, match="exactly one"):
        dvtool.restore(first)


def test_append_only_tables_are_refused(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", enable=False, configuration={"delta.appendOnly": "true"})
    result = run("restore", table, "--version", "0")
    assert result.exit_code == 7, result.output
    assert "append-only" in result.output


# -- protocol, metadata and row tracking ------------------------------------------------------


def test_restore_before_enable_keeps_the_protocol(tmp_path: Path) -> None:
    """Version 2 predates `dvtool enable`: its metaData comes back (no
    delta.enableDeletionVectors), the protocol stays as it is (never downgraded)."""
    table = make_table(tmp_path / "t")
    expected = rows(table)
    delete(table, "id > 50")
    doc = restore_json(table, "--version", "2")
    assert_reads(table, expected)
    assert doc["protocol_changed"] is False
    actions = last_commit(table)
    (metadata,) = bodies(actions, "metaData")
    assert "delta.enableDeletionVectors" not in metadata["configuration"]
    assert not bodies(actions, "protocol")
    assert "deletionVectors" in doc["protocol"]["writerFeatures"]


def test_restore_across_a_downgrade_upgrades_the_protocol(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t")
    target = delete(table, "id % 4 = 0")
    expected = rows(table)
    ok("downgrade", table)
    protocol = bodies(last_commit(table), "protocol")
    assert protocol and "deletionVectors" not in json.dumps(protocol)

    doc = restore_json(table, "--version", str(target))

    assert doc["protocol_changed"] is True
    (new,) = bodies(last_commit(table), "protocol")
    assert "deletionVectors" in new["readerFeatures"] and "deletionVectors" in new["writerFeatures"]
    assert_reads(table, expected)


def test_row_tracking_ids_and_versions_as_at_the_target(tmp_path: Path) -> None:
    table = row_tracking_table(tmp_path / "rt")
    mark = row_id_high_water_mark(table)
    at_target = {a["path"]: a for v in range(3) for a in bodies(commit_actions(table, v), "add")}

    restore_json(table, "--version", "2")  # after the DELETE, before OPTIMIZE and UPDATE

    expected = sorted(
        (i, i, 0 if i < 10 else 1) for i in range(15) if i not in ROW_TRACKING_DELETED
    )
    restored = row_tracking_rows(table)
    assert sorted((r["id"], r["_row_id"], r["_row_commit_version"]) for r in restored) == expected
    assert {r["value"] for r in restored if r["id"] == 7} == {7 * 1.5}  # not yet updated
    actions = last_commit(table)
    for add in bodies(actions, "add"):
        then = at_target[add["path"]]
        assert add["baseRowId"] == then["baseRowId"]
        assert add["defaultRowCommitVersion"] == then["defaultRowCommitVersion"]
        assert add.get("deletionVector") == then.get("deletionVector")
    assert not bodies(actions, "domainMetadata")  # the mark stays where it was
    assert row_id_high_water_mark(table) == mark
    assert actions[0]["commitInfo"]["tags"] == {"delta.rowTracking.preserved": "true"}


def _commit(table: Path, actions: list[dict[str, Any]]) -> None:
    version = latest(table) + 1
    text = "".join(compact_json(a) + "\n" for a in actions)
    (table / "_delta_log" / f"{version:020d}.json").write_text(text)


def _info(operation: str, **extra: Any) -> dict[str, Any]:
    body = {"timestamp": 1_700_000_000_000, "operation": operation, "operationParameters": {}}
    return {"commitInfo": {**body, **extra}}


def test_re_added_files_without_row_ids_get_fresh_ones(tmp_path: Path) -> None:
    """Row tracking turned on after the target: the re-added files had no baseRowId, so
    they get fresh IDs above the high-water mark and the mark moves past them."""
    table = make_table(tmp_path / "t", files=2, enable=False)
    protocol = {
        "minReaderVersion": 1,
        "minWriterVersion": 7,
        "writerFeatures": ["appendOnly", "invariants", "domainMetadata", "rowTracking"],
    }
    mark = {"domain": "delta.rowTracking", "configuration": '{"rowIdHighWaterMark":99}'}
    _commit(table, [_info("UPGRADE PROTOCOL"), {"protocol": protocol}])
    _commit(table, [_info("SET DOMAIN"), {"domainMetadata": {**mark, "removed": False}}])
    expected = rows(table)
    delete(table, "id < 30")  # copy-on-write: new files above the mark
    mark_before = row_id_high_water_mark(table)
    assert mark_before is not None and mark_before > 99

    doc = restore_json(table, "--version", "1")

    version = doc["version"]
    assert_reads(table, expected)
    actions = last_commit(table)
    fresh = [a for a in bodies(actions, "add") if a["defaultRowCommitVersion"] == version]
    assert fresh and all(a["baseRowId"] > mark_before for a in fresh)
    ((domain),) = bodies(actions, "domainMetadata")
    assert json.loads(domain["configuration"])["rowIdHighWaterMark"] == mark_before + sum(
        json.loads(a["stats"])["numRecords"] for a in fresh
    )
    ids = [r["_row_id"] for r in row_tracking_rows(table)]
    assert len(set(ids)) == len(ids)


def test_clustered_table_keeps_its_clustering_and_providers(tmp_path: Path) -> None:
    """A liquid-clustered table (tests/writers.py) back to before its OPTIMIZE: the
    unclustered files come back, the clustered ones (with clusteringProvider) go; the
    clustering domain is the same at both versions, so none is written."""
    from tests.oracles import domain_metadata
    from tests.writers import clustered_table

    table = clustered_table(tmp_path / "c")
    domains = domain_metadata(table)
    restore_json(table, "--version", "2")
    assert_reads(table, rows(table, 2))
    actions = last_commit(table)
    assert not bodies(actions, "domainMetadata") and domain_metadata(table) == domains
    assert all("clusteringProvider" not in a for a in bodies(actions, "add"))
    assert {r.get("clusteringProvider") for r in bodies(actions, "remove")} == {None}
    restore_json(table, "--version", "4")
    assert_reads(table, rows(table, 4))
    assert {a.get("clusteringProvider") for a in bodies(last_commit(table), "add")} == {"liquid"}


# -- a golden table ----------------------------------------------------------------------------


def test_golden_table_with_dvs_restored_and_back(tmp_path: Path) -> None:
    name = "dv-partitioned-with-checkpoint"
    table = copy_golden(f"{name}/delta", tmp_path)
    at_5 = rows(table, 5)
    assert at_5 != rows(table)

    restore_json(table, "--version", "5")
    assert_reads(table, at_5)

    restore_json(table, "--version", "15")
    expected = canon(pq.read_table(GOLDEN / name / "expected").to_pylist())
    assert_reads(table, expected)


# -- concurrent commits --------------------------------------------------------------------


def _during_restore(monkeypatch: pytest.MonkeyPatch, commit: Any) -> None:
    """Run `commit()` (another writer) once the restore has planned, before it commits."""
    checked = restore_plan.require_files_exist

    def check_then_commit(*args: Any) -> None:
        checked(*args)
        commit()

    monkeypatch.setattr(restore_plan, "require_files_exist", check_then_commit)


def test_a_concurrent_delete_fails_the_restore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = make_table(tmp_path / "t")
    target = latest(table)
    expected = rows(table)
    delete(table, "id % 2 = 0")
    racing = [r for r in rows(table) if dict(r)["id"] != 5]
    _during_restore(monkeypatch, lambda: run_delete(open_log(str(table)), DeleteRequest("id = 5")))

    result = run("restore", table, "--version", str(target), "--json")

    assert result.exit_code == 4, result.output
    error = error_object(result)
    assert error["kind"] == "conflict"
    assert "did not commit" in error["message"] and "DELETE" in error["message"]
    assert [a["commitInfo"]["operation"] for a in last_commit(table)[:1]] == ["DELETE"]
    assert_reads(table, racing)
    monkeypatch.undo()
    restore_json(table, "--version", str(target))  # run again: restores from the new state
    assert_reads(table, expected)


def test_commits_that_change_no_file_are_let_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = make_table(tmp_path / "t")
    target = latest(table)
    expected = rows(table)
    delete(table, "id > 7")
    txn = {"txn": {"appId": "streaming-job", "version": 3}}

    def two_commits() -> None:
        _commit(table, [_info("VACUUM END", operationParameters={"status": "COMPLETED"})])
        _commit(table, [_info("STREAMING UPDATE"), txn])

    _during_restore(monkeypatch, two_commits)
    doc = restore_json(table, "--version", str(target))

    assert doc["attempts"] == 2 and doc["version"] == doc["read_version"] + 3
    assert_reads(table, expected)


def test_a_vacuum_starting_concurrently_fails_a_restore_that_re_adds_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = make_table(tmp_path / "t")
    target = latest(table)
    delete(table, "id > 7")
    before = rows(table)
    _during_restore(monkeypatch, lambda: _commit(table, [_info("VACUUM START")]))

    result = run("restore", table, "--version", str(target))

    assert result.exit_code == 4, result.output
    assert "started a vacuum" in result.output
    assert_reads(table, before)


def test_a_running_vacuum_refuses_a_restore_that_re_adds_files(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t")
    target = latest(table)
    expected = rows(table)
    delete(table, "id > 7")
    _commit(table, [_info("VACUUM START")])
    write_deltalake(str(table), _data(300), mode="append")

    result = run("restore", table, "--version", str(target))
    assert result.exit_code == 4, result.output
    assert f"VACUUM START at version {target + 2}" in result.output

    _commit(table, [_info("VACUUM END", operationParameters={"status": "COMPLETED"})])
    restore_json(table, "--version", str(target))
    assert_reads(table, expected)


def test_a_running_vacuum_does_not_block_a_restore_that_only_removes(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", enable=False)
    expected = rows(table, 1)
    _commit(table, [_info("VACUUM START")])
    doc = restore_json(table, "--version", "1")
    assert doc["metrics"]["numRestoredFiles"] == 0 and doc["metrics"]["numRemovedFiles"] == 1
    assert_reads(table, expected)


def _race_job(job: tuple[str, str, int]) -> Any:
    """A racing process (tests/racers.py): prepare, then restore or delete when released."""
    kind, table, arg = job
    log = open_log(table)
    log.snapshot()

    def go() -> tuple[str, int | None]:
        try:
            if kind == "restore":
                return kind, run_restore(log, RestoreRequest(version=arg)).version
            return kind, run_delete(log, DeleteRequest(f"id % 7 = {arg}")).version
        except CommitConflictError:
            return kind, None

    return go


def test_restore_racing_a_delete_in_another_process(tmp_path: Path) -> None:
    from tests.racers import Racers

    orders = []
    with Racers(2, _race_job) as racers:
        for round_ in range(4):
            table = make_table(tmp_path / f"t{round_}", files=2)
            target = latest(table)
            original = rows(table)
            delete(table, "id < 10")
            jobs = [("restore", str(table), target), ("delete", str(table), round_ % 7)]
            outcome = dict(racers.race(jobs if round_ % 2 else jobs[::-1]))
            orders.append("delete first" if outcome["restore"] is None else "restore first")
            deleted = [r for r in original if dict(r)["id"] % 7 != round_ % 7]
            if outcome["restore"] is None:
                # The delete won: the restore committed nothing.
                assert outcome["delete"] is not None
                assert_reads(table, [r for r in deleted if dict(r)["id"] >= 10])
            elif outcome["delete"] is None or outcome["delete"] < outcome["restore"]:
                assert outcome["delete"] is None, outcome  # a delete first conflicts it
                assert_reads(table, original)
            else:
                # The restore won; the delete re-planned on the restored table.
                assert_reads(table, deleted)
            versions = commit_versions(table)
            assert versions == list(range(versions[-1] + 1))
    print("commit orders:", orders)  # either may win a round; whichever does, rows are right


# -- on S3 -----------------------------------------------------------------------------------


def test_restore_on_s3(
    s3_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: Any
) -> None:
    """On the moto server: the files are checked with one listing of the table directory
    (LIST_DIRECTORY_AT lowered to 2), and a deleted object refuses the restore."""
    local = make_table(tmp_path / "local", files=3)
    target = latest(local)
    expected = rows(local)
    delete(local, "id % 2 = 1")
    prefix = f"restore/{request.node.name}"
    uri = s3_server.upload(local, prefix)
    monkeypatch.setattr(restore_plan, "LIST_DIRECTORY_AT", 2)
    options = s3_server.cli_options()

    dry = run("restore", uri, *options, "--version", str(target), "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    gone = json.loads(dry.stdout)["files"][0]["path"]
    restored = run("restore", uri, *options, "--version", str(target), "--json")
    assert restored.exit_code == 0, restored.output
    read = pl.read_delta(uri, storage_options=s3_server.delta_options()).to_dicts()
    assert canon(read) == expected
    table = DeltaTable(uri, storage_options=s3_server.delta_options())
    query = QueryBuilder().register("t", table).execute("select * from t")
    assert canon(pa.table(query.read_all()).to_pylist()) == expected

    s3_server.client().delete_object(Bucket=s3_server.bucket, Key=f"{prefix}/{gone}")
    refused = run("restore", uri, *options, "--version", str(target + 1))
    assert refused.exit_code == 5, refused.output
    assert gone in refused.output and "vacuumed" in refused.output


# -- what the restore's commit keeps from the current table (dvtool.delta.protocol.restore_diff) --


def _field(name: str, **metadata: Any) -> dict[str, Any]:
    return {"name": name, "type": "long", "nullable": True, "metadata": metadata}


def _schema(*fields: dict[str, Any]) -> str:
    return json.dumps({"type": "struct", "fields": list(fields)}, separators=(",", ":"))


def _identity(step: int, mark: int | None = None, physical: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"delta.identity.start": 1, "delta.identity.step": step}
    if mark is not None:
        metadata["delta.identity.highWaterMark"] = mark
    if physical is not None:
        metadata["delta.columnMapping.physicalName"] = physical
    return metadata


@pytest.mark.parametrize(
    ("then", "now", "merged"),
    [
        (_identity(1, 10), _identity(1, 50), 50),  # never lower a positive-step mark
        (_identity(1, 70), _identity(1, 50), 70),
        (_identity(1), _identity(1, 50), 50),  # the target generated none yet
        (_identity(-2, -10), _identity(-2, -40), -40),  # negative step: the lower one
    ],
)
def test_identity_high_water_marks_never_go_back(
    then: dict[str, Any], now: dict[str, Any], merged: int
) -> None:
    from dvtool.delta.protocol.restore_diff import merged_identity_marks

    target = _schema(_field("id", **then), _field("v"))
    current = _schema(_field("v"), _field("id", **now), _field("added_later"))
    out = json.loads(merged_identity_marks(target, current))
    assert [f["name"] for f in out["fields"]] == ["id", "v"]
    assert out["fields"][0]["metadata"]["delta.identity.highWaterMark"] == merged


def test_identity_marks_match_by_physical_name_and_text_is_kept_otherwise() -> None:
    from dvtool.delta.protocol.restore_diff import merged_identity_marks

    target = _schema(_field("id", **_identity(1, 5, physical="col-1")))
    renamed = _schema(_field("key", **_identity(1, 9, physical="col-1")))
    assert '"delta.identity.highWaterMark":9' in merged_identity_marks(target, renamed)
    other = _schema(_field("id", **_identity(1, 9, physical="col-2")))
    assert merged_identity_marks(target, other) is target
    assert merged_identity_marks(target, "not json") is target


def test_restored_metadata_keeps_history_properties() -> None:
    from dvtool.delta.protocol.actions import Metadata
    from dvtool.delta.protocol.restore_diff import restored_metadata

    then = {
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": "1",
        "delta.columnMapping.mode": "name",
        "delta.columnMapping.maxColumnId": "3",
        "delta.appendOnly": "false",
    }
    now = {
        "delta.columnMapping.mode": "name",
        "delta.columnMapping.maxColumnId": "7",
        "delta.rowTracking.materializedRowIdColumnName": "_row-id-col-x",
        "delta.rowTracking.materializedRowCommitVersionColumnName": "_row-version-col-x",
        "delta.checkpointInterval": "5",
    }
    target = Metadata("id", _schema(_field("a")), ("a",), then, raw={"format": {"x": 1}})
    current = Metadata("id", _schema(_field("b")), (), now)
    restored = restored_metadata(target, current)
    assert dict(restored.configuration) == {
        "delta.columnMapping.mode": "name",
        "delta.columnMapping.maxColumnId": "7",
        "delta.appendOnly": "false",
        "delta.rowTracking.materializedRowIdColumnName": "_row-id-col-x",
        "delta.rowTracking.materializedRowCommitVersionColumnName": "_row-version-col-x",
    }
    assert restored.schema_string == target.schema_string
    assert restored.partition_columns == ("a",) and restored.raw["format"] == {"x": 1}


def test_protocol_merge_as_delta() -> None:
    from dvtool.delta.protocol.actions import Protocol
    from dvtool.delta.protocol.restore_diff import merged_protocol

    legacy = Protocol(1, 2)
    mapping = Protocol(2, 5)
    dvs = Protocol(3, 7, ("deletionVectors",), ("appendOnly", "deletionVectors", "invariants"))
    assert merged_protocol(legacy, dvs) is dvs
    assert merged_protocol(mapping, legacy) == Protocol(2, 5)
    merged = merged_protocol(mapping, dvs)
    assert (merged.min_reader_version, merged.min_writer_version) == (3, 7)
    assert merged.reader_features == ("columnMapping", "deletionVectors")
    assert set(merged.writer_features or ()) == {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "generatedColumns",
        "columnMapping",
        "deletionVectors",
    }
    writer_only = Protocol(1, 7, None, ("appendOnly", "domainMetadata"))
    assert merged_protocol(Protocol(2, 5), writer_only).reader_features is None


def test_clustering_domain_as_delta() -> None:
    from dvtool.delta.protocol.actions import DomainMetadata, Protocol
    from dvtool.delta.protocol.restore_diff import NO_CLUSTERING, restored_domains

    clustered = Protocol(1, 7, None, ("domainMetadata", "clustering"))
    by_id = DomainMetadata("delta.clustering", '{"clusteringColumns":[["id"]]}')
    by_name = DomainMetadata("delta.clustering", '{"clusteringColumns":[["name"]]}')
    tracking = DomainMetadata("delta.rowTracking", '{"rowIdHighWaterMark":9}')
    then = {"delta.clustering": by_id, "delta.rowTracking": tracking}
    assert restored_domains(clustered, then, {"delta.clustering": by_name}) == [by_id]
    assert restored_domains(clustered, then, {"delta.clustering": by_id}) == []
    unclustered = DomainMetadata("delta.clustering", NO_CLUSTERING)
    assert restored_domains(Protocol(1, 2), {}, {"delta.clustering": by_id}) == [unclustered]
    assert restored_domains(Protocol(1, 2), {}, {"delta.rowTracking": tracking}) == []


def test_java_timestamp_text() -> None:
    from dvtool.delta.protocol.restore_diff import java_timestamp_text

    base = int(dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone.utc).timestamp() * 1000)
    assert java_timestamp_text(base) == "2024-05-01 12:00:00.0"
    assert java_timestamp_text(base + 120) == "2024-05-01 12:00:00.12"
    assert java_timestamp_text(base + 7) == "2024-05-01 12:00:00.007"
