"""Smoke tests of the fixture builders in tests/writers.py, each table opened by a reader
that shares no code with the builder: polars `read_delta` (delta-kernel-rs, DVs applied)
where it can read the table, deltalake's DataFusion `QueryBuilder`, pyarrow on the data
files, and the raw reader of tests/oracles.py where neither can (column mapping `id`
mode, row ids, variant bytes). Expected rows come from the builders' recipes as plain data.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder

from tests import writers
from tests.oracles import (
    UTC,
    canon,
    commit_actions,
    commit_versions,
    domain_metadata,
    latest_protocol,
    parquet_field_id,
    raw_rows,
    read_dv,
    replay_json,
    row_id_high_water_mark,
    row_tracking_rows,
    variant_from_parquet,
)

Row = dict[str, Any]


def polars_rows(path: Path) -> list[Row]:
    return list(pl.read_delta(str(path)).to_dicts())


def datafusion_rows(path: Path) -> list[Row]:
    """Rows by deltalake's DataFusion reader (reads DVs and column mapping `name`)."""
    reader = QueryBuilder().register("t", DeltaTable(str(path)))
    return list(pa.table(reader.execute("SELECT * FROM t").read_all()).to_pylist())


def live_adds(path: Path) -> list[dict[str, Any]]:
    return list(replay_json(path)[1].values())


def codecs(file: Path) -> set[str]:
    meta = pq.ParquetFile(file).metadata
    return {
        meta.row_group(g).column(c).compression
        for g in range(meta.num_row_groups)
        for c in range(meta.num_columns)
    }


# -- delta-rs -------------------------------------------------------------------------------


@pytest.mark.parametrize("partition_by", [None, ["part"]], ids=["flat", "partitioned"])
def test_deltalake_dv_table(tmp_path: Path, partition_by: list[str] | None) -> None:
    table = writers.deltalake_dv_table(tmp_path / "t", partition_by=partition_by)
    expected = writers.deltalake_dv_rows()
    assert sorted(polars_rows(table), key=lambda r: r["id"]) == expected
    assert canon(raw_rows(table)) == canon(expected)
    proto = latest_protocol(table)
    assert "deletionVectors" in proto["readerFeatures"]
    assert "variantType" in proto["readerFeatures"]  # deltalake 1.6 always lists it
    files = [table / a["path"] for a in live_adds(table)]
    types = {str(t) for f in files for t in pq.ParquetFile(f).schema_arrow.types}
    assert "string_view" in types, "files deltalake rewrote are live"
    assert any(codecs(f) == {"ZSTD"} for f in files), "the delete's DataFusion file is live"
    assert all(not a.get("deletionVector") for a in live_adds(table)), "delta-rs copies on write"


# -- Databricks row tracking ----------------------------------------------------------------

ROW_TRACKING_CASES = [
    {},
    {"partitioned": True},
    {"with_dvs": False},
    {"enabled": False},
    {"enabled": False, "with_dvs": False, "partitioned": True},
]


@pytest.mark.parametrize(
    "options",
    ROW_TRACKING_CASES,
    ids=["-".join(f"{k}={v}" for k, v in o.items()) or "default" for o in ROW_TRACKING_CASES],
)
def test_row_tracking_table(tmp_path: Path, options: dict[str, bool]) -> None:
    table = writers.row_tracking_table(tmp_path / "t", **options)
    logical = [
        {k: v for k, v in r.items() if not k.startswith("_")} for r in writers.row_tracking_rows()
    ]
    assert canon(polars_rows(table)) == canon(logical)
    assert canon(datafusion_rows(table)) == canon(logical)

    rows = row_tracking_rows(table)
    assert canon([{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]) == canon(
        logical
    ), "the materialized columns are hidden"
    ids = [r["_row_id"] for r in rows]
    mark = row_id_high_water_mark(table)
    assert mark is not None
    assert len(set(ids)) == len(ids), "stable row ids are unique"
    assert all(0 <= i <= mark for i in ids), "no row id above the high-water mark"
    adds = live_adds(table)
    assert all(a["baseRowId"] > -1 and "defaultRowCommitVersion" in a for a in adds)
    configuration = replay_json(table)[0]["configuration"]
    id_column = configuration["delta.rowTracking.materializedRowIdColumnName"]
    version_column = configuration["delta.rowTracking.materializedRowCommitVersionColumnName"]
    assert id_column.startswith("_row-id-col-")
    assert version_column.startswith("_row-commit-version-col-")
    hidden = [
        pq.read_table(table / a["path"]).to_pydict()
        for a in adds
        if id_column in pq.read_schema(table / a["path"]).names
    ]
    enabled = options.get("enabled", True)
    if not enabled:
        assert "delta.enableRowTracking" not in configuration
        assert hidden == [], "nothing is materialized while row tracking is only supported"
        return
    assert configuration["delta.enableRowTracking"] == "true"
    # Every row keeps the id it was inserted with (= its `id` by construction) and its
    # insert version; the updated row gets the UPDATE's version.
    assert sorted(rows, key=lambda r: r["id"]) == writers.row_tracking_rows()
    # the OPTIMIZE output, read with pyarrow: stable ids and versions materialized, non-null
    compacted = [h for h in hidden if len(h["id"]) == 8]
    assert len(compacted) == 1
    assert compacted[0][id_column] == compacted[0]["id"]
    assert None not in compacted[0][version_column]
    # the updated row: id preserved, commit version not (null)
    updated = [
        (rid, version)
        for h in hidden
        for i, rid, version in zip(h["id"], h[id_column], h[version_column], strict=True)
        if i == writers.ROW_TRACKING_UPDATED
    ]
    assert updated == [(writers.ROW_TRACKING_UPDATED, None)]
    if options.get("with_dvs", True):
        assert "deletionVectors" in latest_protocol(table)["readerFeatures"]
        dv_adds = [a for a in adds if a.get("deletionVector")]
        assert len(dv_adds) == 1 and read_dv(table, dv_adds[0]["deletionVector"]) == {2}


def test_row_tracking_commits_look_like_databricks(tmp_path: Path) -> None:
    table = writers.row_tracking_table(tmp_path / "t")
    infos = [commit_actions(table, v)[0]["commitInfo"] for v in commit_versions(table)]
    assert [i["operation"] for i in infos] == list(writers.ROW_TRACKING_COMMITS)
    assert {i["engineInfo"] for i in infos} == {"Databricks-Runtime/15.4.x-scala2.12"}
    assert domain_metadata(table)["delta.rowTracking"]["configuration"] == (
        '{"rowIdHighWaterMark":23}'
    )
    text = (table / "_delta_log" / "00000000000000000000.json").read_text()
    assert text.endswith("}\n") and ", " not in text.splitlines()[0]


# -- Delta Spark liquid clustering ----------------------------------------------------------


def test_clustered_table(tmp_path: Path) -> None:
    table = writers.clustered_table(tmp_path / "t")
    expected = writers.clustered_rows()
    assert sorted(polars_rows(table), key=lambda r: r["id"]) == expected
    assert expected[1]["ts"] == dt.datetime(2024, 1, 1, 0, 1, tzinfo=UTC)
    domain = domain_metadata(table)["delta.clustering"]
    assert json.loads(domain["configuration"])["clusteringColumns"] == [["id"]]
    writer_features = latest_protocol(table)["writerFeatures"]
    assert {"clustering", "domainMetadata"} <= set(writer_features)
    adds = live_adds(table)
    providers = sorted(str(a.get("clusteringProvider")) for a in adds)
    assert providers == ["None", "liquid", "liquid"]
    assert all("id" in json.loads(a["stats"])["minValues"] for a in adds)
    assert sum(1 for a in adds if a.get("deletionVector")) == 2
    assert replay_json(table)[0]["partitionColumns"] == []
    # OSS Spark 3 writes INT96 timestamps
    schema = pq.ParquetFile(table / adds[0]["path"]).schema
    assert schema.column(1).physical_type == "INT96"


# -- Iceberg conversion, column mapping id mode ---------------------------------------------


def test_column_mapping_id_table(tmp_path: Path) -> None:
    table = writers.column_mapping_id_table(tmp_path / "t")
    # The premise, read with pyarrow alone: the old file holds field id 2 under its
    # pre-rename name, so only resolution by field id finds amount = 30 there.
    metadata, live = replay_json(table)
    assert metadata["configuration"]["delta.columnMapping.mode"] == "id"
    by_name = {}
    for add in live.values():
        file = pq.ParquetFile(table / add["path"])
        fields = {parquet_field_id(f): f.name for f in file.schema_arrow}
        assert None not in fields, "every field carries a field id"
        by_name[fields[2]] = file.read().column(fields[2]).to_pylist()
    assert by_name == {"amount_old": [30, 30, 10], "amount": [30, 50, 70]}
    assert canon(raw_rows(table)) == canon(writers.column_mapping_id_rows())
    assert sum(1 for r in raw_rows(table) if r["amount"] == 30) == 3


# -- variant (Spark-written files) ----------------------------------------------------------


@pytest.mark.parametrize("shredded", [False, True], ids=["unshredded", "shredded"])
def test_variant_table(tmp_path: Path, shredded: bool) -> None:
    table = writers.variant_table(tmp_path / "t", shredded=shredded)
    features = set(latest_protocol(table)["readerFeatures"])
    assert "variantType" in features
    assert ("variantShredding" in features) is shredded
    expected = {
        r["id"]: None if r["json"] is None else json.loads(r["json"], parse_float=Decimal)
        for r in writers.VARIANT_ROWS
    }
    rows = raw_rows(table)
    assert {r["id"]: variant_from_parquet(r["v"]) for r in rows} == expected
    if not shredded:  # deltalake reads the raw struct; polars refuses Spark's Variant type
        assert {r["id"]: variant_from_parquet(r["v"]) for r in datafusion_rows(table)} == expected
    layouts = []
    for add in live_adds(table):
        stats = json.loads(add["stats"])
        assert "v" not in stats["minValues"] and "v" not in stats["maxValues"]
        assert "v" in stats["nullCount"]
        v_type = pq.read_schema(table / add["path"]).field("v").type
        layouts.append(sorted(v_type.field(i).name for i in range(v_type.num_fields)))
    plain = ["metadata", "value"]
    wanted = [["metadata", "typed_value", "value"], plain] if shredded else [plain, plain]
    assert sorted(layouts) == sorted(wanted)


# -- materializePartitionColumns ------------------------------------------------------------


def test_materialized_partition_table(tmp_path: Path) -> None:
    table = writers.materialized_partition_table(tmp_path / "t")
    expected = writers.materialized_partition_rows()
    assert canon(polars_rows(table)) == canon(expected)
    assert canon(raw_rows(table)) == canon(expected)
    assert all(list(r) == ["letter", "number", "a_float"] for r in raw_rows(table))
    assert "materializePartitionColumns" in latest_protocol(table)["writerFeatures"]
    for add in live_adds(table):
        letters = set(pq.read_table(table / add["path"]).column("letter").to_pylist())
        assert letters == {add["partitionValues"]["letter"]}, "the partition column is in the file"
    assert (table / "letter=__HIVE_DEFAULT_PARTITION__").is_dir()
