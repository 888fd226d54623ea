"""Acceptance tests of `dvtool enable`, checked on the raw log and with deltalake and polars.

The protocol and metadata a commit holds are read from the JSON commit files directly; that
other engines accept the result is checked by reading the enabled tables with deltalake
(`DeltaTable.protocol()`, its DataFusion reader) and polars.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from click.testing import CliRunner, Result
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from dvtool.cli import cli
from dvtool.commands.delete.command import DeleteRequest, run_delete
from dvtool.commands.enable import run_enable
from dvtool.delta.log.reader import open_log
from dvtool.errors import UnsupportedFeatureError, WriteRefusedError
from tests.oracles import copy_golden

COMMIT = re.compile(r"^(\d{20})\.json$")
LEGACY_2 = ["appendOnly", "invariants"]
LEGACY_4 = ["appendOnly", "changeDataFeed", "checkConstraints", "generatedColumns", "invariants"]


def _cli(*args: str | Path) -> Result:
    return CliRunner(env={"COLUMNS": "200"}).invoke(cli, [str(a) for a in args])


def versions(table: Path) -> list[int]:
    return sorted(int(m[1]) for f in os.listdir(table / "_delta_log") if (m := COMMIT.match(f)))


def actions(table: Path, version: int) -> list[dict[str, Any]]:
    text = (table / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def latest(table: Path, kind: str) -> dict[str, Any]:
    """The newest `protocol` or `metaData` action, from the JSON commits alone."""
    for version in reversed(versions(table)):
        for action in actions(table, version):
            if kind in action:
                return dict(action[kind])
    raise AssertionError(f"no {kind} action")


def tree_hashes(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def append_commit(table: Path, *new_actions: dict[str, Any]) -> int:
    version = versions(table)[-1] + 1
    info = {"commitInfo": {"timestamp": 1_700_000_000_000, "operation": "SET TBLPROPERTIES"}}
    lines = [json.dumps(a) for a in (info, *new_actions)]
    (table / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n")
    return version


def polars_ids(table: Path) -> list[int]:
    return sorted(pl.read_delta(str(table))["id"].to_list())


def deltalake_ids(table: Path) -> list[int]:
    result = QueryBuilder().register("t", DeltaTable(str(table))).execute("select id from t")
    return sorted(pa.table(result.read_all()).column("id").to_pylist())


ROWS = pa.table(
    {
        "id": pa.array(range(20), pa.int64()),
        "s": [f"r{i}" if i % 3 else None for i in range(20)],
    }
)
NTZ_ROWS = ROWS.append_column(
    "t", pa.array([dt.datetime(2024, 1, 1) + dt.timedelta(hours=i) for i in range(20)])
)

LEGACY_CASES = [
    # (case, configuration, rows, reader features, writer features) expected after enable
    ("writer-2", None, ROWS, [], LEGACY_2),
    ("append-only", {"delta.appendOnly": "true"}, ROWS, [], LEGACY_2),
    ("writer-4-cdf", {"delta.enableChangeDataFeed": "true"}, ROWS, [], LEGACY_4),
    ("3-7-timestampNtz", None, NTZ_ROWS, ["timestampNtz"], ["timestampNtz"]),
]


@pytest.mark.parametrize(
    ("case", "configuration", "rows", "readers", "writers"),
    LEGACY_CASES,
    ids=[c[0] for c in LEGACY_CASES],
)
def test_enable_upgrades_protocol_and_sets_property(
    tmp_path: Path,
    case: str,
    configuration: dict[str, str] | None,
    rows: pa.Table,
    readers: list[str],
    writers: list[str],
) -> None:
    table = tmp_path / "t"
    write_deltalake(str(table), rows.slice(0, 10), configuration=configuration)
    write_deltalake(str(table), rows.slice(10), mode="append")
    metadata_before = latest(table, "metaData")
    last = versions(table)[-1]

    result = run_enable(open_log(str(table)))

    assert result.changed and result.version == last + 1 and result.read_version == last
    assert versions(table)[-1] == last + 1
    committed = actions(table, result.version)
    [protocol] = [a["protocol"] for a in committed if "protocol" in a]
    [metadata] = [a["metaData"] for a in committed if "metaData" in a]
    assert protocol["minReaderVersion"] == 3 and protocol["minWriterVersion"] == 7
    assert sorted(protocol["readerFeatures"]) == sorted([*readers, "deletionVectors"])
    assert sorted(protocol["writerFeatures"]) == sorted([*writers, "deletionVectors"])
    # Every reader feature is a writer feature too (PROTOCOL.md).
    assert set(protocol["readerFeatures"]) <= set(protocol["writerFeatures"])
    assert result.protocol == protocol
    assert metadata["configuration"] == {
        **(metadata_before.get("configuration") or {}),
        "delta.enableDeletionVectors": "true",
    }
    for key in ("id", "schemaString", "partitionColumns", "format"):
        assert metadata[key] == metadata_before[key], key
    [info] = [a["commitInfo"] for a in committed if "commitInfo" in a]
    assert info["operation"] == "SET TBLPROPERTIES"
    # Other engines accept the upgraded table.
    dl = DeltaTable(str(table))
    assert dl.protocol().min_reader_version == 3 and dl.protocol().min_writer_version == 7
    assert "deletionVectors" in (dl.protocol().reader_features or [])
    assert "deletionVectors" in (dl.protocol().writer_features or [])
    assert dl.metadata().configuration["delta.enableDeletionVectors"] == "true"
    assert polars_ids(table) == list(range(20))
    assert deltalake_ids(table) == list(range(20))


def test_enable_is_idempotent(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(str(table), ROWS)
    first = run_enable(open_log(str(table)))
    assert first.changed
    before = tree_hashes(table)
    second = run_enable(open_log(str(table)))
    assert not second.changed and second.version is None
    assert second.read_version == first.version
    assert second.protocol == first.protocol
    assert tree_hashes(table) == before
    result = _cli("enable", table)
    assert result.exit_code == 0, result.output
    assert "already enabled" in result.output
    as_json = _cli("enable", table, "--json")
    assert json.loads(as_json.stdout)["changed"] is False
    assert tree_hashes(table) == before


def test_enable_through_the_cli(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(str(table), ROWS)
    result = _cli("enable", table, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["changed"] is True and doc["version"] == 1 and doc["read_version"] == 0
    assert doc["protocol"] == latest(table, "protocol")
    assert _cli("enable", table).exit_code == 0


def test_enable_on_golden_tables(tmp_path: Path) -> None:
    # Already enabled: nothing is committed.
    small = copy_golden("table-with-dv-small", tmp_path)
    before = tree_hashes(small)
    assert not run_enable(open_log(str(small))).changed
    assert tree_hashes(small) == before
    # Legacy 2/5 with column mapping: columnMapping is kept in both lists.
    mapped = copy_golden("cdf-column-mapping-name-mode", tmp_path)
    rows_before = pa.table(
        QueryBuilder().register("t", DeltaTable(str(mapped))).execute("select * from t").read_all()
    ).to_pylist()
    result = run_enable(open_log(str(mapped)))
    assert result.changed
    protocol = latest(mapped, "protocol")
    assert sorted(protocol["readerFeatures"]) == ["columnMapping", "deletionVectors"]
    assert sorted(protocol["writerFeatures"]) == sorted(
        [*LEGACY_4, "columnMapping", "deletionVectors"]
    )
    rows_after = pa.table(
        QueryBuilder().register("t", DeltaTable(str(mapped))).execute("select * from t").read_all()
    ).to_pylist()
    assert sorted(map(repr, rows_after)) == sorted(map(repr, rows_before))


def test_feature_without_property_and_property_without_feature(tmp_path: Path) -> None:
    # The protocol already supports DVs but the property is off: only metadata changes.
    table = tmp_path / "a"
    write_deltalake(str(table), ROWS)
    append_commit(
        table,
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors", "appendOnly", "invariants"],
            }
        },
    )
    metadata = latest(table, "metaData")
    metadata["configuration"] = {"delta.enableDeletionVectors": "false"}
    append_commit(table, {"metaData": metadata})
    result = run_enable(open_log(str(table)))
    assert result.changed
    protocol = latest(table, "protocol")
    assert sorted(protocol["writerFeatures"]) == ["appendOnly", "deletionVectors", "invariants"]
    assert latest(table, "metaData")["configuration"] == {"delta.enableDeletionVectors": "true"}
    # The property is set but the protocol (1/2) does not support DVs: the protocol changes.
    other = tmp_path / "b"
    write_deltalake(str(other), ROWS)
    metadata = latest(other, "metaData")
    metadata["configuration"] = {"delta.enableDeletionVectors": "true"}
    append_commit(other, {"metaData": metadata})
    assert run_enable(open_log(str(other))).changed
    protocol = latest(other, "protocol")
    assert protocol["readerFeatures"] == ["deletionVectors"]
    assert sorted(protocol["writerFeatures"]) == sorted([*LEGACY_2, "deletionVectors"])
    for path in (table, other):
        assert polars_ids(path) == list(range(20))
        run_delete(open_log(str(path)), DeleteRequest("id < 5"))
        assert polars_ids(path) == list(range(5, 20))
        assert deltalake_ids(path) == list(range(5, 20))


FORBIDDEN = [
    ("delta.enableIcebergCompatV2", None, "IcebergCompatV2"),
    ("delta.enableIcebergCompatV2", "icebergCompatV2", "icebergCompatV2"),
    ("delta.enableIcebergCompatV1", None, "IcebergCompatV1"),
    ("delta.compatibility.symlinkFormatManifest.enabled", None, "symlinkFormatManifest"),
]


@pytest.mark.parametrize(("key", "feature", "named"), FORBIDDEN)
def test_enable_refuses_incompatible_tables(
    tmp_path: Path, key: str, feature: str | None, named: str
) -> None:
    table = tmp_path / "t"
    write_deltalake(str(table), ROWS)
    new: list[dict[str, Any]] = []
    if feature:
        new.append(
            {
                "protocol": {
                    "minReaderVersion": 3,
                    "minWriterVersion": 7,
                    "readerFeatures": [],
                    "writerFeatures": ["appendOnly", "invariants", "columnMapping", feature],
                }
            }
        )
    metadata = latest(table, "metaData")
    metadata["configuration"] = {key: "true"}
    new.append({"metaData": metadata})
    append_commit(table, *new)
    before = tree_hashes(table)
    result = _cli("enable", table)
    assert result.exit_code == 7, result.output
    assert named in result.output
    assert "internal error" not in result.output
    assert tree_hashes(table) == before
    with pytest.raises((WriteRefusedError, UnsupportedFeatureError)):
        run_enable(open_log(str(table)))
    assert tree_hashes(table) == before


def test_enable_refuses_unknown_writer_feature(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(str(table), ROWS)
    append_commit(
        table,
        {
            "protocol": {
                "minReaderVersion": 1,
                "minWriterVersion": 7,
                "writerFeatures": ["appendOnly", "invariants", "futureFeature"],
            }
        },
    )
    before = tree_hashes(table)
    result = _cli("enable", table)
    assert result.exit_code == 7, result.output
    assert "futureFeature" in result.output
    assert tree_hashes(table) == before
    missing = _cli("enable", tmp_path / "nowhere")
    assert missing.exit_code == 5 and not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("name", ["app-txn-checkpoint", "v2-classic-checkpoint-parquet"])
def test_enable_on_a_table_read_from_a_checkpoint(tmp_path: Path, name: str) -> None:
    """The metaData committed must be valid JSON for other engines even when dvtool read the
    table's metaData from a parquet checkpoint (where `format.options` is a map column)."""
    table = copy_golden(name, tmp_path)
    ids_before = deltalake_rows(table)
    before = latest(table, "metaData")
    result = run_enable(open_log(str(table)))
    assert result.changed
    metadata = latest(table, "metaData")
    assert isinstance(metadata["format"]["options"], dict)
    assert metadata["format"] == before["format"]
    for key in ("id", "schemaString", "partitionColumns", "createdTime"):
        assert metadata[key] == before[key], key
    assert deltalake_rows(table) == ids_before
    assert DeltaTable(str(table)).metadata().configuration["delta.enableDeletionVectors"] == "true"


def deltalake_rows(table: Path) -> list[str]:
    result = QueryBuilder().register("t", DeltaTable(str(table))).execute("select * from t")
    return sorted(map(repr, pa.table(result.read_all()).to_pylist()))
