"""`dvtool checkpoint` (and `dvtool.checkpoint` / `dvtool.cleanup_log` in the Python API).

The checkpoint is checked by other readers alone: after it is written, the commits before it
are moved away and deltalake and polars must still read every row from the checkpoint. So is
the mending of a damaged checkpoint or `_last_checkpoint` (`tests.damaged_tables`): other
readers read the rows they read before the damage.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import unquote

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake

import dvtool
from dvtool import faults
from dvtool.commands.checkpoint import run_checkpoint
from dvtool.commands.log_cleanup import LogCleanupRequest, run_log_cleanup
from dvtool.delta.log.reader import open_log
from tests.cli_helpers import all_output, run, run_wide
from tests.damaged_tables import (
    DAMAGE_NAMES,
    DAMAGES,
    MULTI_PART,
    NEWEST,
    V2_JSON,
    V2_PARQUET,
    checkpoint_name,
    damaged_table,
    golden_without,
    newest_sidecar,
    polars_rows,
)
from tests.damaged_tables import deltalake_rows as damaged_rows
from tests.oracles import GOLDEN, commit_versions, copy_golden, replay_json, tree_hashes
from tests.s3_server import S3Server

DAY_S = 86_400
OLD_S = time.time() - 60 * DAY_S


def appended(path: Path, commits: int, **config: str) -> Path:
    for v in range(commits):
        data = pa.table({"id": pa.array([v], pa.int64())})
        write_deltalake(str(path), data, mode="append", configuration=config or None)
    return path


def deltalake_rows(table: Path) -> list[tuple[object, ...]]:
    query = QueryBuilder().register("t", DeltaTable(str(table)))
    batches = query.execute("select * from t").read_all()
    data = pa.Table.from_batches(batches) if isinstance(batches, list) else batches
    return sorted(zip(*(c.to_pylist() for c in data.columns), strict=True))


def without_commits_before(table: Path, version: int, dest: Path) -> Path:
    """A copy of `table` whose log starts at `version`: only its checkpoint can rebuild it."""
    shutil.copytree(table, dest)
    for path in (dest / "_delta_log").glob("*.json"):
        if int(path.name[:20]) < version:
            path.unlink()
    return dest


def age(table: Path, versions: range) -> None:
    for path in (table / "_delta_log").iterdir():
        if path.name[:20].isdigit() and int(path.name[:20]) in versions:
            os.utime(path, (OLD_S, OLD_S))


def test_checkpoint_is_read_by_other_readers(tmp_path: Path) -> None:
    table = appended(tmp_path / "t", 12)
    expected = [(v,) for v in range(12)]
    result = run_checkpoint(open_log(str(table)))
    assert result.written and result.version == 11
    assert result.names == ("00000000000000000011.checkpoint.parquet",)
    assert result.info is not None and result.info.num_add_files == 12 and not result.info.v2
    hint = json.loads((table / "_delta_log" / "_last_checkpoint").read_text())
    assert hint["version"] == 11 and hint["size"] == result.info.size
    alone = without_commits_before(table, 11, tmp_path / "alone")
    assert sorted(pl.read_delta(str(alone)).rows()) == expected
    assert deltalake_rows(alone) == expected


def test_an_existing_checkpoint_is_not_rewritten(tmp_path: Path) -> None:
    table = appended(tmp_path / "t", 3)
    DeltaTable(str(table)).create_checkpoint()
    path = table / "_delta_log" / "00000000000000000002.checkpoint.parquet"
    before = path.read_bytes()
    result = run_checkpoint(open_log(str(table)))
    assert not result.written and result.info is None
    assert result.names == (path.name,) and path.read_bytes() == before


def test_v2_checkpoint_table(tmp_path: Path) -> None:
    table = copy_golden("v2-checkpoints-parquet-with-sidecars", tmp_path)
    expected = deltalake_rows(table)
    result = run_checkpoint(open_log(str(table)))
    assert not result.written, "version 6 has a V2 checkpoint already"
    copy = tmp_path / "copy"
    shutil.copytree(table, copy)
    for path in (copy / "_delta_log").glob("00000000000000000006.checkpoint.*"):
        path.unlink()
    result = run_checkpoint(open_log(str(copy)))
    assert result.written and result.info is not None and result.info.v2
    alone = without_commits_before(copy, 6, tmp_path / "alone")
    assert deltalake_rows(alone) == expected


def test_cleanup_follows_the_checkpoint(tmp_path: Path) -> None:
    table = appended(tmp_path / "t", 8)
    DeltaTable(str(table)).create_checkpoint()  # at 7
    appended(table, 2)  # 8, 9
    age(table, range(8))
    expected = deltalake_rows(table)
    result = run_checkpoint(open_log(str(table)))
    assert result.written and result.version == 9
    cleanup = result.log_cleanup
    assert cleanup is not None and cleanup.cutoff_checkpoint == 7
    assert cleanup.deleted_files == 7 and result.warnings == []
    assert commit_versions(table) == [7, 8, 9]
    assert deltalake_rows(table) == expected and len(expected) == 10


def test_cleanup_disabled_or_failing_leaves_the_checkpoint(tmp_path: Path) -> None:
    table = appended(tmp_path / "t", 4, **{"delta.enableExpiredLogCleanup": "false"})
    DeltaTable(str(table)).create_checkpoint()
    age(table, range(4))
    result = run_checkpoint(open_log(str(table)))
    assert result.log_cleanup is None and result.warnings == []
    assert commit_versions(table) == [0, 1, 2, 3]

    other = appended(tmp_path / "u", 2, **{"delta.logRetentionDuration": "whenever"})
    done = run("checkpoint", other)
    assert done.exit_code == 0, done.output
    assert "warning:" in done.stderr and "delta.logRetentionDuration" in done.stderr
    assert (other / "_delta_log" / "00000000000000000001.checkpoint.parquet").exists()


def test_unknown_writer_feature_is_refused(tmp_path: Path) -> None:
    table = appended(tmp_path / "t", 1)
    protocol = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["someFuture"]}
    line = json.dumps({"commitInfo": {"operation": "SET TBLPROPERTIES"}}) + "\n"
    line += json.dumps({"protocol": protocol}) + "\n"
    (table / "_delta_log" / "00000000000000000001.json").write_text(line)
    result = run("checkpoint", table)
    assert result.exit_code == 7 and "someFuture" in result.stderr
    assert not list((table / "_delta_log").glob("*.checkpoint.parquet"))
    assert run("vacuum", table, "--log").exit_code == 7


def test_cli_checkpoint(tmp_path: Path) -> None:
    table = appended(tmp_path / "t", 3)
    doc = json.loads(run("checkpoint", table, "--json").stdout)
    assert doc["operation"] == "CHECKPOINT" and doc["version"] == 2 and doc["written"]
    assert doc["files"] == ["00000000000000000002.checkpoint.parquet"]
    assert doc["num_add_files"] == 3 and doc["log_cleanup"]["deleted_files"] == 0
    assert doc["log_cleanup"]["reason"] == "no commit is older than the cutoff"
    human = run_wide("checkpoint", table)
    assert human.exit_code == 0
    assert "version 2 already has a checkpoint" in human.stdout
    assert "nothing deleted: no commit is older than the cutoff" in human.stdout


def test_python_api(tmp_path: Path) -> None:
    table = appended(tmp_path / "t", 3)
    result = dvtool.checkpoint(table)
    assert isinstance(result, dvtool.CheckpointResult) and result.written
    plan = dvtool.cleanup_log(str(table), dry_run=True)
    assert isinstance(plan, dvtool.LogCleanupResult) and plan.dry_run
    cli = json.loads(run("vacuum", table, "--log", "--dry-run", "--json").stdout)
    assert {**plan.to_dict(), "cutoff_timestamp_ms": 0} == {**cli, "cutoff_timestamp_ms": 0}


def test_checkpoint_and_log_cleanup_on_s3(s3_server: S3Server, tmp_path: Path) -> None:
    """On an object store (bulk deletes): the checkpoint, then a cleanup 60 days later (S3
    sets the modification times, so the clock moves instead), read back by polars and
    deltalake from S3."""
    local = appended(tmp_path / "t", 4)
    DeltaTable(str(local)).create_checkpoint()  # at 3
    appended(local, 2)  # 4, 5
    prefix = f"log-cleanup-{uuid.uuid4().hex}"
    uri = s3_server.upload(local, prefix)
    done = run("checkpoint", uri, *s3_server.cli_options(), "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["files"] == ["00000000000000000005.checkpoint.parquet"]
    later = int(time.time() * 1000) + 60 * DAY_S * 1000
    log = open_log(uri, s3_server.storage_options())
    result = run_log_cleanup(log, LogCleanupRequest(now_ms=later))
    assert (result.cutoff_commit, result.cutoff_checkpoint) == (5, 5)
    assert result.deleted_files == 6 and result.error is None  # commits 0..4, checkpoint 3
    assert [k for k in s3_server.keys(prefix) if k.startswith("_delta_log/")] == [
        "_delta_log/00000000000000000005.checkpoint.parquet",
        "_delta_log/00000000000000000005.json",
        "_delta_log/_last_checkpoint",
    ]
    options = s3_server.delta_options()
    expected = sorted([0, 1, 2, 3, 0, 1])
    assert sorted(pl.read_delta(uri, storage_options=options)["id"].to_list()) == expected
    table = DeltaTable(uri, storage_options=options)
    reader = QueryBuilder().register("t", table).execute("select id from t")
    assert sorted(pa.table(reader.read_all()).column("id").to_pylist()) == expected


# -- mending a damaged checkpoint or _last_checkpoint ------------------------------------------

# Damages other readers fail on (delta-rs, and polars through it): they follow the hint.
FATAL_TO_OTHERS = {"truncated", "truncated-older-good", "part-missing", "hint-5000"}


@pytest.mark.parametrize("name", DAMAGE_NAMES)
def test_checkpoint_mends_the_damage(tmp_path: Path, name: str) -> None:
    damage = next(d for d in DAMAGES if d.name == name)
    table, expected = damaged_table(tmp_path, damage)
    if name in FATAL_TO_OTHERS:
        with pytest.raises(Exception, match=r"(?i)footer|checkpoint"):
            DeltaTable(str(table)).to_pyarrow_table()

    done = run("checkpoint", table, "--json")
    assert done.exit_code == 0, all_output(done)
    doc = json.loads(done.stdout)
    assert doc["written"] and doc["version"] == NEWEST
    assert doc["files"] == [checkpoint_name(NEWEST)]
    [repair] = doc["repairs"]
    assert ("_last_checkpoint" in repair) == damage.kind.startswith("last-checkpoint")
    hint = json.loads((table / "_delta_log" / "_last_checkpoint").read_text())
    assert hint["version"] == NEWEST and "parts" not in hint

    assert polars_rows(table) == expected
    assert damaged_rows(table) == expected
    assert run("inspect", table, "--verify").exit_code == 0
    # The new checkpoint alone rebuilds the table.
    alone = without_commits_before(table, NEWEST, tmp_path / "alone")
    assert damaged_rows(alone) == expected
    assert polars_rows(alone) == expected
    # Mended: a second run finds the checkpoint good and writes nothing.
    again = run_checkpoint(open_log(str(table)))
    assert not again.written and again.repairs == []


def test_human_output_says_what_was_mended(tmp_path: Path) -> None:
    damage = next(d for d in DAMAGES if d.name == "truncated")
    table, _ = damaged_table(tmp_path, damage)
    human = run_wide("checkpoint", table)
    assert human.exit_code == 0, all_output(human)
    name = checkpoint_name(NEWEST)
    assert f"wrote the checkpoint of version {NEWEST}: {name}" in human.stdout
    assert f"repaired: replaced the damaged checkpoint of version {NEWEST} with {name}" in (
        human.stdout
    )


@pytest.mark.parametrize("name", [V2_PARQUET, V2_JSON])
def test_a_damaged_v2_checkpoint_is_replaced_in_place(tmp_path: Path, name: str) -> None:
    """The UUID-named checkpoint that lost a sidecar is rewritten under its own name, in its
    own format, without sidecars (readers prefer it to a classic checkpoint beside it)."""
    sidecar = newest_sidecar(GOLDEN / name)
    table, good = golden_without(tmp_path, name, sidecar)
    expected = deltalake_rows(good)
    [uuid_named] = (table / "_delta_log").glob("00000000000000000006.checkpoint.*-*")
    result = run_checkpoint(open_log(str(table)))
    assert result.written and result.names == (uuid_named.name,)
    assert result.info is not None and result.info.v2
    assert result.repairs[0].startswith("replaced the damaged checkpoint of version 6")
    assert not (table / "_delta_log" / checkpoint_name(6)).exists()

    if uuid_named.suffix == ".json":
        actions = [json.loads(line) for line in uuid_named.read_text().splitlines()]
    else:
        actions = [
            {k: v for k, v in row.items() if v is not None}
            for row in pq.read_table(uuid_named).to_pylist()
        ]
    [metadata] = [a["checkpointMetadata"] for a in actions if "checkpointMetadata" in a]
    assert metadata["version"] == 6
    assert not any("sidecar" in a for a in actions)
    adds = {unquote(a["add"]["path"]) for a in actions if "add" in a}
    assert adds == {path for path, _ in replay_json(good)[1]}
    alone = without_commits_before(table, 6, tmp_path / "alone")
    assert deltalake_rows(alone) == expected
    assert run("inspect", table, "--verify").exit_code == 0


def test_a_table_dvtool_cannot_checkpoint_is_left_as_it_is(tmp_path: Path) -> None:
    """The golden multi-part table writes stats only as structs, which dvtool does not
    write: `checkpoint` refuses before writing anything, the damage stays reported."""
    part = "00000000000000000005.checkpoint.0000000002.0000000003.parquet"
    table, _ = golden_without(tmp_path, MULTI_PART, part)
    before = tree_hashes(table)
    refused = run("checkpoint", table)
    assert refused.exit_code == 7 and "writeStatsAsStruct" in refused.stderr
    assert tree_hashes(table) == before
    assert run("inspect", table, "--verify").exit_code == 6


@pytest.mark.parametrize("kind", ["half", "kill"])
def test_replacing_a_damaged_checkpoint_never_leaves_none(tmp_path: Path, kind: str) -> None:
    """A crash while the damaged checkpoint is replaced leaves it as it was (`half`: the
    new bytes stayed in a temp file) or the complete new one (`kill` right after the
    write): never no file, never half of one under its name. A second run mends it."""
    damage = next(d for d in DAMAGES if d.name == "truncated")
    table, expected = damaged_table(tmp_path, damage)
    path = table / "_delta_log" / checkpoint_name(NEWEST)
    damaged = path.read_bytes()
    env = {**os.environ, faults.ENV: f"checkpoint:{kind}"}
    proc = subprocess.run(
        [sys.executable, "-m", "dvtool", "checkpoint", str(table)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    if kind == "half":
        assert path.read_bytes() == damaged
    else:
        assert pq.read_metadata(path).num_rows > 0
    assert run("checkpoint", table).exit_code == 0
    assert damaged_rows(table) == expected and polars_rows(table) == expected
