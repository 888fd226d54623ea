"""SparkEngine against the arrow engine (scans) and against pyarrow (rewrites).

One local Spark session serves the in-process tests of this module. A standalone cluster
and a Spark Connect server are checked from child processes (tests/engines/spark_cluster.py):
a process holds one classic Spark session, and a Connect client switches all of PySpark in
its process into Connect mode. Everything binds to 127.0.0.1.

Tables: a deltalake-written table partitioned by a string (with NULLs and characters that
need escaping) and a date, DVs made by `dvtool delete` with the arrow engine; the golden
`dv-with-columnmapping/delta` (column mapping, physical names differ); and a hand-made
column-mapped layout with a nested struct, a column missing from one file and directory
names with glob characters.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import posixpath
import shutil
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake
from pyroaring import BitMap64

from dvtool.commands.delete.command import DeleteRequest, run_delete
from dvtool.commands.enable import run_enable
from dvtool.data_files import WrittenFile
from dvtool.deletion_vectors.codec import bitmap_rows
from dvtool.delta.log.reader import open_log
from dvtool.delta.protocol.arrow_types import arrow_schema
from dvtool.delta.protocol.schema import parse_schema
from dvtool.engines import SparkSettings, choose_engine
from dvtool.engines.arrow import ArrowEngine
from dvtool.engines.base import RewriteBin, RewriteInput, ScanFile, TableLayout
from dvtool.engines.spark.engine import SparkEngine
from dvtool.engines.spark.failures import SparkEngineError
from dvtool.engines.spark.paths import hadoop_path, spark_path_key
from dvtool.errors import UsageError
from dvtool.predicate import Predicate
from dvtool.storage.table_storage import Storage
from tests.engines.spark_cluster import DRIVER_CONF, run_in_child, table_scan
from tests.oracles import copy_golden, raw_rows
from tests.s3_server import S3Server

UTC = dt.timezone.utc
REGIONS = ["eu", "us west/#%{}[x]:é", None]

DELTA_PREDICATES = [
    "region = 'eu'",
    "region IS NULL OR n IS NULL",
    "s LIKE 'a%' AND day >= DATE '2024-01-02'",
    "d BETWEEN DATE '2024-01-03' AND DATE '2024-01-05' OR ts < TIMESTAMP '2024-01-02 03:00:00'",
    "amount > 1.5 OR st.x = 3",
    "NOT (s = 'bee') AND coalesce(n, 0) = 0",
    "lower(s) = 'ant' AND length(s) = 3 AND region = 'us west/#%{}[x]:é'",
    "date_add(d, 1) > DATE '2024-01-05' AND hour(ts) < 12 OR s RLIKE '^a.+e$'",
    "ts + INTERVAL 1 MONTH < TIMESTAMP '2024-02-02 00:00:00' AND date_format(ts, 'HH') = '03'",
]
GOLDEN_PREDICATES = [
    "part = 3 OR col2 = 'foo1'",
    "part IN (1, 2) AND col1 % 2 = 0 OR col2 IS NULL",
]
MAPPED_PREDICATES = [
    "st.x > 2 AND p = 'a b'",
    "extra IS NULL OR st.y = 'u'",
    "p IS NULL AND st IS NULL OR extra = 5",
]


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(spark_engine: SparkEngine) -> SparkEngine:
    """The module's one local Spark session (`spark_engine` of conftest.py)."""
    return spark_engine


def _rows(k: int) -> list[dict[str, Any]]:
    out = []
    for i in range(30 * k, 30 * (k + 1)):
        out.append(
            {
                "id": i,
                "n": None if i % 7 == 3 else i % 4,
                "s": [None, "ant", "bee", "apple", "", "O'Neil \\ é"][i % 6],
                "d": dt.date(2024, 1, 1) + dt.timedelta(days=i % 9),
                "ts": dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(hours=i, microseconds=i),
                "amount": None if i % 5 == 1 else Decimal(i % 13 - 4).scaleb(-1),
                "st": None if i % 11 == 0 else {"x": i % 5, "y": "u" if i % 2 else None},
                "region": REGIONS[i % 3],
                "day": dt.date(2024, 1, 1 + k % 2),
            }
        )
    return out


DELTA_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("n", pa.int32()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("amount", pa.decimal128(10, 2)),
        ("st", pa.struct([("x", pa.int64()), ("y", pa.string())])),
        ("region", pa.string()),
        ("day", pa.date32()),
    ]
)


@pytest.fixture(scope="module")
def delta_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Partitioned by (region, day), 9 files, DVs written by `dvtool delete` (arrow)."""
    root = tmp_path_factory.mktemp("spark") / "t a b#é+q=1"
    for k in range(3):
        data = pa.Table.from_pylist(_rows(k), DELTA_SCHEMA)
        write_deltalake(str(root), data, partition_by=["region", "day"], mode="append")
    log = open_log(str(root))
    run_enable(log)
    result = run_delete(log, DeleteRequest("id % 4 = 0 OR s = 'apple' AND id < 30"))
    assert result.metrics["numDeletionVectorsAdded"] > 0
    return root


def _mapped_table(root: Path) -> tuple[TableLayout, list[ScanFile]]:
    """Column mapping `name`: nested physical names, a column missing from one file."""

    def field(name: str, kind: Any, physical: str, fid: int) -> dict[str, Any]:
        metadata = {"delta.columnMapping.id": fid, "delta.columnMapping.physicalName": physical}
        return {"name": name, "type": kind, "nullable": True, "metadata": metadata}

    struct = {
        "type": "struct",
        "fields": [field("x", "long", "c-x", 3), field("y", "string", "c-y", 4)],
    }
    schema = {
        "type": "struct",
        "fields": [
            field("id", "long", "c-id", 1),
            field("st", struct, "c-st", 2),
            field("p", "string", "c-p", 5),
            field("extra", "long", "c-extra", 6),
        ],
    }
    st_type = pa.struct([("c-x", pa.int64()), ("c-y", pa.string())])
    first = pa.table(
        {
            "c-id": pa.array(range(8), pa.int64()),
            "c-st": pa.array(
                [{"c-x": i, "c-y": "u" if i % 2 else "v"} if i != 4 else None for i in range(8)],
                st_type,
            ),
            "c-extra": pa.array([5, None, 5, 1, None, 5, 2, 5], pa.int64()),
        }
    )
    second = pa.table(
        {
            "c-id": pa.array(range(8, 14), pa.int64()),
            "c-st": pa.array([None, {"c-x": 3, "c-y": "u"}] * 3, st_type),
        }
    )
    paths = ["c-p=a b%25[x]{y}/part-0 #1.parquet", "c-p=__HIVE_DEFAULT_PARTITION__/part-1.parquet"]
    for relative, data in zip(paths, [first, second], strict=True):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(data, root / relative, row_group_size=3)
    layout = TableLayout(
        Storage.for_table(str(root)), parse_schema(json.dumps(schema)), ("p",), "name"
    )
    files = [
        ScanFile(paths[0], str(root / paths[0]), {"c-p": "a b"}, 8, BitMap64([0, 3])),
        ScanFile(paths[1], str(root / paths[1]), {"c-p": None}, 6, None),
    ]
    return layout, files


# -- helpers ---------------------------------------------------------------------------------


def _predicate(layout: TableLayout, sql: str) -> Predicate:
    return Predicate.parse(sql, layout.schema, layout.partition_columns, layout.column_mapping_mode)


def _arrow_matches(layout: TableLayout, files: Sequence[ScanFile], sql: str) -> list[list[int]]:
    found = ArrowEngine(threads=2).find_matches(layout, files, _predicate(layout, sql))
    return [sorted(b) for b in found]


def _assert_same_matches(
    engine: SparkEngine, layout: TableLayout, files: Sequence[ScanFile], predicates: list[str]
) -> int:
    """Spark equals arrow for every predicate; returns the number of rows matched."""
    total = 0
    for sql in predicates:
        steps: list[int] = []
        got = engine.find_matches(layout, files, _predicate(layout, sql), steps.append)
        expected = _arrow_matches(layout, files, sql)
        assert [sorted(b) for b in got] == expected, sql
        assert sum(steps) == len(files), sql
        total += sum(len(rows) for rows in expected)
    return total


def _drop_rows(deleted: BitMap64 | None) -> np.ndarray | None:
    """A scan file's DV as a rewrite input's rows to drop."""
    return None if deleted is None else bitmap_rows(deleted)


def _directory(layout: TableLayout, f: ScanFile) -> str:
    relative = layout.storage.relative_to_root(f.location) or ""
    return posixpath.dirname(relative)


def _bins(layout: TableLayout, files: Sequence[ScanFile]) -> list[RewriteBin]:
    """One file with a DV; two files of one partition; one file with every row dropped."""
    with_dv = next(f for f in files if f.deleted)
    directory = _directory(layout, with_dv)
    pair = [f for f in files if _directory(layout, f) == directory and f is not with_dv]
    assert pair, "the table needs two files in one partition"
    everything = BitMap64()
    everything.add_range(0, with_dv.num_records or 0)
    return [
        RewriteBin(
            (RewriteInput(with_dv.path, with_dv.location, _drop_rows(with_dv.deleted)),),
            directory,
            with_dv.partition_values,
        ),
        RewriteBin(
            (
                RewriteInput(pair[0].path, pair[0].location, _drop_rows(pair[0].deleted)),
                RewriteInput(with_dv.path, with_dv.location, None),
            ),
            directory,
            with_dv.partition_values,
        ),
        RewriteBin(
            (RewriteInput(with_dv.path, with_dv.location, bitmap_rows(everything)),),
            directory,
            with_dv.partition_values,
        ),
    ]


def _bins_json(bins: Sequence[RewriteBin]) -> list[dict[str, Any]]:
    return [
        {
            "directory": b.directory,
            "partition_values": dict(b.partition_values),
            "inputs": [
                {"path": i.path, "drop": None if i.drop is None else i.drop.tolist()}
                for i in b.inputs
            ],
        }
        for b in bins
    ]


def _expected_rows(b: RewriteBin) -> list[dict[str, Any]]:
    out = []
    for item in b.inputs:
        rows = pq.read_table(item.location).to_pylist()
        out += [r for i, r in enumerate(rows) if item.drop is None or i not in item.drop]
    return out


def _check_written(layout: TableLayout, bins: Sequence[RewriteBin], written: Sequence[Any]) -> None:
    """Each written file holds its bin's rows (in order) and valid stats; empty bins give None."""
    assert len(written) == len(bins)
    schema = arrow_schema(layout.schema, layout.column_mapping_mode, layout.partition_columns)
    for b, w in zip(bins, written, strict=True):
        expected = _expected_rows(b)
        if not expected:
            assert w is None
            continue
        assert isinstance(w, WrittenFile)
        assert layout.storage.resolve(w.relative_path) == w.location
        relative = layout.storage.relative_to_root(w.location) or ""
        assert posixpath.dirname(relative) == b.directory
        assert os.path.getsize(w.location) == w.size
        table = pq.read_table(w.location)
        assert table.schema.equals(schema, check_metadata=True)
        assert table.to_pylist() == expected
        assert pq.ParquetFile(w.location).metadata.num_rows == len(expected)
        stats = json.loads(w.stats_json)
        assert stats["numRecords"] == w.num_records == len(expected)
        assert stats["tightBounds"] is True
        first = schema.names[0]
        values = [r[first] for r in expected if r[first] is not None]
        if values:
            assert stats["minValues"][first] == min(values)
            assert stats["maxValues"][first] == max(values)
        assert stats["nullCount"][first] == len(expected) - len(values)


def _check_child_result(
    layout: TableLayout, files: Sequence[ScanFile], bins: Sequence[RewriteBin], result: Any
) -> None:
    for sql, rows in result["matches"].items():
        assert rows == _arrow_matches(layout, files, sql), sql
        assert result["progress"][sql][0] == len(files), sql
    written = [None if w is None else WrittenFile(**w) for w in result["written"]]
    _check_written(layout, bins, written)


# -- tests -----------------------------------------------------------------------------------


def test_paths_map_to_hadoop_and_back(tmp_path: Path) -> None:
    assert hadoop_path("/tmp/a b%20#/x.parquet") == "file:///tmp/a b%20#/x.parquet"
    assert hadoop_path("s3://bucket/k/x.parquet") == "s3a://bucket/k/x.parquet"
    assert hadoop_path("s3a://bucket/k") == "s3a://bucket/k"
    assert hadoop_path("gcs://bucket/k") == "gs://bucket/k"
    assert hadoop_path("abfss://c@acct.dfs.core.windows.net/k") == (
        "abfss://c@acct.dfs.core.windows.net/k"
    )
    assert hadoop_path("az://c/k", {"account_name": "acct"}) == (
        "abfss://c@acct.dfs.core.windows.net/k"
    )
    assert hadoop_path("az://c/k", {"AZURE_STORAGE_ACCOUNT_NAME": "acct"}) == (
        "abfss://c@acct.dfs.core.windows.net/k"
    )
    with pytest.raises(Exception, match="account_name"):
        hadoop_path("abfs://c/k")
    with pytest.raises(Exception, match="memory"):
        hadoop_path("memory://t/x")
    # What Spark reports (URI strings) and what dvtool passes (raw Hadoop paths) meet.
    raw = hadoop_path("/tmp/a b%20c#d=é?x[1]/p 1%.parquet")
    for reported in (
        "file:/tmp/a%20b%2520c%23d=é%3Fx%5B1%5D/p%201%25.parquet",
        "file:///tmp/a%20b%2520c%23d=é%3Fx%5B1%5D/p%201%25.parquet",
    ):
        assert spark_path_key(reported) == spark_path_key(raw, encoded=False)
    assert spark_path_key("s3a://b/a%2Bb+c") == spark_path_key("s3://b/a+b+c", encoded=False)


def test_choose_engine_builds_spark_lazily() -> None:
    chosen = choose_engine("spark", SparkSettings(master="local[1]"))
    assert isinstance(chosen, SparkEngine)
    assert chosen.name == "spark"
    assert chosen._spark is None  # no session until the first scan or rewrite
    chosen.stop()


def test_find_matches_equals_arrow(engine: SparkEngine, delta_table: Path, tmp_path: Path) -> None:
    layout, files, _ = table_scan(delta_table)
    assert len(files) == 9 and sum(1 for f in files if f.deleted) >= 6
    assert _assert_same_matches(engine, layout, files, DELTA_PREDICATES) > 50
    # The predicates hit deleted rows, so equality above shows that Spark applied the DVs.
    undeleted = [dataclasses.replace(f, deleted=None) for f in files]
    assert any(
        _arrow_matches(layout, undeleted, sql) != _arrow_matches(layout, files, sql)
        for sql in DELTA_PREDICATES
    )
    assert engine.find_matches(layout, [], _predicate(layout, "id > 1")) == []

    golden = copy_golden("dv-with-columnmapping/delta", tmp_path)
    layout, files, _ = table_scan(golden)
    assert layout.column_mapping_mode == "name" and any(f.deleted for f in files)
    assert _assert_same_matches(engine, layout, files, GOLDEN_PREDICATES) > 5

    layout, files = _mapped_table(tmp_path / "mapped [x]{y} 50%")
    assert _assert_same_matches(engine, layout, files, MAPPED_PREDICATES) > 5


def test_spark_failures_are_engine_errors(
    engine: SparkEngine, delta_table: Path, tmp_path: Path
) -> None:
    layout, files, _ = table_scan(delta_table)
    gone = dataclasses.replace(files[0], location=str(tmp_path / "gone.parquet"))
    with pytest.raises(SparkEngineError, match=r"gone\.parquet"):
        engine.find_matches(layout, [gone], _predicate(layout, "id > 1"))


def test_rewrite_writes_one_file_per_bin(
    engine: SparkEngine, delta_table: Path, tmp_path: Path
) -> None:
    layout, files, configuration = table_scan(delta_table)
    bins = _bins(layout, files)
    steps: list[int] = []
    written = engine.rewrite(layout, configuration, bins, steps.append)
    assert sum(steps) == len(bins)
    assert [w is None for w in written] == [False, False, True]
    _check_written(layout, bins, written)
    assert engine.rewrite(layout, configuration, []) == []

    golden = copy_golden("dv-with-columnmapping/delta", tmp_path)
    layout, files, configuration = table_scan(golden)
    with_dv = [f for f in files if f.deleted]
    bins = [
        RewriteBin(
            (RewriteInput(f.path, f.location, _drop_rows(f.deleted)),),
            _directory(layout, f),
            f.partition_values,
        )
        for f in with_dv[:2]
    ]
    written = engine.rewrite(layout, configuration, bins)
    _check_written(layout, bins, written)
    assert written[0] is not None
    field_ids = [f.metadata[b"PARQUET:field_id"] for f in pq.read_schema(written[0].location)]
    assert field_ids == [b"2", b"3"]


def _data_files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*.parquet") if "_delta_log" not in p.parts}


def test_failed_rewrite_deletes_the_files_of_other_bins(
    engine: SparkEngine, delta_table: Path, tmp_path: Path
) -> None:
    """A bin whose input is gone fails the rewrite with its message; the files the other
    bins' tasks wrote are deleted, so the table directory holds exactly what it held."""
    root = tmp_path / "copy"
    shutil.copytree(delta_table, root)
    layout, files, configuration = table_scan(root)
    good = _bins(layout, files)[:2]
    gone = str(root / "gone" / "part-missing.parquet")
    missing = RewriteBin((RewriteInput("gone/part-missing.parquet", gone, None),), "gone", {})
    before = _data_files(root)
    with pytest.raises(SparkEngineError, match=r"part-missing\.parquet"):
        engine.rewrite(layout, configuration, [good[0], missing, good[1]])
    assert _data_files(root) == before
    # The same bins without the missing one are written and kept.
    written = engine.rewrite(layout, configuration, good)
    _check_written(layout, good, written)
    assert _data_files(root) == before | {Path(w.location) for w in written if w is not None}


_ID_SCHEMA = {
    "type": "struct",
    "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
}


def test_rewrite_refuses_memory_tables(engine: SparkEngine) -> None:
    storage = Storage.for_table("memory://spark-refused/t")
    layout = TableLayout(storage, parse_schema(json.dumps(_ID_SCHEMA)), (), "none")
    bins = [RewriteBin((RewriteInput("a.parquet", storage.join("a.parquet"), None),), "", {})]
    with pytest.raises(UsageError, match="memory://"):
        engine.rewrite(layout, {}, bins)


def test_delete_and_purge_on_spark_equal_arrow(engine: SparkEngine, tmp_path: Path) -> None:
    """The commands on the Spark engine give the table the arrow engine gives (polars reads
    both): a DV delete (Spark scan), a copy-on-write delete and a purge (Spark rewrites)."""
    import polars as pl

    from dvtool.commands.delete.command import DeleteRequest, run_delete
    from dvtool.commands.enable import run_enable
    from dvtool.commands.optimize.command import OptimizeRequest, run_optimize
    from dvtool.delta.log.reader import open_log
    from dvtool.engines.arrow import ArrowEngine

    tables = {}
    for name, chosen in (("arrow", ArrowEngine()), ("spark", engine)):
        root = tmp_path / name
        for k in range(2):
            data = pa.Table.from_pylist(_rows(k), DELTA_SCHEMA)
            write_deltalake(str(root), data, partition_by=["region", "day"], mode="append")
        log = open_log(str(root))
        run_delete(log, DeleteRequest("id % 3 = 0", mode="cow"), engine=chosen)
        run_enable(log)
        run_delete(log, DeleteRequest("id % 5 = 1"), engine=chosen)
        run_optimize(log, OptimizeRequest(purge=True), lambda n, e=chosen: e)
        tables[name] = sorted(pl.read_delta(str(root)).select("id").to_series().to_list())
    assert tables["spark"] == tables["arrow"]
    assert tables["arrow"] and all(i % 3 != 0 and i % 5 != 1 for i in tables["arrow"])


def test_purge_on_s3_reads_and_writes_through_fsspec(
    engine: SparkEngine, s3_server: S3Server, delta_table: Path, tmp_path: Path
) -> None:
    """Rewrites need no Hadoop connector: the tasks read and write the moto bucket through
    fsspec with the storage options. After the purge polars (on S3) and the raw oracle
    reader (on a download) read the rows the raw reader reads before it, and no DV is left.

    (polars is not the oracle before the purge: it keeps the DV-deleted rows of the files
    under `region=us west/#%{}[x]:é`, locally and on S3.)"""
    import polars as pl

    from dvtool.commands.optimize.command import OptimizeRequest, run_optimize

    expected = sorted(row["id"] for row in raw_rows(delta_table))
    prefix = "engines/spark-purge/t"
    uri = s3_server.upload(delta_table, prefix)
    log = open_log(uri, s3_server.storage_options())
    result = run_optimize(log, OptimizeRequest(purge=True), lambda n: engine)
    assert result.engine == "spark" and result.metrics["numDeletionVectorRowsRemoved"] > 0
    options = s3_server.delta_options()
    assert sorted(pl.read_delta(uri, storage_options=options)["id"].to_list()) == expected
    copy = s3_server.download(prefix, tmp_path / "copy")
    assert sorted(row["id"] for row in raw_rows(copy)) == expected
    files = open_log(uri, s3_server.storage_options()).snapshot().files
    assert files.column("deletionVector").null_count == files.num_rows


def test_standalone_cluster(spark_standalone: Any, delta_table: Path, tmp_path: Path) -> None:
    layout, files, _ = table_scan(delta_table)
    bins = _bins(layout, files)
    spec = {
        "master": spark_standalone.url,
        "conf": {**DRIVER_CONF, "spark.executor.memory": "512m", "spark.cores.max": "1"},
        "table": str(delta_table),
        "predicates": [DELTA_PREDICATES[1], DELTA_PREDICATES[4]],
        "bins": _bins_json(bins),
    }
    _check_child_result(layout, files, bins, run_in_child(spec, tmp_path))


def test_spark_connect(spark_connect: Any, delta_table: Path, tmp_path: Path) -> None:
    """Delta scans and rewrites, and on an Iceberg v2 table (3 files of 20 rows) a delete
    scanned and a purge rewritten on the Connect server: pyiceberg reads the rows left."""
    from pyiceberg.table import StaticTable

    from dvtool.iceberg.tables import open_iceberg
    from tests.iceberg.commit_tables import committed, new_path_table, through_dvtool
    from tests.iceberg.commit_tables import rows as iceberg_rows

    iceberg = through_dvtool(new_path_table(str(tmp_path / "iceberg"), 2))
    for n in range(3):
        iceberg.append(iceberg_rows(n * 20, n * 20 + 20))
    committed(iceberg)
    layout, files, _ = table_scan(delta_table)
    bins = _bins(layout, files)
    spec = {
        "remote": spark_connect.url,
        "table": str(delta_table),
        "predicates": [DELTA_PREDICATES[2], DELTA_PREDICATES[6]],
        "bins": _bins_json(bins),
        "iceberg": str(tmp_path / "iceberg"),
    }
    result = run_in_child(spec, tmp_path)
    _check_child_result(layout, files, bins, result)
    assert result["iceberg"] == {"deleted": 20, "purged": 3, "engine": "spark"}
    location = open_iceberg(str(tmp_path / "iceberg")).metadata_location
    read = StaticTable.from_metadata(location).scan().to_arrow()
    assert sorted(read["id"].to_pylist()) == [i for i in range(60) if i % 3]


@pytest.mark.parametrize(
    ("make", "predicates"),
    [
        ("column-mapping-id", ["amount = 30", "amount > 10 AND info.city IS NOT NULL"]),
        ("type-widening", ["byte_long = 1 OR int_long = 2", "float_double > 1.0"]),
    ],
)
def test_scans_read_other_writers_files_as_the_table_schema(
    engine: SparkEngine, tmp_path: Path, make: str, predicates: list[str]
) -> None:
    """Files that hold a column under its pre-rename name with the right field id (column
    mapping `id`), or in a type narrower than the schema's (type widening), give the rows
    the arrow engine finds; a DV delete on Spark leaves the rows one on arrow leaves, both
    read by the independent reader of tests/oracles.py."""
    from tests import writers

    roots = {}
    for name in ("spark", "arrow"):
        if make == "column-mapping-id":
            roots[name] = writers.column_mapping_id_table(tmp_path / name)
        else:
            roots[name] = copy_golden(make, tmp_path / name)
            run_enable(open_log(str(roots[name])))
    log = open_log(str(roots["spark"]))
    snapshot = log.snapshot()
    layout = TableLayout.of(log.storage, snapshot)
    files = [
        ScanFile(path, log.storage.resolve(path), dict(values or []), records, None)
        for path, values, records in zip(
            snapshot.files.column("path").to_pylist(),
            snapshot.files.column("partitionValues").to_pylist(),
            snapshot.files.column("numRecords").to_pylist(),
            strict=True,
        )
    ]
    assert _assert_same_matches(engine, layout, files, predicates) > 0
    before = raw_rows(roots["spark"])
    run_delete(log, DeleteRequest(predicates[0]), engine=engine)
    run_delete(open_log(str(roots["arrow"])), DeleteRequest(predicates[0]), engine=ArrowEngine())
    after = raw_rows(roots["spark"])
    assert len(after) < len(before)
    assert sorted(map(repr, after)) == sorted(map(repr, raw_rows(roots["arrow"])))
