"""`dvtool inspect` on the Iceberg tables Iceberg Spark wrote (tests/reference/iceberg_tables.py):
every figure equals what independent readers say.

- rows: the fixture's expected rows (computed from what each step intends), pyiceberg's
  scan of the table, and per data file pyiceberg's scan of that file alone (record count
  minus rows read: the rows its deletes delete); for equality deletes, which pyiceberg
  cannot apply, the data file's rows whose id the fixture's equality delete names;
- files and delete files: pyiceberg's planning (data files, sizes, record counts) and
  Iceberg Java's own metadata tables through Spark (`delete_files` with the v3 DV fields,
  `position_deletes` for which delete file holds rows of which data file);
- Puffin bytes no live DV uses: the Puffin footers parsed here by hand (struct and JSON)
  minus the blobs the live DVs name (Spark's `delete_files`);
- time travel: each snapshot by id and by time against pyiceberg's scan of that snapshot
  and its snapshot-as-of-time; a catalog open through a pyiceberg SQL catalog (sqlite)
  that registers a fixture's metadata.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.table import StaticTable

from tests.cli_helpers import all_output, run
from tests.engines.jvm_engines import JvmSession
from tests.iceberg_oracles import counts, duckdb_arrow, live_row_count
from tests.reference.iceberg_catalogs import CatalogTable
from tests.reference.iceberg_tables import HISTORY_SPECS, SPECS, build_table
from tests.s3_server import S3Server

NAMES = [spec.name for spec in SPECS]
EQUALITY_IDS = {spec.name: set(spec.equality_delete_ids) for spec in SPECS}


def _json(*args: str | Path, code: int = 0) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == code, all_output(result)
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _data_files(static: StaticTable, snapshot_id: int | None = None) -> list[dict[str, Any]]:
    """The live data files as pyiceberg's `inspect.data_files` lists them."""
    files = static.inspect.data_files(snapshot_id)
    rows: list[dict[str, Any]] = files.select(
        ["file_path", "record_count", "file_size_in_bytes"]
    ).to_pylist()
    return rows


def _deleted_per_file(
    name: str, static: StaticTable, snapshot_id: int | None = None
) -> dict[str, int]:
    """Rows each live data file's deletes delete: pyiceberg's scan of the file alone, or
    for equality deletes (pyiceberg plans none) the file's rows whose id the fixture
    deletes."""
    if EQUALITY_IDS[name]:
        ids = pa.array(sorted(EQUALITY_IDS[name]), pa.int64())
        return {
            f["file_path"]: int(pc.sum(pc.is_in(pq.read_table(f["file_path"])["id"], ids)).as_py())
            for f in _data_files(static, snapshot_id)
        }
    metadata = static.metadata
    scan = ArrowScan(metadata, static.io, metadata.schema(), static.scan().row_filter)
    tasks = static.scan(snapshot_id=snapshot_id).plan_files()
    return {t.file.file_path: t.file.record_count - scan.to_table([t]).num_rows for t in tasks}


def _spark_delete_files(session: JvmSession, table: str) -> list[dict[str, Any]]:
    return session.rows(
        f"SELECT content, file_path, file_format, content_offset, content_size_in_bytes "
        f"FROM {table}.delete_files"
    )


def _puffin_blobs(path: str) -> list[tuple[int, int]]:
    """(offset, length) of the blobs of a Puffin file, read by hand (puffin-spec.md)."""
    data = Path(path.removeprefix("file:")).read_bytes()
    (payload_size,) = struct.unpack_from("<i", data, len(data) - 12)
    payload = data[len(data) - 12 - payload_size : len(data) - 12]
    return [(b["offset"], b["length"]) for b in json.loads(payload)["blobs"]]


@pytest.mark.parametrize("name", NAMES)
def test_inspect_figures_equal_the_oracles(
    name: str, iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    entry = iceberg_tables[name]
    static = StaticTable.from_metadata(entry["metadata"])
    doc = _json("inspect", entry["location"], "--count-rows", "--files")
    files = _data_files(static)
    per_file = _deleted_per_file(name, static)
    physical = sum(f["record_count"] for f in files)

    assert (doc["format"], doc["format_version"]) == ("iceberg", entry["format_version"])
    assert doc["num_files"] == len(files)
    assert doc["size_bytes"] == sum(f["file_size_in_bytes"] for f in files)
    assert doc["physical_rows"] == physical
    assert doc["logical_rows"] == len(entry["expected"]) == physical - sum(per_file.values())
    assert doc["deleted_rows"] == sum(per_file.values()) and doc["row_counts_exact"]
    assert {f["path"]: f["deleted_rows"] for f in doc["files"]} == per_file
    if not EQUALITY_IDS[name]:
        assert doc["logical_rows"] == static.scan().to_arrow().num_rows

    spark_deletes = _spark_delete_files(iceberg_spark, entry["table"])
    kinds = Counter(
        "equality"
        if d["content"] == 2
        else "deletion_vectors"
        if d["file_format"] == "PUFFIN"
        else "position"
        for d in spark_deletes
    )
    assert doc["delete_files"] == {
        k: kinds[k] for k in ("position", "equality", "deletion_vectors")
    }
    assert doc["dangling_deletes"] == 0
    _check_deletes_per_file(doc, iceberg_spark, entry["table"], name, len(files))
    _check_puffin(doc, spark_deletes)
    _check_histogram(doc, per_file)


def _check_deletes_per_file(
    doc: dict[str, Any], session: JvmSession, table: str, name: str, files: int
) -> None:
    """Iceberg Spark writes file-scoped position deletes and DVs: the delete files that apply
    to a data file are those holding rows for it (Iceberg Java's `position_deletes`); an
    equality delete applies to every older data file of the (unpartitioned) table."""
    if EQUALITY_IDS[name]:
        assert doc["files_with_dvs"] == doc["files_with_equality_deletes"] == files
        assert doc["delete_files_per_data_file"]["max"] == 1
        return
    rows = session.rows(
        f"SELECT file_path, count(DISTINCT delete_file_path) AS n FROM {table}.position_deletes "
        "GROUP BY file_path"
    )
    per_file = Counter(r["n"] for r in rows)
    per_file[0] = files - len(rows)
    assert doc["files_with_dvs"] == len(rows)
    expected = [
        {"delete_files": k, "data_files": per_file[k]} for k in sorted(per_file) if per_file[k]
    ]
    assert doc["delete_files_per_data_file"] == {"max": max(per_file), "distribution": expected}


def _check_puffin(doc: dict[str, Any], spark_deletes: list[dict[str, Any]]) -> None:
    dvs = [d for d in spark_deletes if d["file_format"] == "PUFFIN"]
    paths = {d["file_path"] for d in dvs}
    used = {(d["file_path"], d["content_offset"]) for d in dvs}
    unused = sum(
        length for p in paths for offset, length in _puffin_blobs(p) if (p, offset) not in used
    )
    assert doc["puffin"]["files"] == len(paths)
    assert doc["puffin"]["unused_bytes"] == unused


def _check_histogram(doc: dict[str, Any], per_file: dict[str, int]) -> None:
    buckets = [0] * 10
    for f in doc["files"]:
        if f["deletes"]:
            buckets[min(per_file[f["path"]] * 10 // f["num_records"], 9)] += 1
    without = sum(1 for f in doc["files"] if not f["deletes"])
    assert [b["files"] for b in doc["deleted_ratio_histogram"]] == [without, *buckets]


def test_equality_deletes_without_count_rows_are_a_lower_bound(
    iceberg_tables: dict[str, Any],
) -> None:
    entry = iceberg_tables["v2_equality"]
    doc = _json("inspect", entry["location"])
    assert doc["row_counts_exact"] is False
    assert doc["deleted_rows"] == 0 and doc["logical_rows"] == doc["physical_rows"]
    assert doc["equality_delete_rows"] == len(EQUALITY_IDS["v2_equality"])
    refused = run("inspect", entry["location"], "--check", "max-deleted-rows=0")
    assert refused.exit_code == 2 and "--count-rows" in refused.stderr
    failing = _json(
        "inspect", entry["location"], "--count-rows", "--check", "max-deleted-rows=0", code=3
    )
    assert failing["checks"][0]["actual"] == len(EQUALITY_IDS["v2_equality"])


@pytest.mark.parametrize("name", ["v2_part", "v3_flat"])
def test_time_travel_equals_pyiceberg(name: str, iceberg_tables: dict[str, Any]) -> None:
    entry = iceberg_tables[name]
    static = StaticTable.from_metadata(entry["metadata"])
    for snapshot in static.snapshots():
        doc = _json("inspect", entry["location"], "--version", str(snapshot.snapshot_id))
        per_file = _deleted_per_file(name, static, snapshot.snapshot_id)
        assert (
            doc["logical_rows"] == static.scan(snapshot_id=snapshot.snapshot_id).to_arrow().num_rows
        )
        assert doc["deleted_rows"] == sum(per_file.values())
        when = dt.datetime.fromtimestamp(snapshot.timestamp_ms / 1000, dt.timezone.utc)
        at = _json("inspect", entry["location"], "--timestamp", when.isoformat())
        oracle = static.snapshot_as_of_timestamp(snapshot.timestamp_ms)
        assert oracle is not None and at["snapshot_id"] == oracle.snapshot_id


def test_a_fixture_registered_in_a_sql_catalog(
    iceberg_tables: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyiceberg.catalog
    from pyiceberg.utils.config import Config

    entry = iceberg_tables["v3_part"]
    catalog = SqlCatalog("fx", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("db")
    catalog.register_table("db.v3_part", entry["metadata"])
    monkeypatch.setenv("PYICEBERG_CATALOG__FX__URI", f"sqlite:///{tmp_path}/c.db")
    monkeypatch.setattr(pyiceberg.catalog, "_ENV_CONFIG", Config())
    by_catalog = _json("inspect", "--catalog", "fx", "db.v3_part")
    by_path = _json("inspect", entry["metadata"])
    assert by_catalog["name"] == "db.v3_part"
    assert {**by_catalog, "name": None, "metadata_location": entry["metadata"]} == by_path


def test_dangling_deletes_after_compaction(iceberg_spark: JvmSession) -> None:
    """Iceberg Java's `rewrite_data_files` rewrites every data file with its deletes applied
    and leaves the position delete files live (`remove-dangling-deletes` is off by
    default): they now name no live data file. (On a v3 table it drops the DVs of the
    files it rewrites.) The oracle is Iceberg Java's metadata tables: the live data files,
    and the data files each delete file names."""
    spec = next(s for s in SPECS if s.name == "v2_flat")
    entry = build_table(iceberg_spark, spec, db="dangling")
    table = entry["table"]
    iceberg_spark.sql(
        f"CALL local.system.rewrite_data_files(table => '{table.split('.', 1)[1]}', "
        "options => map('rewrite-all', 'true'))"
    )
    live = {r["file_path"] for r in iceberg_spark.rows(f"SELECT file_path FROM {table}.data_files")}
    named = iceberg_spark.rows(
        f"SELECT DISTINCT delete_file_path AS d, file_path AS f FROM {table}.position_deletes"
    )
    targets: dict[str, set[str]] = {}
    for r in named:
        targets.setdefault(r["d"], set()).add(r["f"])
    dangling = [d for d, files in targets.items() if not files & live]
    assert dangling  # the compaction left some

    doc = _json("inspect", entry["location"], "--check", "max-dangling-deletes=0", code=3)
    assert doc["dangling_deletes"] == len(dangling) == len(targets)
    assert doc["deleted_rows"] == 0 and doc["files_with_dvs"] == 0
    assert doc["logical_rows"] == len(entry["expected"])
    assert doc["checks"][0]["actual"] == len(dangling)


@pytest.mark.parametrize("name", [spec.name for spec in HISTORY_SPECS])
def test_a_table_s_later_life_equals_duckdb(name: str, iceberg_tables: dict[str, Any]) -> None:
    """Evolved partition specs, compaction with expiry, Flink's upserts (equality deletes on
    the key and position deletes or DVs in the same commit): `inspect --count-rows` counts
    the rows DuckDB's iceberg extension reads (it applies every delete kind) and the fixture
    intends, and the files of the snapshot's manifests (pyiceberg); `--verify` is clean."""
    entry = iceberg_tables[name]
    doc = _json("inspect", entry["location"], "--count-rows", "--verify")
    live = counts(entry["metadata"])

    assert doc["logical_rows"] == live_row_count(entry["metadata"]) == len(entry["expected"])
    assert doc["row_counts_exact"] and doc["physical_rows"] == live.physical_rows
    assert doc["deleted_rows"] == live.physical_rows - len(entry["expected"])
    assert doc["num_files"] == live.data_files
    assert doc["delete_files"] == {
        "position": live.position_delete_files,
        "equality": live.equality_delete_files,
        "deletion_vectors": live.deletion_vectors,
    }
    assert doc["verify"]["ok"], doc["verify"]["problems"]


def _configure_catalogs(
    tables: list[CatalogTable], home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Configure the catalogs as pyiceberg users do, in `~/.pyiceberg.yaml` (here
    `$PYICEBERG_HOME/.pyiceberg.yaml`), read as a new process reads it."""
    from pyiceberg.utils.config import Config

    home.mkdir(parents=True, exist_ok=True)
    lines = ["catalog:"]  # block style: pyiceberg's strictyaml refuses flow style
    for table in tables:
        lines.append(f"  {table.name}:")
        lines += [f"    {key}: {json.dumps(value)}" for key, value in table.properties.items()]
    (home / ".pyiceberg.yaml").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("PYICEBERG_HOME", str(home))
    monkeypatch.setattr("pyiceberg.catalog._ENV_CONFIG", Config())


def test_inspect_through_catalogs_and_on_s3(
    iceberg_sql_catalog: CatalogTable,
    iceberg_rest_catalog: CatalogTable,
    iceberg_s3_table: CatalogTable,
    s3_server: S3Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tables Iceberg Spark wrote through a JDBC (SQLite) catalog, a REST catalog server
    and S3FileIO on the S3 emulator: `inspect --catalog NAME ns.table` (configured in
    .pyiceberg.yaml) and, for the S3 table, by its metadata file with dvtool's storage
    options, count the rows the fixture intends and DuckDB reads; `--verify` is clean."""
    tables = [iceberg_sql_catalog, iceberg_rest_catalog, iceberg_s3_table]
    _configure_catalogs(tables, tmp_path / "pyiceberg-home", monkeypatch)
    s3_io = iceberg_s3_table.properties
    for table in tables:
        io = s3_io if table is iceberg_s3_table else None
        oracle = duckdb_arrow(table.metadata, io=io).num_rows
        doc = _json("inspect", "--catalog", table.name, table.identifier, "--verify")
        assert doc["logical_rows"] == oracle == len(table.expected), table.name
        assert doc["metadata_location"] == table.metadata and doc["verify"]["ok"]
    options = [f"--storage-option={k}={v}" for k, v in s3_server.storage_options().items()]
    by_path = _json("inspect", iceberg_s3_table.metadata, *options, "--verify")
    assert by_path["logical_rows"] == len(iceberg_s3_table.expected) and by_path["verify"]["ok"]
