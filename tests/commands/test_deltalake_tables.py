"""Every command on the tables deltalake (delta-rs) really creates, checked against polars and
deltalake's own readers.

deltalake 1.x creates every DV table with `variantType` in its protocol, and its DELETE and
UPDATE rewrite files with `string_view` columns and zstd compression (DataFusion's writer).
dvtool used to refuse the first and crash with exit 70 on the second.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from dvtool.cli import cli
from dvtool.commands.delete.command import DeleteRequest, run_delete
from dvtool.commands.downgrade.command import run_downgrade
from dvtool.commands.optimize.command import OptimizeRequest, run_optimize
from dvtool.delta.log.reader import open_log
from dvtool.engines.arrow import ArrowEngine
from tests.oracles import canon, commit_versions, raw_rows, replay_json

ROWS = 400


def _data(start: int = 0) -> pa.Table:
    ids = list(range(start, start + ROWS))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": [f"name-{i % 37}" for i in ids],
            "amount": pa.array([i * 1.5 for i in ids], pa.float64()),
            "part": [f"p{i % 2}" for i in ids],
        }
    )


def deltalake_table(path: Path, *, partitioned: bool = False) -> Path:
    """A DV table as deltalake creates it, then rewritten by deltalake's DELETE (one file of
    the second write: DataFusion's writer, zstd, string_view) and UPDATE (the first write's
    file: delta-rs's writer, snappy, string_view)."""
    configuration = {"delta.enableDeletionVectors": "true"}
    partition_by = ["part"] if partitioned else None
    write_deltalake(str(path), _data(), configuration=configuration, partition_by=partition_by)
    write_deltalake(str(path), _data(ROWS), mode="append", partition_by=partition_by)
    DeltaTable(str(path)).delete(f"id >= {ROWS} AND id % 10 = 3")
    DeltaTable(str(path)).update({"name": "'updated'"}, predicate="id < 100 AND id % 50 = 7")
    return path


def set_table_properties(path: Path, **properties: str) -> None:
    """Commit `properties` as Delta Spark's ALTER TABLE ... SET TBLPROPERTIES does (deltalake
    refuses some Delta properties it does not implement, such as the parquet codec)."""
    metadata, _ = replay_json(path)
    metadata = {**metadata, "configuration": {**metadata["configuration"], **properties}}
    version = max(commit_versions(path)) + 1
    info = {
        "timestamp": 1_700_000_000_000,
        "operation": "SET TBLPROPERTIES",
        "operationParameters": {"properties": json.dumps(properties)},
        "readVersion": version - 1,
        "isolationLevel": "Serializable",
        "isBlindAppend": True,
        "engineInfo": "Apache-Spark/3.5.2 Delta-Lake/3.2.0",
    }
    lines = [json.dumps({"commitInfo": info}), json.dumps({"metaData": metadata})]
    (path / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def _rows(path: Path) -> list[tuple[Any, ...]]:
    return canon(pl.read_delta(str(path)).to_dicts())


def _query_rows(path: Path) -> list[tuple[Any, ...]]:
    result = QueryBuilder().register("t", DeltaTable(str(path))).execute("select * from t")
    return canon(pa.table(result.read_all()).to_pylist())


def _live_parquet(path: Path) -> list[pq.ParquetFile]:
    _, live = replay_json(path)
    return [pq.ParquetFile(path / add["path"]) for add in live.values()]


def test_the_fixture_is_what_deltalake_really_writes(tmp_path: Path) -> None:
    path = deltalake_table(tmp_path / "t")
    protocol = DeltaTable(str(path)).protocol()
    assert "variantType" in (protocol.reader_features or [])
    files = _live_parquet(path)
    types = {f.schema_arrow.field("name").type for f in files}
    assert pa.string_view() in types
    codecs = {f.metadata.row_group(0).column(0).compression for f in files}
    assert "ZSTD" in codecs


@pytest.mark.parametrize("partitioned", [False, True])
def test_inspect_and_dv_delete(tmp_path: Path, partitioned: bool) -> None:
    path = deltalake_table(tmp_path / "t", partitioned=partitioned)
    runner = CliRunner()
    assert runner.invoke(cli, ["inspect", str(path), "--verify"]).exit_code == 0
    before = _rows(path)
    result = run_delete(open_log(str(path)), DeleteRequest("name = 'updated' OR id < 20"))
    assert result.mode == "dv"
    expected = [r for r in before if not (dict(r)["name"] == "updated" or dict(r)["id"] < 20)]
    assert _rows(path) == _query_rows(path) == canon(raw_rows(path)) == expected
    assert len(expected) < len(before)


@pytest.mark.parametrize("partitioned", [False, True])
def test_purge_cow_delete_and_downgrade_on_deltalake_rewrites(
    tmp_path: Path, partitioned: bool
) -> None:
    path = deltalake_table(tmp_path / "t", partitioned=partitioned)
    log = open_log(str(path))
    run_delete(log, DeleteRequest("id % 7 = 0"))
    expected = _rows(path)
    run_optimize(log, OptimizeRequest(purge=True), lambda _: ArrowEngine())
    assert _rows(path) == _query_rows(path) == expected
    run_delete(log, DeleteRequest("amount > 500", mode="cow"))
    expected = [r for r in expected if dict(r)["amount"] <= 500]
    assert _rows(path) == _query_rows(path) == expected
    run_delete(log, DeleteRequest("id % 11 = 0"))
    run_downgrade(log)
    expected = [r for r in expected if dict(r)["id"] % 11]
    assert _rows(path) == _query_rows(path) == canon(raw_rows(path)) == expected
    assert "deletionVectors" not in (DeltaTable(str(path)).protocol().reader_features or [])


def test_rewrites_keep_the_input_codec(tmp_path: Path) -> None:
    path = deltalake_table(tmp_path / "t")
    log = open_log(str(path))
    run_delete(log, DeleteRequest("id % 5 = 1"))
    _, live = replay_json(path)
    inputs = {
        add["path"]: pq.ParquetFile(path / add["path"]).metadata.row_group(0).column(0).compression
        for add in live.values()
        if add.get("deletionVector")
    }
    assert set(inputs.values()) == {"SNAPPY", "ZSTD"}  # deltalake's write and its rewrites
    result = run_optimize(log, OptimizeRequest(purge=True), lambda _: ArrowEngine())
    assert result.versions
    _, after = replay_json(path)
    new = [add for add in after.values() if add["path"] not in {a["path"] for a in live.values()}]
    assert len(new) == len(inputs)
    codecs = sorted(
        pq.ParquetFile(path / add["path"]).metadata.row_group(0).column(0).compression
        for add in new
    )
    assert codecs == sorted(inputs.values())
    for add in new:
        extension = "zstd" if "ZSTD" in add["path"].upper() else "snappy"
        codec = pq.ParquetFile(path / add["path"]).metadata.row_group(0).column(0).compression
        assert codec.lower() == extension


def test_table_codec_property_wins(tmp_path: Path) -> None:
    path = deltalake_table(tmp_path / "t")
    set_table_properties(path, **{"delta.parquet.compression.codec": "gzip"})
    log = open_log(str(path))
    run_delete(log, DeleteRequest("id % 5 = 1"))
    expected = _rows(path)
    run_optimize(log, OptimizeRequest(purge=True), lambda _: ArrowEngine())
    assert _rows(path) == expected
    _, live = replay_json(path)
    codecs = {
        pq.ParquetFile(path / add["path"]).metadata.row_group(0).column(0).compression
        for add in live.values()
        if add["path"].endswith(".gz.parquet")
    }
    assert codecs == {"GZIP"}


def test_cli_delete_on_string_view_files_exits_zero(tmp_path: Path) -> None:
    path = deltalake_table(tmp_path / "t")
    runner = CliRunner()
    before = _rows(path)
    result = runner.invoke(
        cli, ["delete", str(path), "--where", "name = 'updated'", "--mode", "cow"]
    )
    assert result.exit_code == 0, result.output
    assert _rows(path) == [r for r in before if dict(r)["name"] != "updated"]
    result = runner.invoke(cli, ["optimize", str(path)])
    assert result.exit_code == 0, result.output
    assert _rows(path) == _query_rows(path)
