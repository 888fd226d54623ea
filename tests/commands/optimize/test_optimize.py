"""Acceptance tests of `dvtool optimize`: `--purge` (Delta's REORG ... APPLY (PURGE)) and
compaction (Delta's OPTIMIZE bin-packing), checked against independent oracles.

Rows are read before and after by polars `read_delta` (deletion vectors applied by
delta-kernel-rs), deltalake's DataFusion `QueryBuilder` (delta-rs; the reader for column
mapping, which polars refuses), and the raw reader of `tests/oracles.py` (JSON log replay +
pyarrow + DVs decoded with pyroaring), and compared in full, sorted. The expected rows of
generated tables are computed here from the data that was written. Statistics of new files
are compared with what pyarrow computes from the parquet file itself, and commit contents
and operation metrics with values derived here from the commit's own adds and removes (file
size percentiles as Delta's `FileSizeStatsWithHistogram`: the sorted sizes at index
`n / 4`, `n / 2` and `3n / 4`).
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result
from deltalake import DeltaTable, QueryBuilder, WriterProperties, write_deltalake

from dvtool.cli import cli
from dvtool.commands.delete.command import DeleteRequest, run_delete
from dvtool.commands.enable import run_enable
from dvtool.commands.optimize.command import OptimizeRequest, OptimizeResult, run_optimize
from dvtool.delta.log.reader import open_log
from dvtool.engines.arrow import ArrowEngine
from dvtool.errors import UsageError
from tests.oracles import (
    GOLDEN,
    canon,
    commit_actions,
    commit_versions,
    copy_golden,
    dv_key,
    file_rows,
    raw_rows,
    read_dv,
    replay_json,
    tree_hashes,
)

Row = dict[str, Any]
Live = dict[tuple[str, str | None], dict[str, Any]]
SIZE_METRICS = ("minFileSize", "p25FileSize", "p50FileSize", "p75FileSize", "maxFileSize")


# -- running dvtool --------------------------------------------------------------------------


def optimize(path: Path, **request: Any) -> OptimizeResult:
    """`run_optimize` on the in-process arrow engine."""
    return run_optimize(open_log(str(path)), OptimizeRequest(**request), lambda _: ArrowEngine())


def delete(path: Path, where: str) -> None:
    result = run_delete(open_log(str(path)), DeleteRequest(where))
    assert result.version is not None, where
    assert result.mode == "dv"


def run_cli(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


def inspect_json(path: Path) -> dict[str, Any]:
    result = run_cli("inspect", path, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# -- independent readers ---------------------------------------------------------------------


def polars_rows(path: Path, version: int | None = None) -> list[Row]:
    return pl.read_delta(str(path), version=version).to_dicts()


def deltalake_rows(path: Path, version: int | None = None) -> list[Row]:
    table = DeltaTable(str(path), version=version)
    result = QueryBuilder().register("t", table).execute("select * from t")
    return pa.table(result.read_all()).to_pylist()


def has_column_mapping(path: Path) -> bool:
    return "columnMapping" in (DeltaTable(str(path)).protocol().reader_features or [])


def assert_same_rows(
    path: Path, expected: Sequence[Row], version: int | None = None, *, polars: bool = True
) -> None:
    """Every independent reader returns exactly `expected` (full rows, any order)."""
    want = canon(expected)
    if polars and not has_column_mapping(path):
        assert canon(polars_rows(path, version)) == want, "polars"
    assert canon(deltalake_rows(path, version)) == want, "deltalake QueryBuilder"
    if version is None:
        assert canon(raw_rows(path)) == want, "raw parquet + DVs"


def live_adds(path: Path) -> Live:
    return replay_json(path)[1]


def data_files_on_disk(path: Path) -> set[Path]:
    return {
        p
        for p in path.rglob("*.parquet")
        if "_delta_log" not in p.parts and "_change_data" not in p.parts
    }


def assert_no_dvs(path: Path) -> None:
    assert inspect_json(path)["files_with_dvs"] == 0
    assert [k for k, add in live_adds(path).items() if add.get("deletionVector")] == []


# -- generated tables ------------------------------------------------------------------------

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("n", pa.int32()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("amount", pa.decimal128(10, 2)),
        ("st", pa.struct([("x", pa.int64()), ("y", pa.string())])),
        ("part", pa.string()),
    ]
)
DAY0 = dt.date(2024, 1, 1)
TS0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def make_rows(ids: Iterable[int], seed: int, parts: Sequence[str] = ("a", "b")) -> list[Row]:
    rng = random.Random(seed)
    return [
        {
            "id": i,
            "n": None if rng.random() < 0.2 else rng.randint(-50, 50),
            "f": None if rng.random() < 0.2 else rng.uniform(-10, 10),
            "s": rng.choice(["x", "yy", "zzz", None]),
            "d": DAY0 + dt.timedelta(days=rng.randint(0, 60)),
            "ts": TS0
            + dt.timedelta(seconds=rng.randint(0, 10**6), microseconds=rng.randint(0, 999)),
            "amount": None if rng.random() < 0.2 else Decimal(rng.randint(-9999, 9999)).scaleb(-2),
            "st": None
            if rng.random() < 0.1
            else {"x": rng.randint(0, 9), "y": rng.choice(["u", "v", None])},
            "part": parts[i % len(parts)],
        }
        for i in ids
    ]


def append(
    path: Path,
    rows: Sequence[Row],
    *,
    partitioned: bool = False,
    configuration: dict[str, str] | None = None,
    writer: WriterProperties | None = None,
) -> None:
    """One deltalake commit (one file per partition touched)."""
    write_deltalake(
        str(path),
        pa.Table.from_pylist(list(rows), SCHEMA),
        mode="append",
        partition_by=["part"] if partitioned else None,
        configuration=configuration,
        writer_properties=writer,
    )


def dv_table(
    path: Path,
    files: int,
    rows_per_file: int,
    *,
    partitioned: bool = False,
    configuration: dict[str, str] | None = None,
    writer: WriterProperties | None = None,
) -> list[Row]:
    """`files` appends of `rows_per_file` rows (ids `k * rows_per_file ...`), DVs enabled."""
    rows: list[Row] = []
    for k in range(files):
        chunk = make_rows(range(k * rows_per_file, (k + 1) * rows_per_file), seed=k)
        append(
            path,
            chunk,
            partitioned=partitioned,
            configuration=configuration if k == 0 else None,
            writer=writer,
        )
        rows += chunk
    assert run_enable(open_log(str(path))).changed
    return rows


def survivors(rows: Sequence[Row], deleted_ids: Iterable[int]) -> list[Row]:
    gone = set(deleted_ids)
    return [r for r in rows if r["id"] not in gone]


# -- checks of a commit and of the files it adds ---------------------------------------------


def delta_size_metrics(sizes: Sequence[int]) -> dict[str, str]:
    """Delta's FileSizeStatsWithHistogram on the added file sizes (0 when none)."""
    s = sorted(sizes)
    if not s:
        return dict.fromkeys(SIZE_METRICS, "0")
    n = len(s)
    values = (s[0], s[n // 4], s[n // 2], s[n * 3 // 4], s[-1])
    return {k: str(v) for k, v in zip(SIZE_METRICS, values, strict=True)}


def physical_columns(metadata: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Data (non-partition) columns: physical name -> (logical name, Delta type)."""
    schema = json.loads(metadata["schemaString"])
    mode = metadata.get("configuration", {}).get("delta.columnMapping.mode", "none")
    out = {}
    for f in schema["fields"]:
        if f["name"] in metadata.get("partitionColumns", []):
            continue
        physical = (
            f["name"] if mode == "none" else f["metadata"]["delta.columnMapping.physicalName"]
        )
        out[physical] = (f["name"], f["type"])
    return out


BOUNDED_TYPES = ("integer", "long", "short", "byte", "double", "float", "date", "timestamp")


def _stat_value(value: Any, delta_type: str) -> Any:
    """A pyarrow min/max as Delta writes it in JSON stats."""
    if delta_type == "date":
        return value.isoformat()
    if delta_type == "timestamp":  # milliseconds, truncated, UTC
        value = value.astimezone(dt.timezone.utc)
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    if delta_type.startswith("decimal"):
        return float(value)
    return value


def assert_stats_of_new_file(table: Path, metadata: dict[str, Any], add: dict[str, Any]) -> None:
    """numRecords is the parquet row count, bounds are tight and equal pyarrow's min/max, null
    counts equal pyarrow's; the file holds the table's data columns (no partition columns)."""
    location = table / unquote(add["path"])
    assert location.stat().st_size == add["size"]
    data = pq.read_table(location)
    stats = json.loads(add["stats"])
    assert stats["numRecords"] == data.num_rows == pq.ParquetFile(location).metadata.num_rows
    assert data.num_rows > 0, "an empty file must not be added"
    assert stats["tightBounds"] is True
    columns = physical_columns(metadata)
    assert sorted(data.column_names) == sorted(columns)
    checked = 0
    for physical, (_, delta_type) in columns.items():
        column = data.column(physical)
        if isinstance(delta_type, dict):  # nested: null counts per struct leaf
            for child in column.type if delta_type["type"] == "struct" else ():
                leaf = pc.struct_field(column, child.name)
                assert stats["nullCount"][physical][child.name] == leaf.null_count, physical
            continue
        assert stats["nullCount"][physical] == column.null_count, physical
        bounded = delta_type in BOUNDED_TYPES or delta_type.startswith("decimal")
        if delta_type == "string":  # exact while values are shorter than Delta's 32-char prefix
            bounded = max((len(v) for v in column.to_pylist() if v is not None), default=0) < 32
        if not bounded:
            continue
        if column.null_count == len(column):
            assert physical not in stats.get("minValues", {})
            continue
        if pa.types.is_floating(column.type) and pc.any(pc.is_nan(column)).as_py():
            continue
        if pa.types.is_timestamp(column.type) and not column.type.tz:
            column = column.cast(pa.timestamp("us", tz="UTC"))  # Delta timestamps are UTC
        bounds = pc.min_max(column).as_py()
        assert stats["minValues"][physical] == _stat_value(bounds["min"], delta_type), physical
        assert stats["maxValues"][physical] == _stat_value(bounds["max"], delta_type), physical
        checked += 1
    assert checked or not any(t in BOUNDED_TYPES for _, t in columns.values())


def descriptor(dv: dict[str, Any] | None) -> dict[str, Any] | None:
    """A DV descriptor without null fields (an inline DV's `"offset": null` is no offset)."""
    return None if dv is None else {k: v for k, v in dv.items() if v is not None}


def assert_commit(
    table: Path,
    version: int,
    operation: str,
    before: Live,
    *,
    predicate: Sequence[str] = (),
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The commit at `version` is a correct REORG/OPTIMIZE; returns its (removes, adds)."""
    actions = commit_actions(table, version)
    info = actions[0]["commitInfo"]
    removes = [a["remove"] for a in actions if "remove" in a]
    adds = [a["add"] for a in actions if "add" in a]
    assert {k for a in actions for k in a} <= {"commitInfo", "add", "remove"}
    assert info["operation"] == operation
    params = info["operationParameters"]
    assert json.loads(params["predicate"]) == list(predicate)
    if operation == "REORG":
        assert params["applyPurge"] == "true"
    assert info["isBlindAppend"] is False
    assert removes, "a rewrite removes its inputs"
    metadata = replay_json(table)[0]
    for rm in removes:
        key = (unquote(rm["path"]), dv_key(rm.get("deletionVector")))
        assert key in before, f"{key} was not live"
        source = before[key]
        assert rm["dataChange"] is False
        assert descriptor(rm.get("deletionVector")) == descriptor(source.get("deletionVector"))
        assert rm["size"] == source["size"]
        assert rm["partitionValues"] == source["partitionValues"]
    before_paths = {p for p, _ in before}
    for add in adds:
        assert add["dataChange"] is False
        assert "deletionVector" not in add or add["deletionVector"] is None
        assert unquote(add["path"]) not in before_paths, "a new file"
        assert_stats_of_new_file(table, metadata, add)
    # dataChange=false: the adds hold exactly the rows the removes held (DVs applied).
    removed_rows = [r for rm in removes for r in file_rows(table, metadata, rm)]
    added_rows = [r for add in adds for r in file_rows(table, metadata, add)]
    assert canon(added_rows) == canon(removed_rows)
    if operation == "REORG":  # one new file per input, holding that input's rows
        per_input = [canon(rows) for rm in removes if (rows := file_rows(table, metadata, rm))]
        per_output = [canon(file_rows(table, metadata, add)) for add in adds]
        assert sorted(per_output, key=repr) == sorted(per_input, key=repr)
    metrics = info["operationMetrics"]
    assert all(isinstance(v, str) for v in metrics.values()), metrics
    sizes = [a["size"] for a in adds]
    expected = {
        "numAddedFiles": str(len(adds)),
        "numRemovedFiles": str(len(removes)),
        "numAddedBytes": str(sum(sizes)),
        "numRemovedBytes": str(sum(rm["size"] for rm in removes)),
        "numDeletionVectorsRemoved": str(sum(1 for rm in removes if rm.get("deletionVector"))),
        **delta_size_metrics(sizes),
    }
    assert {k: metrics.get(k) for k in expected} == expected
    return removes, adds


# -- 1. purge on every golden DV table -------------------------------------------------------

GOLDEN_DV_TABLES = [
    # (table, logical rows as INDEX.md says)
    ("table-with-dv-small", 8),
    ("with-short-dv", 7),
    ("basic-dv-no-checkpoint", 8),
    ("basic-dv-with-checkpoint", 454),
    ("dv-partitioned-with-checkpoint/delta", 35),
    ("dv-with-columnmapping/delta", 35),
    ("log-replay-dv-key-cases/delta", 47),
    ("cdf-table-with-dv", 10),
    ("cdf-table-with-cdc-and-dvs", 5),
    ("compacted-log-files-table", 5),
]


def golden_expected_rows(name: str) -> list[Row] | None:
    expected = GOLDEN / name.split("/")[0] / "expected"
    if not name.endswith("/delta") or not expected.is_dir():
        return None
    return ds.dataset(str(expected), format="parquet").to_table().to_pylist()


def reader(path: Path) -> Callable[[Path], list[Row]]:
    return deltalake_rows if has_column_mapping(path) else polars_rows


def check_purge(table: Path, logical_rows: int, golden: list[Row] | None = None) -> None:
    read = reader(table)
    before_rows = read(table)
    assert len(before_rows) == logical_rows
    if golden is not None:
        assert canon(before_rows) == canon(golden)
    assert canon(raw_rows(table)) == canon(before_rows)
    before = live_adds(table)
    with_dvs = {k: a for k, a in before.items() if a.get("deletionVector")}
    assert inspect_json(table)["files_with_dvs"] == len(with_dvs)
    last = commit_versions(table)[-1]
    old_files = data_files_on_disk(table)

    result = optimize(table, purge=True)

    assert result.operation == "REORG"
    assert result.read_version == last
    assert result.engine == "arrow"
    if not with_dvs:
        assert result.versions == [] and result.bins == []
        assert commit_versions(table)[-1] == last
        return
    assert result.versions == [last + 1]
    assert commit_versions(table)[-1] == last + 1
    removes, adds = assert_commit(table, last + 1, "REORG", before)
    # One new file per input with a DV; files without DVs are not touched.
    assert {(unquote(r["path"]), dv_key(r["deletionVector"])) for r in removes} == set(with_dvs)
    dropped = sum(len(read_dv(table, a["deletionVector"])) for a in with_dvs.values())
    kept = sum(json.loads(a["stats"])["numRecords"] for a in with_dvs.values()) - dropped
    assert sum(json.loads(a["stats"])["numRecords"] for a in adds) == kept
    assert len(adds) == sum(
        1
        for a in with_dvs.values()
        if json.loads(a["stats"])["numRecords"] > len(read_dv(table, a["deletionVector"]))
    )
    assert len(result.bins) == len(with_dvs)
    assert sum(b.rows_dropped for b in result.bins) == dropped
    assert result.metrics["numDeletionVectorsRemoved"] == len(with_dvs)
    assert_no_dvs(table)
    assert canon(read(table)) == canon(before_rows)
    assert_same_rows(table, before_rows)
    # New files go beside their inputs (same partition directory).
    for add in adds:
        assert add["partitionValues"] in [r["partitionValues"] for r in removes]
        directory = Path(unquote(add["path"])).parent
        assert directory in {Path(unquote(r["path"])).parent for r in removes}
    assert old_files <= data_files_on_disk(table), "inputs stay on disk until VACUUM"

    # Idempotent: nothing left to purge, nothing committed.
    again = optimize(table, purge=True)
    assert again.versions == [] and again.bins == []
    assert commit_versions(table)[-1] == last + 1


@pytest.mark.parametrize(
    ("name", "logical_rows"), GOLDEN_DV_TABLES, ids=[n for n, _ in GOLDEN_DV_TABLES]
)
def test_purge_golden_tables(tmp_path: Path, name: str, logical_rows: int) -> None:
    check_purge(copy_golden(name, tmp_path), logical_rows, golden_expected_rows(name))


def test_purge_inline_dv_of_cdf_table(tmp_path: Path) -> None:
    """cdf-table-with-dv at version 5: its one file has an inline DV (no DV file)."""
    table = copy_golden("cdf-table-with-dv", tmp_path)
    (table / "_delta_log" / f"{6:020d}.json").unlink()
    [add] = live_adds(table).values()
    assert add["deletionVector"]["storageType"] == "i"
    deleted = read_dv(table, add["deletionVector"])
    check_purge(table, 10 - len(deleted))


def test_purge_column_mapping_keeps_physical_names_and_field_ids(tmp_path: Path) -> None:
    table = copy_golden("dv-with-columnmapping/delta", tmp_path)
    before = live_adds(table)
    result = optimize(table, purge=True)
    [version] = result.versions
    removes, adds = assert_commit(table, version, "REORG", before)
    metadata = replay_json(table)[0]
    physical = set(physical_columns(metadata))
    assert not physical & {logical for logical, _ in physical_columns(metadata).values()}
    for rm, add in zip(removes, adds, strict=True):
        old = pq.read_schema(table / unquote(rm["path"]))
        new = pq.read_schema(table / unquote(add["path"]))
        assert set(new.names) == physical
        for name in new.names:
            old_field, new_field = old.field(name), new.field(name)
            assert new_field.type == old_field.type, name
            assert (
                new_field.metadata[b"PARQUET:field_id"] == old_field.metadata[b"PARQUET:field_id"]
            )
        # The partition directory keeps its (physical) name.
        assert Path(unquote(add["path"])).parent == Path(unquote(rm["path"])).parent
    # Field ids are those of the table schema.
    schema = json.loads(metadata["schemaString"])
    ids = {
        f["metadata"]["delta.columnMapping.physicalName"]: f["metadata"]["delta.columnMapping.id"]
        for f in schema["fields"]
    }
    for add in adds:
        new = pq.read_schema(table / unquote(add["path"]))
        for name in new.names:
            assert int(new.field(name).metadata[b"PARQUET:field_id"]) == ids[name]


# -- 1b. purge on generated tables -----------------------------------------------------------


@pytest.mark.parametrize(
    ("partitioned", "writer"),
    [(False, None), (True, None), (False, WriterProperties(max_row_group_size=7))],
    ids=["flat", "partitioned", "row-groups"],
)
def test_purge_generated_table(
    tmp_path: Path, partitioned: bool, writer: WriterProperties | None
) -> None:
    table = tmp_path / "t"
    rows = dv_table(table, 4, 30, partitioned=partitioned, writer=writer)
    delete(table, "id % 7 = 3")
    delete(table, "n > 30 OR s = 'zzz'")
    delete(table, "id >= 30 AND id < 60")  # every row of one file: the file is removed
    deleted = {
        r["id"]
        for r in rows
        if r["id"] % 7 == 3
        or (r["n"] is not None and r["n"] > 30)
        or r["s"] == "zzz"
        or 30 <= r["id"] < 60
    }
    expected = survivors(rows, deleted)
    assert_same_rows(table, expected)
    before = live_adds(table)
    assert all(a.get("deletionVector") for a in before.values())
    files = inspect_json(table)["num_files"]

    result = optimize(table, purge=True)

    [version] = result.versions
    removes, adds = assert_commit(table, version, "REORG", before)
    assert len(removes) == len(adds) == files
    assert_no_dvs(table)
    assert_same_rows(table, expected)
    assert inspect_json(table)["logical_rows"] == inspect_json(table)["physical_rows"]
    assert optimize(table, purge=True).versions == []
    assert commit_versions(table)[-1] == version


# -- 2. --min-deleted-ratio ------------------------------------------------------------------


def test_min_deleted_ratio_selects_files_at_or_above(tmp_path: Path) -> None:
    table = tmp_path / "t"
    rows = dv_table(table, 4, 20)
    # Files hold ids 0-19, 20-39, 40-59, 60-79: deleted ratios 1/20, 5/20, 10/20 and 0.
    gone = [0, *range(20, 25), *range(40, 50)]
    delete(table, f"id IN ({', '.join(map(str, gone))})")
    expected = survivors(rows, gone)

    def ratios() -> dict[str, float]:
        out = {}
        for (p, _), add in live_adds(table).items():
            records = json.loads(add["stats"])["numRecords"]
            dv = add.get("deletionVector")
            out[p] = len(read_dv(table, dv)) / records if dv else 0.0
        return out

    start = ratios()
    assert sorted(start.values()) == [0.0, 0.05, 0.25, 0.5]
    before = live_adds(table)

    result = optimize(table, purge=True, min_deleted_ratio=0.25)

    [version] = result.versions
    removes, _ = assert_commit(table, version, "REORG", before)
    assert sorted(start[unquote(r["path"])] for r in removes) == [0.25, 0.5]
    assert sorted(b.rows_dropped for b in result.bins) == [5, 10]
    after = live_adds(table)
    kept_dv = [(p, a["deletionVector"]) for (p, _), a in after.items() if a.get("deletionVector")]
    [(path, dv)] = kept_dv
    assert start[path] == 0.05
    assert read_dv(table, dv) == {0}
    assert inspect_json(table)["files_with_dvs"] == 1
    assert_same_rows(table, expected)

    # Above every ratio left: nothing to do.
    assert optimize(table, purge=True, min_deleted_ratio=0.06).versions == []
    # 0 selects every file with a DV.
    result = optimize(table, purge=True, min_deleted_ratio=0.0)
    assert len(result.versions) == 1 and len(result.bins) == 1
    assert_no_dvs(table)
    assert_same_rows(table, expected)


# -- 4. compaction ---------------------------------------------------------------------------


def small_files_table(
    path: Path,
    appends: int = 10,
    rows_per_append: int = 6,
    configuration: dict[str, str] | None = None,
) -> list[Row]:
    """`appends` commits, each one small file in partition a and one in partition b."""
    rows: list[Row] = []
    for k in range(appends):
        chunk = make_rows(range(k * rows_per_append, (k + 1) * rows_per_append), seed=100 + k)
        append(path, chunk, partitioned=True, configuration=configuration if k == 0 else None)
        rows += chunk
    return rows


def files_per_partition(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for add in live_adds(path).values():
        part = add["partitionValues"]["part"]
        out[part] = out.get(part, 0) + 1
    return out


def test_compaction_packs_small_files_per_partition(tmp_path: Path) -> None:
    table = tmp_path / "t"
    rows = small_files_table(table)
    assert files_per_partition(table) == {"a": 10, "b": 10}
    before = live_adds(table)
    last = commit_versions(table)[-1]

    result = optimize(table)

    assert result.operation == "OPTIMIZE"
    assert result.versions == [last + 1]
    removes, adds = assert_commit(table, last + 1, "OPTIMIZE", before)
    assert len(removes) == 20 and len(adds) == 2
    assert files_per_partition(table) == {"a": 1, "b": 1}
    for add in adds:
        part = add["partitionValues"]["part"]
        assert Path(unquote(add["path"])).parent.name == f"part={part}"
        assert json.loads(add["stats"])["numRecords"] == sum(1 for r in rows if r["part"] == part)
    assert sorted(len(b.inputs) for b in result.bins) == [10, 10]
    assert all(b.rows_dropped == 0 for b in result.bins)
    assert_same_rows(table, rows)
    # Nothing left to compact: one file per partition.
    assert optimize(table).versions == []
    assert commit_versions(table)[-1] == last + 1


def _into_prefix_directories(table: Path) -> None:
    """Move every data file into a directory of its own (`d0/`, `d1/`, ... under its
    partition directory) and rewrite the log's paths to match: the layout of Delta Spark's
    column-mapping tables (random file prefixes), where files of one partition never share a
    directory."""
    moves: dict[str, str] = {}
    for log_file in sorted((table / "_delta_log").glob("*.json")):
        lines = []
        for line in log_file.read_text().splitlines():
            action = json.loads(line)
            for kind in ("add", "remove"):
                if kind in action:
                    old = unquote(action[kind]["path"])
                    if old not in moves:
                        moves[old] = str(Path(old).parent / f"d{len(moves)}" / Path(old).name)
                        (table / moves[old]).parent.mkdir(parents=True)
                        (table / old).rename(table / moves[old])
                    action[kind]["path"] = moves[old]
            lines.append(json.dumps(action))
        log_file.write_text("\n".join(lines) + "\n")


def test_compaction_packs_files_of_a_partition_across_directories(tmp_path: Path) -> None:
    """Bins are per partition, not per directory: Delta Spark writes the files of
    column-mapping tables under random prefix directories, one partition's files spread over
    many; compaction still packs each partition into one file, as Delta's OPTIMIZE does."""
    table = tmp_path / "t"
    rows = small_files_table(table, appends=4)
    _into_prefix_directories(table)
    assert_same_rows(table, rows)

    result = optimize(table)

    assert sorted(len(b.inputs) for b in result.bins) == [4, 4]
    assert files_per_partition(table) == {"a": 1, "b": 1}
    assert_same_rows(table, rows)


def test_compaction_target_size_controls_bins(tmp_path: Path) -> None:
    table = tmp_path / "t"
    rows = small_files_table(table)
    sizes = [a["size"] for a in live_adds(table).values()]
    # Files are nearly equal in size: two fit under the target, three do not.
    target = int(max(sizes) * 2.5)
    assert 3 * min(sizes) > target >= 2 * max(sizes)
    before = live_adds(table)

    result = optimize(table, target_size=target)

    [version] = result.versions
    _, adds = assert_commit(table, version, "OPTIMIZE", before)
    assert len(result.bins) == len(adds) == 10
    assert all(len(b.inputs) == 2 and b.input_bytes <= target for b in result.bins)
    assert files_per_partition(table) == {"a": 5, "b": 5}
    assert_same_rows(table, rows)

    # A target below every file size: no file is small, none has a DV, nothing to do.
    assert optimize(table, target_size=min(a["size"] for a in adds) - 1).versions == []

    # delta.targetFileSize is the default target.
    configured = tmp_path / "configured"
    small_files_table(configured, configuration={"delta.targetFileSize": str(target)})
    sizes = [a["size"] for a in live_adds(configured).values()]
    assert 3 * min(sizes) > target >= 2 * max(sizes)
    result = optimize(configured)
    assert len(result.bins) == 10
    assert files_per_partition(configured) == {"a": 5, "b": 5}


@pytest.mark.parametrize("spelling", ["{kib}kb", "{kib}KiB", "{kib}k", "{bytes}"])
def test_target_file_size_property_with_units(tmp_path: Path, spelling: str) -> None:
    """delta.targetFileSize as Databricks documents it ("128mb"): the same bins as the same
    size given in bytes to --target-size."""
    reference = tmp_path / "reference"
    small_files_table(reference)
    kib = max(a["size"] for a in live_adds(reference).values()) * 5 // 2 // 1024 + 1
    configured = tmp_path / "configured"
    text = spelling.format(kib=kib, bytes=kib * 1024)
    small_files_table(configured, configuration={"delta.targetFileSize": text})
    by_property = optimize(configured, dry_run=True)
    by_option = optimize(reference, target_size=kib * 1024, dry_run=True)
    assert [len(b.inputs) for b in by_property.bins] == [len(b.inputs) for b in by_option.bins]
    assert by_property.bins


def test_target_file_size_property_that_is_no_size_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "t"
    small_files_table(table, configuration={"delta.targetFileSize": "big"})
    hashes = tree_hashes(table)
    result = run_cli("optimize", table)
    assert result.exit_code == 2 and "delta.targetFileSize" in result.output
    assert tree_hashes(table) == hashes


def test_compaction_picks_files_with_more_than_5_percent_deleted(tmp_path: Path) -> None:
    table = tmp_path / "t"
    rows = dv_table(table, 3, 40)
    # ids 0-39: 2 deleted (5%, not more); 40-79: 3 deleted (7.5%); 80-119: none.
    gone = [0, 1, 40, 41, 42]
    delete(table, f"id IN ({', '.join(map(str, gone))})")
    expected = survivors(rows, gone)
    before = live_adds(table)
    by_first_id = {
        json.loads(a["stats"])["minValues"]["id"]: (p, a) for (p, _), a in before.items()
    }

    # Every file is above a 1-byte target: only the deleted ratio can pick a file.
    result = optimize(table, target_size=1)

    [version] = result.versions
    [removed], [_] = assert_commit(table, version, "OPTIMIZE", before)
    assert unquote(removed["path"]) == by_first_id[40][0]
    assert [(b.inputs, b.rows_dropped) for b in result.bins] == [([removed["path"]], 3)]
    after = live_adds(table)
    assert (by_first_id[0][0], dv_key(by_first_id[0][1]["deletionVector"])) in after
    assert inspect_json(table)["files_with_dvs"] == 1
    assert_same_rows(table, expected)


def test_compaction_bins_files_with_dvs_with_small_files(tmp_path: Path) -> None:
    table = tmp_path / "t"
    rows = small_files_table(table, appends=4)
    assert run_enable(open_log(str(table))).changed
    delete(table, "id % 5 = 0")
    expected = [r for r in rows if r["id"] % 5]
    before = live_adds(table)

    result = optimize(table)

    [version] = result.versions
    removes, adds = assert_commit(table, version, "OPTIMIZE", before)
    assert len(removes) == 8 and len(adds) == 2
    assert_no_dvs(table)
    assert_same_rows(table, expected)


def test_compaction_where_restricts_to_partition(tmp_path: Path) -> None:
    table = tmp_path / "t"
    rows = small_files_table(table, appends=5)
    before = live_adds(table)
    b_files = {k for k, a in before.items() if a["partitionValues"]["part"] == "b"}

    result = optimize(table, where="part = 'a'")

    [version] = result.versions
    removes, adds = assert_commit(table, version, "OPTIMIZE", before, predicate=["part = 'a'"])
    assert {r["partitionValues"]["part"] for r in removes} == {"a"}
    assert [a["partitionValues"] for a in adds] == [{"part": "a"}]
    assert files_per_partition(table) == {"a": 1, "b": 5}
    assert b_files <= set(live_adds(table))
    assert_same_rows(table, rows)


def test_compaction_where_on_data_column_is_a_usage_error(tmp_path: Path) -> None:
    table = tmp_path / "t"
    small_files_table(table, appends=2)
    hashes = tree_hashes(table)
    with pytest.raises(UsageError) as err:
        optimize(table, where="id > 3")
    assert "part" in str(err.value)
    result = run_cli("optimize", table, "--where", "id > 3 AND part = 'a'", "--engine", "arrow")
    assert result.exit_code == 2, result.output
    assert "partition" in result.output.lower() and "part" in result.output
    assert tree_hashes(table) == hashes


# -- 6. batches and dry runs -----------------------------------------------------------------


def five_dv_files(path: Path, configuration: dict[str, str] | None = None) -> list[Row]:
    rows = dv_table(path, 5, 12, configuration=configuration)
    delete(path, "id % 4 = 1")
    return [r for r in rows if r["id"] % 4 != 1]


@pytest.mark.parametrize("checkpoint_interval", [None, "2"])
def test_batch_size_commits_each_batch_as_a_valid_state(
    tmp_path: Path, checkpoint_interval: str | None
) -> None:
    table = tmp_path / "t"
    config = {"delta.checkpointInterval": checkpoint_interval} if checkpoint_interval else None
    expected = five_dv_files(table, config)
    last = commit_versions(table)[-1]

    result = optimize(table, purge=True, batch_size=2)

    assert result.versions == [last + 1, last + 2, last + 3]
    assert len(result.bins) == 5
    assert commit_versions(table)[-1] == last + 3
    removed_so_far = 0
    for version, batch in zip(result.versions, [2, 2, 1], strict=True):
        # The state before this commit, to check its removes against.
        removes, adds = assert_commit(table, version, "REORG", _live_at(table, version - 1))
        assert len(removes) == len(adds) == batch
        assert commit_actions(table, version)[0]["commitInfo"]["readVersion"] == last
        removed_so_far += batch
        # Each version is a valid table: same rows, fewer DVs.
        assert_same_rows(table, expected, version=version)
        with_dvs = [a for a in _live_at(table, version).values() if a.get("deletionVector")]
        assert len(with_dvs) == 5 - removed_so_far
    assert_no_dvs(table)
    assert_same_rows(table, expected)
    assert result.metrics["numRemovedFiles"] == 5 and result.metrics["numAddedFiles"] == 5
    if checkpoint_interval:
        assert any((table / "_delta_log").glob("*.checkpoint.parquet"))


def _live_at(path: Path, version: int) -> Live:
    """Live adds at `version` by JSON replay (commits 0..version)."""
    live: Live = {}
    for v in commit_versions(path):
        if v > version:
            break
        for action in commit_actions(path, v):
            if "add" in action:
                add = action["add"]
                live[(unquote(add["path"]), dv_key(add.get("deletionVector")))] = add
            elif "remove" in action:
                rm = action["remove"]
                live.pop((unquote(rm["path"]), dv_key(rm.get("deletionVector"))), None)
    return live


@pytest.mark.parametrize("purge", [True, False], ids=["purge", "compaction"])
def test_dry_run_writes_nothing_and_lists_the_plan(tmp_path: Path, purge: bool) -> None:
    table = tmp_path / "t"
    five_dv_files(table)
    before = live_adds(table)
    hashes = tree_hashes(table)
    args = ["optimize", table, "--dry-run", "--json", "--engine", "arrow"]
    result = run_cli(*args, *(["--purge"] if purge else []))
    assert result.exit_code == 0, result.output
    assert tree_hashes(table) == hashes
    doc = json.loads(result.stdout)
    assert doc["dry_run"] is True
    assert doc["versions"] == []
    assert doc["operation"] == ("REORG" if purge else "OPTIMIZE")
    assert doc["read_version"] == commit_versions(table)[-1]
    by_path = {p: a for (p, _), a in before.items()}
    if purge:
        assert len(doc["bins"]) == 5
        assert all(len(b["inputs"]) == 1 for b in doc["bins"])
    else:
        assert len(doc["bins"]) == 1  # five small files of one directory
    inputs = [p for b in doc["bins"] for p in b["inputs"]]
    assert sorted(unquote(p) for p in inputs) == sorted(by_path)
    for b in doc["bins"]:
        adds = [by_path[unquote(p)] for p in b["inputs"]]
        assert b["input_bytes"] == sum(a["size"] for a in adds)
        assert b["input_rows"] == sum(json.loads(a["stats"])["numRecords"] for a in adds)
        assert b["rows_dropped"] == sum(a["deletionVector"]["cardinality"] for a in adds)
        assert b["directory"] == ""
    # The text rendering of a dry run writes nothing either.
    text = run_cli(*args[:-3], *(["--purge"] if purge else []))
    assert text.exit_code == 0, text.output
    assert "dry run" in text.output
    assert tree_hashes(table) == hashes


# -- 7. the command line ---------------------------------------------------------------------


def test_cli_purge_then_nothing_to_do(tmp_path: Path) -> None:
    table = tmp_path / "t"
    expected = five_dv_files(table)
    last = commit_versions(table)[-1]
    result = run_cli("optimize", table, "--purge", "--engine", "arrow", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["versions"] == [last + 1]
    assert doc["engine"] == "arrow"
    assert doc["metrics"]["numRemovedFiles"] == 5
    assert doc["metrics"]["numDeletionVectorsRemoved"] == 5
    assert_no_dvs(table)
    assert_same_rows(table, expected)

    again = run_cli("optimize", table, "--purge", "--engine", "arrow")
    assert again.exit_code == 0, again.output
    assert "nothing to purge" in again.output
    assert commit_versions(table)[-1] == last + 1

    compacted = run_cli("optimize", table, "--engine", "arrow", "--target-size", "1")
    assert compacted.exit_code == 0, compacted.output
    assert f"nothing to compact at version {last + 1}" in compacted.output
    assert commit_versions(table)[-1] == last + 1


def test_cli_purge_text_output(tmp_path: Path) -> None:
    table = tmp_path / "t"
    five_dv_files(table)
    last = commit_versions(table)[-1]
    result = run_cli("optimize", table, "--purge", "--engine", "arrow", "--batch-size", "3")
    assert result.exit_code == 0, result.output
    assert f"{last + 1}, {last + 2}" in result.output
    assert "5 DVs removed" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["--purge", "--min-deleted-ratio", "-1"],
        ["--purge", "--min-deleted-ratio", "2"],
        ["--purge", "--min-deleted-ratio", "nan"],
        ["--min-deleted-ratio", "0.5"],
        ["--target-size", "0"],
        ["--purge", "--batch-size", "0"],
        ["--purge", "--engine", "duckdb"],
    ],
    ids=[
        "ratio-negative",
        "ratio-above-1",
        "ratio-nan",
        "ratio-without-purge",
        "target-0",
        "batch-0",
        "engine",
    ],
)
def test_cli_bad_arguments_exit_2_and_write_nothing(tmp_path: Path, args: list[str]) -> None:
    table = tmp_path / "t"
    five_dv_files(table)
    hashes = tree_hashes(table)
    result = run_cli("optimize", table, *args)
    assert result.exit_code == 2, result.output
    assert tree_hashes(table) == hashes
    option = next(a for a in args if a.startswith("--") and a != "--purge")
    assert option in result.output or option.lstrip("-") in result.output


def test_min_deleted_ratio_messages(tmp_path: Path) -> None:
    table = tmp_path / "t"
    five_dv_files(table)
    bad = run_cli("optimize", table, "--purge", "--min-deleted-ratio", "2")
    assert "between 0 and 1" in bad.output
    alone = run_cli("optimize", table, "--min-deleted-ratio", "0.5")
    assert "--purge" in alone.output


def test_cli_purge_of_a_table_without_dvs_commits_nothing(tmp_path: Path) -> None:
    """A plain table (no DVs enabled) has nothing to purge: exit 0, nothing committed."""
    table = copy_golden("table-without-dv-small", tmp_path)
    hashes = tree_hashes(table)
    result = run_cli("optimize", table, "--purge", "--engine", "arrow")
    assert result.exit_code == 0, result.output
    assert "nothing to purge" in result.output
    assert tree_hashes(table) == hashes


def test_failed_rewrite_leaves_no_files_behind(tmp_path: Path) -> None:
    """One input of five is not parquet: the command fails (exit 6, integrity), commits
    nothing, and the files already written for the other bins are deleted."""
    table = tmp_path / "t"
    five_dv_files(table)
    paths = sorted(table / p for p, _ in live_adds(table))
    paths[2].write_bytes(b"PAR1 not a parquet file PAR1")
    hashes = tree_hashes(table)

    result = run_cli("optimize", table, "--purge", "--engine", "arrow")

    assert result.exit_code == 6, result.output
    assert "Traceback" not in result.output
    assert paths[2].name in result.output
    assert tree_hashes(table) == hashes


def test_null_partition_is_compacted_and_purged_in_place(tmp_path: Path) -> None:
    table = tmp_path / "t"
    rows: list[Row] = []
    for k in range(4):
        chunk = make_rows(range(k * 10, (k + 1) * 10), seed=k, parts=("a", None))
        append(table, chunk, partitioned=True)
        rows += chunk
    assert run_enable(open_log(str(table))).changed
    delete(table, "id % 3 = 0")
    expected = [r for r in rows if r["id"] % 3]
    before = live_adds(table)

    result = optimize(table)

    [version] = result.versions
    _, adds = assert_commit(table, version, "OPTIMIZE", before)
    assert sorted(str(a["partitionValues"]["part"]) for a in adds) == ["None", "a"]
    for add in adds:
        directory = Path(unquote(add["path"])).parent.name
        value = add["partitionValues"]["part"]
        assert directory == f"part={value if value is not None else '__HIVE_DEFAULT_PARTITION__'}"
    assert_no_dvs(table)
    assert_same_rows(table, expected)
    # Purge after a new delete, in the NULL partition only.
    delete(table, "part IS NULL AND id > 30")
    expected = [r for r in expected if not (r["part"] is None and r["id"] > 30)]
    before = live_adds(table)
    [version] = optimize(table, purge=True).versions
    [removed], [added] = assert_commit(table, version, "REORG", before)
    assert removed["partitionValues"] == added["partitionValues"] == {"part": None}
    assert_no_dvs(table)
    assert_same_rows(table, expected)


def test_compaction_where_on_column_mapping_table(tmp_path: Path) -> None:
    """Partition values are keyed by physical names; --where uses the logical name."""
    table = copy_golden("dv-with-columnmapping/delta", tmp_path)
    expected = deltalake_rows(table)
    before = live_adds(table)
    metadata = replay_json(table)[0]
    [part_field] = [
        f for f in json.loads(metadata["schemaString"])["fields"] if f["name"] == "part"
    ]
    physical = part_field["metadata"]["delta.columnMapping.physicalName"]
    in_part = {k for k, a in before.items() if a["partitionValues"][physical] == "5"}
    assert len(in_part) >= 2

    result = optimize(table, where="part = 5")

    [version] = result.versions
    removes, adds = assert_commit(table, version, "OPTIMIZE", before, predicate=["part = 5"])
    assert {(unquote(r["path"]), dv_key(r.get("deletionVector"))) for r in removes} == in_part
    assert [a["partitionValues"] for a in adds] == [{physical: "5"}]
    assert set(before) - in_part <= set(live_adds(table))
    assert_same_rows(table, expected)


def _strip_stats(table: Path) -> None:
    """Remove `stats` from every add and remove in the JSON commits (as old writers did)."""
    for version in commit_versions(table):
        actions = commit_actions(table, version)
        for action in actions:
            for kind in ("add", "remove"):
                if kind in action:
                    action[kind].pop("stats", None)
        text = "\n".join(json.dumps(a) for a in actions) + "\n"
        (table / "_delta_log" / f"{version:020d}.json").write_text(text)


def test_purge_files_without_stats_counts_rows_from_footers(tmp_path: Path) -> None:
    table = tmp_path / "t"
    rows = dv_table(table, 3, 20)
    delete(table, "id % 4 = 0 OR id = 41")  # ratios 5/20, 5/20, 6/20
    expected = [r for r in rows if r["id"] % 4 and r["id"] != 41]
    _strip_stats(table)
    before = live_adds(table)
    assert all("stats" not in a for a in before.values())

    plan = optimize(table, purge=True, min_deleted_ratio=0.3, dry_run=True)
    assert [(b.input_rows, b.rows_dropped) for b in plan.bins] == [(20, 6)]

    result = optimize(table, purge=True, min_deleted_ratio=0.25)

    assert sorted((b.input_rows, b.rows_dropped) for b in result.bins) == [
        (20, 5),
        (20, 5),
        (20, 6),
    ]
    [version] = result.versions
    assert_commit(table, version, "REORG", before)
    assert_no_dvs(table)
    assert_same_rows(table, expected)


def test_partition_values_with_special_characters(tmp_path: Path) -> None:
    """Directories are escaped on disk and escaped again in the log (`part=a%2520b`): new
    files go to the same directories, with the same partition values."""
    table = tmp_path / "t"
    parts = ("a b", "x%y=z", "ü/é:#?")
    rows: list[Row] = []
    for k in range(3):
        chunk = make_rows(range(k * 12, (k + 1) * 12), seed=k, parts=parts)
        append(table, chunk, partitioned=True)
        rows += chunk
    assert run_enable(open_log(str(table))).changed
    delete(table, "id % 4 = 0")
    expected = [r for r in rows if r["id"] % 4]
    # polars applies no DV when paths need escaping: deltalake and the raw reader only.
    assert_same_rows(table, expected, polars=False)
    directories = {p.parent for p in data_files_on_disk(table)}
    before = live_adds(table)

    [version] = optimize(table, purge=True).versions

    removes, adds = assert_commit(table, version, "REORG", before)
    for add in adds:
        source = next(r for r in removes if r["partitionValues"] == add["partitionValues"])
        assert Path(unquote(add["path"])).parent == Path(unquote(source["path"])).parent
    assert {p.parent for p in data_files_on_disk(table)} == directories
    assert_no_dvs(table)
    assert_same_rows(table, expected)  # no DVs left: polars reads it too

    before = live_adds(table)
    [version] = optimize(table, where="part = 'x%y=z'").versions
    removes, adds = assert_commit(table, version, "OPTIMIZE", before, predicate=["part = 'x%y=z'"])
    assert [a["partitionValues"] for a in adds] == [{"part": "x%y=z"}]
    assert {r["partitionValues"]["part"] for r in removes} == {"x%y=z"}
    assert files_per_partition(table) == {"a b": 3, "x%y=z": 1, "ü/é:#?": 3}
    assert {p.parent for p in data_files_on_disk(table)} == directories
    assert_same_rows(table, expected)


def test_purge_where_restricts_to_partition(tmp_path: Path) -> None:
    table = tmp_path / "t"
    rows = dv_table(table, 2, 20, partitioned=True)
    delete(table, "id % 5 = 1")
    expected = [r for r in rows if r["id"] % 5 != 1]
    before = live_adds(table)
    b_files = {k for k, a in before.items() if a["partitionValues"]["part"] == "b"}
    assert all(a.get("deletionVector") for a in before.values())

    result = optimize(table, purge=True, where="part = 'a'")

    [version] = result.versions
    removes, _ = assert_commit(table, version, "REORG", before, predicate=["part = 'a'"])
    assert len(removes) == 2 and {r["partitionValues"]["part"] for r in removes} == {"a"}
    assert b_files <= set(live_adds(table))
    assert inspect_json(table)["files_with_dvs"] == len(b_files)
    assert_same_rows(table, expected)


def test_purge_across_batch_boundaries_of_a_large_file(tmp_path: Path) -> None:
    """One file of 150,000 rows is read in several batches of one row group: deleted rows on
    both sides of each batch boundary must be dropped, and no other row."""
    table = tmp_path / "t"
    n = 150_000
    data = pa.table({"id": pa.array(range(n), pa.int64()), "v": pa.array(range(n), pa.int32())})
    write_deltalake(str(table), data)
    assert run_enable(open_log(str(table))).changed
    edges = [0, 65_535, 65_536, 65_537, 131_071, 131_072, n - 1]
    delete(table, f"id % 997 = 5 OR id IN ({', '.join(map(str, edges))})")
    gone = {i for i in range(n) if i % 997 == 5} | set(edges)
    [(path, dv)] = [(p, a["deletionVector"]) for (p, _), a in live_adds(table).items()]
    assert read_dv(table, dv) == gone

    [version] = optimize(table, purge=True).versions

    actions = commit_actions(table, version)
    [removed] = [a["remove"] for a in actions if "remove" in a]
    [added] = [a["add"] for a in actions if "add" in a]
    assert unquote(removed["path"]) == path and removed["deletionVector"] == dv
    stats = json.loads(added["stats"])
    assert stats["numRecords"] == n - len(gone) and stats["tightBounds"] is True
    assert (stats["minValues"]["id"], stats["maxValues"]["id"]) == (1, n - 2)
    new = pq.read_table(table / unquote(added["path"]))
    assert new["id"].to_pylist() == [i for i in range(n) if i not in gone], "order kept"
    assert new["v"].to_pylist() == new["id"].to_pylist()
    assert_no_dvs(table)
    assert sorted(pl.read_delta(str(table))["id"].to_list()) == new["id"].to_pylist()
