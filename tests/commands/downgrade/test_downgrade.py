"""Acceptance tests of `dvtool downgrade` (`run_downgrade`).

The oracle is deltalake, which refuses tables with the `deletionVectors` reader feature and
cannot write tables with `checkpointProtection`: after a downgrade it must read exactly the
rows polars (which applies DVs) read before; after `truncate_history` it must also append.
The log is checked on the raw JSON commits and checkpoint parquet files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from dvtool.commands.delete.command import DeleteRequest, run_delete
from dvtool.commands.downgrade.command import (
    BARRIER_CHECKPOINTS,
    PROTECTION_PROPERTY,
    DowngradeResult,
    HistoryRetentionError,
    run_downgrade,
)
from dvtool.commands.enable import run_enable
from dvtool.delta.log import transaction as transaction_module
from dvtool.delta.log.reader import open_log
from dvtool.delta.log.writer import LogWriter
from dvtool.delta.protocol import protocol_upgrade as features_module
from dvtool.errors import CommitConflictError, UsageError, WriteRefusedError
from tests.oracles import copy_golden

GOLDEN_DV = [
    "table-with-dv-small",
    "basic-dv-with-checkpoint",
    "dv-partitioned-with-checkpoint/delta",
    "compacted-log-files-table",
]
COMMIT = re.compile(r"^(\d{20})\.json$")
CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint.*\.(parquet|json)$")
HOUR = 3600 * 1000
LATER = 25 * HOUR


# -- tables ----------------------------------------------------------------------------------


def oracle_table(path: Path) -> Path:
    """deltalake writes (partitioned, three commits), dvtool enables DVs and deletes."""
    ids = list(range(60))
    data = pa.table({"id": ids, "part": ["a" if i % 2 else "b" for i in ids]})
    for start in (0, 20, 40):
        write_deltalake(str(path), data.slice(start, 20), mode="append", partition_by=["part"])
    assert run_enable(open_log(str(path))).changed
    for where in ("id % 5 = 0", "id > 55", "part = 'a' AND id < 10"):
        assert run_delete(open_log(str(path)), DeleteRequest(where)).mode == "dv"
    return path


def dv_table(name: str, tmp_path: Path) -> Path:
    if name == "oracle":
        return oracle_table(tmp_path / "oracle")
    return copy_golden(name, tmp_path)


# -- readers and log helpers -------------------------------------------------------------------


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def polars_rows(table: Path) -> list[dict[str, Any]]:
    return _sorted(pl.read_delta(str(table)).to_dicts())


def deltalake_rows(table: Path) -> list[dict[str, Any]]:
    return _sorted(pl.from_arrow(DeltaTable(str(table)).to_pyarrow_table()).to_dicts())


def log_names(table: Path) -> list[str]:
    return sorted(os.listdir(table / "_delta_log"))


def commit_versions(table: Path) -> list[int]:
    return sorted(int(m[1]) for n in log_names(table) if (m := COMMIT.match(n)))


def checkpoint_versions(table: Path) -> set[int]:
    return {int(m[1]) for n in log_names(table) if (m := CHECKPOINT.match(n))}


def actions(table: Path, version: int) -> list[dict[str, Any]]:
    text = (table / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def only(table: Path, version: int, kind: str) -> dict[str, Any]:
    found = [a[kind] for a in actions(table, version) if kind in a]
    assert len(found) == 1, f"version {version} has {len(found)} {kind} actions"
    return dict(found[0])


def commit_uses_dvs(table: Path, version: int) -> bool:
    for action in actions(table, version):
        for kind, body in action.items():
            if kind in ("add", "remove") and body.get("deletionVector"):
                return True
            config = body.get("configuration") or {} if kind == "metaData" else {}
            if str(config.get("delta.enableDeletionVectors", "")).lower() == "true":
                return True
    return False


def checkpoint_add_dvs(table: Path) -> int:
    """Adds with a DV in every checkpoint parquet file of the log."""
    count = 0
    for name in log_names(table):
        if CHECKPOINT.match(name) and name.endswith(".parquet"):
            t = pq.read_table(table / "_delta_log" / name, columns=["add"])
            adds = [a for a in t.column("add").to_pylist() if a]
            count += sum(1 for a in adds if a.get("deletionVector"))
    return count


def tree_hashes(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def live_dv_files(table: Path) -> list[str]:
    files = open_log(str(table)).snapshot().files
    return sorted(
        p
        for p, dv in zip(
            files["path"].to_pylist(), files["deletionVector"].to_pylist(), strict=True
        )
        if dv
    )


# -- default mode: drop with checkpoint protection -----------------------------------------------


@pytest.mark.parametrize("name", [*GOLDEN_DV, "oracle"])
def test_default_drop_keeps_rows_for_readers_without_dvs(tmp_path: Path, name: str) -> None:
    table = dv_table(name, tmp_path)
    expected = polars_rows(table)
    read_version = commit_versions(table)[-1]
    with pytest.raises(Exception, match="deletionVectors"):
        DeltaTable(str(table)).to_pyarrow_table()

    result = run_downgrade(open_log(str(table)))

    assert deltalake_rows(table) == expected
    assert polars_rows(table) == expected
    version = result.version
    assert version is not None and version == commit_versions(table)[-1]
    # The drop commit: normalised protocol with checkpointProtection, the property = V.
    protocol = only(table, version, "protocol")
    assert protocol == result.protocol_after
    assert protocol["minReaderVersion"] == 1 and protocol["minWriterVersion"] == 7
    assert "readerFeatures" not in protocol
    assert "checkpointProtection" in protocol["writerFeatures"]
    assert "deletionVectors" not in protocol["writerFeatures"]
    config = only(table, version, "metaData")["configuration"]
    assert config[PROTECTION_PROPERTY] == str(version)
    assert config["delta.enableDeletionVectors"] == "false"
    info = only(table, version, "commitInfo")
    assert info["operation"] == "DROP FEATURE"
    assert info["operationParameters"]["featureName"] == "deletionVectors"
    # Barrier checkpoints on empty commits right before the drop, and one at the drop.
    barriers = list(range(version - BARRIER_CHECKPOINTS, version))
    for v in barriers:
        assert [list(a) for a in actions(table, v)] == [["commitInfo"]]
        assert only(table, v, "commitInfo")["operation"] == "Empty Commit"
    assert set(barriers) | {version} <= checkpoint_versions(table)
    assert json.loads((table / "_delta_log" / "_last_checkpoint").read_text())["version"] == version
    # Property, purge, barriers, drop: nothing else was committed.
    assert commit_versions(table)[-1] - read_version == 2 + BARRIER_CHECKPOINTS + 1
    assert live_dv_files(table) == []
    assert DeltaTable(str(table)).protocol().min_reader_version == 1
    kinds = [s.action for s in result.steps]
    assert kinds == ["set-property", "purge"] + ["empty-commit", "checkpoint"] * 3 + [
        "drop-feature",
        "checkpoint",
    ]
    assert result.changed and result.dropped_features == ["deletionVectors"]


def test_default_drop_keeps_other_features(tmp_path: Path) -> None:
    table = copy_golden("compacted-log-files-table", tmp_path)
    result = run_downgrade(open_log(str(table)))
    assert result.protocol_after == {
        "minReaderVersion": 1,
        "minWriterVersion": 7,
        "writerFeatures": ["changeDataFeed", "checkpointProtection"],
    }


def test_default_drop_on_a_dvtool_enabled_legacy_table(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(str(table), pa.table({"id": list(range(10))}))  # protocol 1/2
    run_enable(open_log(str(table)))
    run_delete(open_log(str(table)), DeleteRequest("id < 3"))
    result = run_downgrade(open_log(str(table)))
    assert result.protocol_after == {
        "minReaderVersion": 1,
        "minWriterVersion": 7,
        "writerFeatures": ["appendOnly", "checkpointProtection", "invariants"],
    }
    assert sorted(r["id"] for r in deltalake_rows(table)) == list(range(3, 10))


def test_nothing_to_drop(tmp_path: Path) -> None:
    table = copy_golden("table-without-dv-small", tmp_path)
    before = tree_hashes(table)
    for truncate in (False, True):
        result = run_downgrade(open_log(str(table)), truncate_history=truncate, force=truncate)
        assert not result.changed and result.steps == [] and result.dropped_features == []
        assert result.protocol_after == result.protocol_before
    assert tree_hashes(table) == before


def test_second_default_run_commits_nothing(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    run_downgrade(open_log(str(table)))
    before = tree_hashes(table)
    assert not run_downgrade(open_log(str(table))).changed
    assert tree_hashes(table) == before


# -- truncate history ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*GOLDEN_DV, "oracle"])
def test_truncate_history_makes_the_table_writable_without_dvs(tmp_path: Path, name: str) -> None:
    table = dv_table(name, tmp_path)
    expected = polars_rows(table)

    result = run_downgrade(open_log(str(table)), truncate_history=True, force=True)

    assert deltalake_rows(table) == expected
    boundary = result.history_boundary
    assert boundary is not None and commit_versions(table)[0] == boundary
    assert min(checkpoint_versions(table)) == boundary
    # No version left in the log uses deletion vectors.
    assert not any(commit_uses_dvs(table, v) for v in commit_versions(table))
    assert checkpoint_add_dvs(table) == 0
    protocol = only(table, result.version or -1, "protocol")
    features = set(protocol.get("readerFeatures") or []) | set(protocol.get("writerFeatures") or [])
    assert not features & {"deletionVectors", "checkpointProtection"}
    assert PROTECTION_PROPERTY not in only(table, result.version or -1, "metaData")["configuration"]
    assert result.deleted_log_files and not any(
        (table / "_delta_log" / n).exists() for n in result.deleted_log_files
    )
    # A writer without DV support appends; reading back gives the union.
    dt = DeltaTable(str(table))
    more = dt.to_pyarrow_table().slice(0, 3)
    write_deltalake(str(table), more, mode="append")
    union = _sorted(expected + pl.from_arrow(more).to_dicts())
    assert deltalake_rows(table) == union
    assert polars_rows(table) == union


def test_truncate_history_protocol_back_to_legacy(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(str(table), pa.table({"id": list(range(10))}))
    run_enable(open_log(str(table)))
    run_delete(open_log(str(table)), DeleteRequest("id < 3"))
    result = run_downgrade(open_log(str(table)), truncate_history=True, force=True)
    assert result.protocol_after == {"minReaderVersion": 1, "minWriterVersion": 2}
    assert DeltaTable(str(table)).protocol().min_writer_version == 2


def test_truncate_history_waits_for_the_retention(tmp_path: Path) -> None:
    table = copy_golden("basic-dv-with-checkpoint", tmp_path)
    expected = polars_rows(table)

    with pytest.raises(HistoryRetentionError) as error:
        run_downgrade(open_log(str(table)), truncate_history=True)

    message = str(error.value)
    assert "24 hours" in message and "--force" in message
    partial = error.value.partial
    boundary = partial.history_boundary
    assert boundary is not None and partial.truncate_allowed_at_ms is not None
    assert [s.action for s in partial.steps] == [
        "set-property",
        "purge",
        "empty-commit",
        "checkpoint",
    ]
    # DVs are purged and the boundary checkpoint exists, but nothing was deleted or dropped.
    assert live_dv_files(table) == []
    assert commit_versions(table)[0] == 0 and boundary in checkpoint_versions(table)
    assert "deletionVectors" in open_log(str(table)).snapshot().reader_features
    assert polars_rows(table) == expected

    # Once the retention has passed the same command completes, reusing the boundary.
    now = partial.truncate_allowed_at_ms + 1
    result = run_downgrade(open_log(str(table)), truncate_history=True, now_ms=now)
    assert result.history_boundary == boundary and commit_versions(table)[0] == boundary
    assert [s.action for s in result.steps] == ["truncate", "drop-feature", "checkpoint"]
    assert deltalake_rows(table) == expected


def test_retention_property_is_respected(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    version = commit_versions(table)[-1] + 1
    metadata = only(table, 0, "metaData")
    metadata["configuration"] = {
        **metadata.get("configuration", {}),
        "delta.dropFeatureTruncateHistory.retentionDuration": "interval 2 hours",
    }
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "SET TBLPROPERTIES"}}
    lines = [json.dumps(info), json.dumps({"metaData": metadata})]
    (table / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n")
    with pytest.raises(HistoryRetentionError, match="interval 2 hours") as error:
        run_downgrade(open_log(str(table)), truncate_history=True)
    allowed = error.value.partial.truncate_allowed_at_ms
    assert allowed is not None and allowed - int(time.time() * 1000) <= 2 * HOUR
    result = run_downgrade(open_log(str(table)), truncate_history=True, now_ms=allowed + 1)
    assert result.version is not None


def test_default_then_truncate_drops_checkpoint_protection(tmp_path: Path) -> None:
    table = copy_golden("dv-partitioned-with-checkpoint/delta", tmp_path)
    expected = polars_rows(table)
    first = run_downgrade(open_log(str(table)))
    assert first.version is not None

    plan = run_downgrade(open_log(str(table)), truncate_history=True, dry_run=True)
    assert plan.dropped_features == ["checkpointProtection"]
    assert plan.history_boundary == first.version, "the protected checkpoint is the boundary"

    second = run_downgrade(
        open_log(str(table)), truncate_history=True, now_ms=int(time.time() * 1000) + LATER
    )
    assert second.history_boundary == first.version
    assert commit_versions(table)[0] == first.version
    assert second.protocol_after == {"minReaderVersion": 1, "minWriterVersion": 1}
    assert deltalake_rows(table) == expected
    write_deltalake(str(table), DeltaTable(str(table)).to_pyarrow_table(), mode="append")
    assert len(deltalake_rows(table)) == 2 * len(expected)


def test_truncate_deletes_unreferenced_sidecars(tmp_path: Path) -> None:
    table = copy_golden("v2-checkpoints-parquet-with-sidecars", tmp_path)
    sidecars = table / "_delta_log" / "_sidecars"
    assert any(sidecars.iterdir())
    run_enable(open_log(str(table)))
    run_delete(open_log(str(table)), DeleteRequest("id % 7 = 0"))
    snapshot = open_log(str(table)).snapshot()
    expected = int(sum(snapshot.files["numRecords"].to_pylist())) - int(
        sum(snapshot.dv_cardinality.to_pylist())
    )

    result = run_downgrade(open_log(str(table)), truncate_history=True, force=True)

    assert not any(sidecars.iterdir()), "no remaining checkpoint references a sidecar"
    assert any(n.startswith("_sidecars/") for n in result.deleted_log_files)
    log = open_log(str(table))
    after = log.snapshot()
    files = [log.storage.resolve(p) for p in after.files["path"].to_pylist()]
    ids = [i for f in files for i in pq.read_table(f)["id"].to_pylist()]
    assert len(ids) == expected and all(i % 7 for i in ids)
    assert (
        "v2Checkpoint" in after.reader_features and "deletionVectors" not in after.reader_features
    )


# -- dry run -------------------------------------------------------------------------------------


@pytest.mark.parametrize("truncate", [False, True])
def test_dry_run_writes_nothing_and_plans_the_real_run(tmp_path: Path, truncate: bool) -> None:
    table = copy_golden("dv-partitioned-with-checkpoint/delta", tmp_path)
    twin = tmp_path / "twin"
    shutil.copytree(table, twin)
    before = tree_hashes(table)

    plan = run_downgrade(open_log(str(table)), truncate_history=truncate, dry_run=True)

    assert tree_hashes(table) == before
    assert plan.dry_run and not plan.changed and plan.version is None
    assert sorted(plan.files_to_rewrite) == live_dv_files(table)
    done = run_downgrade(open_log(str(twin)), truncate_history=truncate, force=truncate)
    assert plan.protocol_after == done.protocol_after
    assert [s.action for s in plan.steps] == [s.action for s in done.steps]
    if truncate:
        assert set(plan.deleted_log_files) <= set(done.deleted_log_files)
        assert plan.warnings and "--force" in plan.warnings[0]
    doc = plan.to_json()
    assert json.loads(json.dumps(doc)) == doc
    assert doc["files_to_rewrite"] == plan.files_to_rewrite


def test_force_needs_truncate_history(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    with pytest.raises(UsageError):
        run_downgrade(open_log(str(table)), force=True)


# -- concurrency and validation ------------------------------------------------------------------


def _racing_writer(monkeypatch: pytest.MonkeyPatch, inject: Any) -> list[int]:
    """Before the protocol commit's first attempt, `inject(version)` commits as another
    writer would; returns the versions it injected."""
    injected: list[int] = []

    class Racing(LogWriter):
        def try_commit(self, read_version: int, actions: Any, read_set: Any, **kw: Any) -> Any:
            if callable(actions) and not injected:
                injected.append(read_version + 1)
                inject(read_version + 1)
            return super().try_commit(read_version, actions, read_set, **kw)

    monkeypatch.setattr(transaction_module, "LogWriter", Racing)
    return injected


def _write_commit(table: Path, version: int, *body: dict[str, Any]) -> None:
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}
    text = "\n".join(json.dumps(a) for a in (info, *body)) + "\n"
    (table / "_delta_log" / f"{version:020d}.json").write_text(text)


def test_concurrent_commit_adding_a_dv_stops_the_drop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = oracle_table(tmp_path / "t")

    def add_dv(version: int) -> None:
        add = open_log(str(table)).snapshot().files.slice(0, 1).to_pylist()[0]
        path = add["path"]
        dv = {
            "storageType": "i",
            "pathOrInlineDv": "0000000000",
            "sizeInBytes": 8,
            "cardinality": 1,
        }
        partition = dict(add["partitionValues"])
        _write_commit(
            table,
            version,
            {"remove": {"path": path, "dataChange": True, "deletionTimestamp": 1}},
            {
                "add": {
                    "path": path,
                    "partitionValues": partition,
                    "size": add["size"],
                    "modificationTime": 1,
                    "dataChange": True,
                    "stats": json.dumps({"numRecords": add["numRecords"]}),
                    "deletionVector": dv,
                }
            },
        )

    injected = _racing_writer(monkeypatch, add_dv)
    with pytest.raises(CommitConflictError, match="deletion vectors") as error:
        run_downgrade(open_log(str(table)))
    assert injected and "nothing was dropped" in str(error.value)
    snapshot = open_log(str(table)).snapshot()
    assert snapshot.version == injected[0]
    assert "deletionVectors" in snapshot.reader_features


def test_concurrent_append_is_retried_and_the_protected_version_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = oracle_table(tmp_path / "t")
    expected = polars_rows(table)
    extra = {"id": 1000, "part": "a"}

    def append(version: int) -> None:
        target = table / "part=a" / "extra.parquet"
        pq.write_table(pa.table({"id": [extra["id"]]}), target)
        _write_commit(
            table,
            version,
            {
                "add": {
                    "path": "part=a/extra.parquet",
                    "partitionValues": {"part": "a"},
                    "size": target.stat().st_size,
                    "modificationTime": 1,
                    "dataChange": True,
                    "stats": json.dumps({"numRecords": 1}),
                }
            },
        )

    injected = _racing_writer(monkeypatch, append)
    result = run_downgrade(open_log(str(table)))
    assert result.version == injected[0] + 1
    config = only(table, result.version, "metaData")["configuration"]
    assert config[PROTECTION_PROPERTY] == str(result.version)
    assert deltalake_rows(table) == _sorted([*expected, extra])


def test_concurrent_commit_without_conflict_moves_the_protected_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    injected = _racing_writer(
        monkeypatch,
        lambda v: _write_commit(table, v, {"txn": {"appId": "other", "version": 1}}),
    )
    result = run_downgrade(open_log(str(table)))
    assert result.version == injected[0] + 1
    config = only(table, result.version, "metaData")["configuration"]
    assert config[PROTECTION_PROPERTY] == str(result.version)


def test_feature_required_by_another_is_not_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors", "inCommitTimestamp"],
    }
    _write_commit(table, commit_versions(table)[-1] + 1, {"protocol": protocol})
    monkeypatch.setitem(
        features_module.REQUIRED_FEATURES, "inCommitTimestamp", frozenset({"deletionVectors"})
    )
    before = tree_hashes(table)
    with pytest.raises(WriteRefusedError, match="inCommitTimestamp"):
        run_downgrade(open_log(str(table)))
    assert tree_hashes(table) == before


def test_result_json(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    result = run_downgrade(open_log(str(table)))
    assert isinstance(result, DowngradeResult)
    doc = result.to_json()
    assert json.loads(json.dumps(doc)) == doc
    assert {
        "read_version",
        "version",
        "dry_run",
        "changed",
        "truncate_history",
        "protocol_before",
        "protocol_after",
        "dropped_features",
        "steps",
        "files_to_rewrite",
        "purge",
        "history_boundary",
        "deleted_log_files",
        "truncate_allowed_at_ms",
        "warnings",
    } == set(doc)
    assert doc["steps"][-2]["action"] == "drop-feature" and doc["changed"] is True
