"""dvtool's CLI on Spark clusters whose executors have a stock Python (pyarrow, pandas, numpy).

Real clusters' Python workers have what PySpark needs and nothing of dvtool: dvtool must
ship itself to the session, and its executor code must need nothing beyond pyarrow, numpy,
pandas and dvtool's pure-Python modules. These tests run `python -m dvtool` as a user does,
in a child process in this venv (the driver, or the Spark Connect client), against a
standalone cluster (`stock_standalone`) and a Spark Connect server (`stock_connect`) whose
executors run `stock_python()` without PYTHONPATH; the fixtures prove that with a Spark job
before the first test (tests/engines/conftest.py).

Each operation - a DV delete, a copy-on-write delete, `optimize --purge` - runs on a copy of
a small DV table (unpartitioned, and partitioned by a string with NULLs) on the
cluster, and on another copy with `--engine arrow`; the tables must then hold the same rows
(read with polars and with deltalake's QueryBuilder, which both apply DVs) and the JSON
results must agree. A corrupt data file must fail a Spark rewrite with one line carrying the
executor's own pyarrow error.

Iceberg: a v3 table (DVs, row lineage) is purged and compacted with a target that splits
its files (row ranges of a file, one task each) on the standalone cluster and gets a
copy-on-write delete (a Spark scan and a Spark rewrite) on the Connect server, whose executors
have no pyiceberg or pyroaring; pyiceberg, DuckDB and polars must read the rows computed in
the test, every row keep its `_row_id` and sequence number, and the new files' manifest
metrics and sequence numbers be those of the arrow engine on another copy.

On the standalone cluster, dvtool also runs as users embed it: a PySpark application's own
session calls `dvtool.delete` and `dvtool.optimize(purge=True)` (and goes on using the session),
and `spark-submit` runs dvtool/spark_submit.py on spark-submit's application; both must leave
the arrow engine's rows, with tasks run by the cluster's executors.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from tests.engines.spark_cluster import DRIVER_CONF, QUICK_JVM, REPO, SPARK_HOME, Server, driver_env

CLUSTERS = ("standalone", "connect")
TABLES = ("flat", "partitioned")
# The arguments of each operation after TABLE; the base tables already have DVs (id % 7 = 0).
OPERATIONS = {
    "dv-delete": ["delete", "--where", "s = 'b' OR v > 150", "--mode", "dv"],
    "cow-delete": ["delete", "--where", "id % 5 = 0 AND s IS NOT NULL", "--mode", "cow"],
    "purge": ["optimize", "--purge"],
}
# Each operation on each cluster once, the two table layouts alternating, so that each
# cluster and each operation meets both layouts (each Spark run costs 10-20 s here).
COMBINATIONS = [
    ("standalone", "dv-delete", "partitioned"),
    ("standalone", "cow-delete", "flat"),
    ("standalone", "purge", "partitioned"),
    ("connect", "dv-delete", "flat"),
    ("connect", "cow-delete", "partitioned"),
    ("connect", "purge", "flat"),
]
TIMEOUT = 300  # seconds for one dvtool run
# With `pytest -n N --dist loadgroup`, one xdist worker runs them all (one set of servers).
pytestmark = pytest.mark.xdist_group("spark-stock")


# -- tables ----------------------------------------------------------------------------------


def _batch(start: int, count: int, partitioned: bool) -> pa.Table:
    ids = list(range(start, start + count))
    columns: dict[str, Any] = {
        "id": pa.array(ids, pa.int64()),
        "s": pa.array([[None, "a", "b", "c é"][i % 4] for i in ids]),
        "v": pa.array([None if i % 9 == 4 else i * 0.75 for i in ids], pa.float64()),
        "d": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 40) for i in ids]),
    }
    if partitioned:
        # Not "us west": polars 2.1 ignores the DVs of files whose path is %-escaped.
        columns["p"] = pa.array([["eu", "us-west", None][i % 3] for i in ids])
    return pa.table(columns)


def _write_table(path: Path, partitioned: bool) -> None:
    """Two writes of 120 rows (DVs enabled), then DVs on them from an arrow-engine delete."""
    partition_by = ["p"] if partitioned else None
    for start in (0, 120):
        write_deltalake(
            str(path),
            _batch(start, 120, partitioned),
            mode="append",
            partition_by=partition_by,
            configuration={"delta.enableDeletionVectors": "true"},
        )
    _check_ok(run_dvtool(["delete", str(path), "--where", "id % 7 = 0", "--engine", "arrow"]))


@pytest.fixture(scope="module")
def base_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The module's base tables by name (copied by every test, never changed)."""
    root = tmp_path_factory.mktemp("stock-tables")
    tables = {name: root / name for name in TABLES}
    for name, path in tables.items():
        _write_table(path, partitioned=name == "partitioned")
    return tables


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The table's rows by id, read by polars and by deltalake (which must agree)."""
    by_polars = pl.read_delta(str(path)).sort("id").to_dicts()
    query = QueryBuilder().register("t", DeltaTable(str(path)))
    by_deltalake = pa.table(query.execute("SELECT * FROM t ORDER BY id").read_all()).to_pylist()
    assert by_polars == by_deltalake, f"polars and deltalake disagree on {path}"
    return by_polars


# -- running dvtool --------------------------------------------------------------------------


def run_dvtool(
    args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m dvtool ARGS` in a child process (env: the driver's, default this venv's)."""
    return subprocess.run(
        [sys.executable, "-m", "dvtool", *args],
        capture_output=True,
        text=True,
        env=env if env is not None else driver_env(),
        cwd=cwd or REPO,
        timeout=TIMEOUT,
        check=False,
    )


def _check_ok(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON result of a successful run ({} when it printed none); fails with stderr."""
    assert done.returncode == 0, (
        f"{' '.join(done.args[2:])} exited {done.returncode}\n"
        f"stdout:\n{done.stdout[-2000:]}\nstderr:\n{done.stderr[-6000:]}"
    )
    out: dict[str, Any] = json.loads(done.stdout) if done.stdout.lstrip().startswith("{") else {}
    return out


def spark_args(server: Server) -> list[str]:
    """--engine spark and the server: `--spark-master spark://...` or `--spark-remote sc://...`."""
    if server.url.startswith("sc://"):
        return ["--engine", "spark", "--spark-remote", server.url]
    settings = DRIVER_CONF | QUICK_JVM
    conf = [arg for key, value in settings.items() for arg in ("--spark-conf", f"{key}={value}")]
    return ["--engine", "spark", "--spark-master", server.url, *conf]


def run_on(server: Server, operation: list[str], table: Path) -> dict[str, Any]:
    """Run `operation` on `table` with the Spark engine on `server`, as a user would; its JSON."""
    args = [operation[0], str(table), *operation[1:], "--json", *spark_args(server)]
    return _check_ok(run_dvtool(args, env=server.driver_env(), cwd=table.parent))


def spark_work(server: Server) -> int:
    """How much work `server` has run: applications with executors (standalone: the worker's
    `app-*` directories) or finished jobs (Connect: the server's log)."""
    if server.url.startswith("sc://"):
        return server.log.read_text(errors="replace").count("finished: ")
    return len(list((server.log.parent / "work").glob("app-*")))


def _summary(out: dict[str, Any]) -> dict[str, Any]:
    """What must agree between the engines in a delete's or an optimize's JSON result."""
    if "bins" in out:
        keys = ["numAddedFiles", "numRemovedFiles", "numDeletionVectorRowsRemoved"]
        bins = sorted(
            (sorted(b["inputs"]), b["input_rows"], b["rows_dropped"]) for b in out["bins"]
        )
        return {"metrics": {k: out["metrics"].get(k) for k in keys}, "bins": bins}
    keys = [
        "numDeletedRows",
        "numAddedFiles",
        "numRemovedFiles",
        "numCopiedRows",
        "numDeletionVectorsAdded",
        "numDeletionVectorsUpdated",
        "numDeletionVectorsRemoved",
    ]
    files = sorted((f["path"], f["action"], f["deleted_rows"]) for f in out["files"])
    return {"mode": out["mode"], "metrics": {k: out["metrics"][k] for k in keys}, "files": files}


# -- tests -----------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=CLUSTERS)
def cluster(request: pytest.FixtureRequest) -> Server:
    """Each stock cluster in turn (its tests run together; the server lives module-wide)."""
    server: Server = request.getfixturevalue(f"stock_{request.param}")
    return server


@pytest.fixture(scope="module")
def arrow_results(base_tables: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """`(table, operation) -> (JSON, rows)` of the arrow engine, run once per module."""
    cache: dict[tuple[str, str], tuple[dict[str, Any], list[dict[str, Any]]]] = {}

    def get(table: str, operation: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        if (table, operation) not in cache:
            copy = tmp_path_factory.mktemp(f"arrow-{table}-{operation}") / table
            shutil.copytree(base_tables[table], copy)
            args = [OPERATIONS[operation][0], str(copy), *OPERATIONS[operation][1:]]
            out = _check_ok(run_dvtool([*args, "--json", "--engine", "arrow"]))
            cache[table, operation] = (out, read_rows(copy))
        return cache[table, operation]

    return get


@pytest.mark.parametrize(("cluster", "operation", "table"), COMBINATIONS, indirect=["cluster"])
def test_same_result_as_arrow(
    cluster: Server,
    operation: str,
    table: str,
    base_tables: dict[str, Path],
    arrow_results: Any,
    tmp_path: Path,
) -> None:
    """The operation on the stock cluster leaves the rows the arrow engine leaves."""
    copy = tmp_path / table
    shutil.copytree(base_tables[table], copy)
    before = read_rows(copy)
    work = spark_work(cluster)
    out = run_on(cluster, OPERATIONS[operation], copy)
    assert out.get("engine", "spark") == "spark", out
    assert spark_work(cluster) > work, "the Spark engine ran no work on the cluster"
    expected_out, expected_rows = arrow_results(table, operation)
    assert _summary(out) == _summary(expected_out)
    rows = read_rows(copy)
    assert rows == expected_rows
    assert rows == before if operation == "purge" else len(rows) < len(before)


def test_executor_error_is_one_line(
    cluster: Server, base_tables: dict[str, Path], tmp_path: Path
) -> None:
    """A rewrite task that fails on an executor (a truncated data file, read by pyarrow in the
    stock Python) fails the command with one line that carries pyarrow's own message."""
    copy = tmp_path / "flat"
    shutil.copytree(base_tables["flat"], copy)
    victim = sorted(copy.glob("*.parquet"))[0]
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    args = ["optimize", str(copy), "--purge", "--json", *spark_args(cluster)]
    done = run_dvtool(args, env=cluster.driver_env(), cwd=tmp_path)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    context = f"exit {done.returncode}, stderr:\n{done.stderr[-6000:]}"
    assert done.returncode == 1, context
    assert len(errors) == 1, context
    assert "Parquet magic bytes not found" in errors[0], context
    assert "Traceback" not in done.stderr and "JVM stacktrace" not in done.stderr, context


# -- a PySpark application and spark-submit on the standalone cluster -------------------------

# A user's own PySpark application on the cluster: its session (master and confs from argv),
# then dvtool's API on it, then the session still in use. PYSPARK_PYTHON must be in the
# environment when the SparkContext starts: PySpark gives the executors that interpreter
# (default `python3` on their PATH), and reads no `spark.pyspark.python` from the builder.
APPLICATION = """
import json, sys
from pyspark.sql import SparkSession
import dvtool

table, master, conf = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
builder = SparkSession.builder.master(master).appName("dvtool-test-app")
for key, value in conf.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
spark.conf.set("spark.sql.session.timeZone", "America/New_York")
deleted = dvtool.delete(table, sys.argv[4], mode="dv", spark=spark)
purged = dvtool.optimize(table, purge=True, spark=spark)

def where(_):  # in __main__, so pickled by value: the executors import only what is shipped
    import sys
    import dvtool
    yield json.dumps([sys.executable, dvtool.__file__])

executors = spark.sparkContext.parallelize(range(2), 2).mapPartitions(where).collect()
# Job ids count up from 0 in a SparkContext: this job's id is the number of dvtool's jobs.
own_job = max(spark.sparkContext.statusTracker().getJobIdsForGroup(None), default=-1)
print("APP-RESULT " + json.dumps({
    "delete": deleted.to_json(), "optimize": purged.to_json(),
    "count": spark.range(3).count(), "master": spark.sparkContext.master,
    "python": spark.sparkContext.pythonExec,
    "executors": [json.loads(e) for e in sorted(set(executors))],
    "time_zone": spark.conf.get("spark.sql.session.timeZone"),
    "dvtool_jobs": own_job,
}))
spark.stop()
"""


def arrow_chain(
    base: Path, operations: list[list[str]], workdir: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The JSON results of `operations` run in turn with the arrow engine on a copy of
    `base`, and the rows they leave."""
    copy = workdir / base.name
    shutil.copytree(base, copy)
    outs = [
        _check_ok(run_dvtool([op[0], str(copy), *op[1:], "--json", "--engine", "arrow"]))
        for op in operations
    ]
    return outs, read_rows(copy)


def app_dirs(server: Server) -> set[Path]:
    """The standalone worker's application directories (one per application with executors)."""
    return set((server.log.parent / "work").glob("app-*"))


def finished_tasks(apps: set[Path]) -> int:
    """The tasks the executors of `apps` finished, from their INFO logs (Spark's default level,
    which a session dvtool is given or spark-submit starts keeps)."""
    logs = [log for app in apps for log in app.glob("*/stderr")]
    return sum(log.read_text(errors="replace").count("Finished task") for log in logs)


def test_pyspark_application_runs_the_api_on_the_cluster(
    stock_standalone: Server, base_tables: dict[str, Path], tmp_path: Path
) -> None:
    """A PySpark application's own session on the stock cluster runs `dvtool.delete` (DVs) and
    `dvtool.optimize(purge=True)` on its executors, which import dvtool from the zip dvtool
    shipped; the session stays usable, its time zone restored; the rows are arrow's."""
    where = OPERATIONS["dv-delete"][2]
    expected, expected_rows = arrow_chain(
        base_tables["partitioned"], [OPERATIONS["dv-delete"], OPERATIONS["purge"]], tmp_path / "a"
    )
    copy = tmp_path / "spark" / "partitioned"
    shutil.copytree(base_tables["partitioned"], copy)
    script = tmp_path / "app.py"
    script.write_text(APPLICATION)
    conf = json.dumps(DRIVER_CONF | QUICK_JVM)
    before = app_dirs(stock_standalone)
    done = subprocess.run(
        [sys.executable, str(script), str(copy), stock_standalone.url, conf, where],
        capture_output=True,
        text=True,
        env=stock_standalone.driver_env(),
        cwd=tmp_path,
        timeout=TIMEOUT,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("APP-RESULT ")]
    assert done.returncode == 0 and lines, f"exit {done.returncode}\n{done.stderr[-6000:]}"
    out = json.loads(lines[-1].removeprefix("APP-RESULT "))

    assert out["master"] == stock_standalone.url and out["count"] == 3
    assert out["time_zone"] == "America/New_York"  # dvtool's UTC only while it ran
    stock = str(stock_standalone.worker_python)
    assert out["python"] == stock
    assert out["executors"], out
    for executable, module in out["executors"]:
        assert executable == stock and ".zip/dvtool/" in module, out["executors"]
    assert out["delete"]["mode"] == "dv" and out["optimize"]["engine"] == "spark"
    assert _summary(out["delete"]) == _summary(expected[0])
    assert _summary(out["optimize"]) == _summary(expected[1])
    assert read_rows(copy) == expected_rows
    # dvtool's scan and rewrite ran as jobs of the application, whose executors (one app
    # directory on the worker, with tasks in their logs) were the cluster's.
    assert out["dvtool_jobs"] >= 2, out["dvtool_jobs"]
    apps = app_dirs(stock_standalone) - before
    assert len(apps) == 1 and finished_tasks(apps) > 0, apps


def test_spark_submit_runs_the_cli_on_the_cluster(
    stock_standalone: Server, base_tables: dict[str, Path], tmp_path: Path
) -> None:
    """`spark-submit --master spark://... dvtool/spark_submit.py optimize|delete ...` runs
    dvtool on spark-submit's application on the stock cluster (no --spark-master, no
    --engine: `auto` takes spark-submit's session) and leaves arrow's rows.

    Client deploy mode: spark-submit refuses cluster deploy mode for Python applications on
    standalone masters ("Cluster deploy mode is currently not supported for python
    applications on standalone clusters."), so the driver runs here, in this venv
    (PYSPARK_DRIVER_PYTHON), and the executors in the stock Python (PYSPARK_PYTHON).
    """
    operations = [OPERATIONS["purge"], ["delete", "--where", "id % 5 = 0 AND s IS NOT NULL"]]
    expected, expected_rows = arrow_chain(base_tables["flat"], operations, tmp_path / "a")
    copy = tmp_path / "spark" / "flat"
    shutil.copytree(base_tables["flat"], copy)
    env = stock_standalone.driver_env()
    for name in ("DVTOOL_SPARK_MASTER", "DVTOOL_SPARK_REMOTE"):
        env.pop(name, None)
    command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", stock_standalone.url]
    for key, value in (DRIVER_CONF | QUICK_JVM).items():
        command += ["--conf", f"{key}={value}"]
    command.append(str(REPO / "dvtool" / "spark_submit.py"))
    outs = []
    for operation in operations:
        before = app_dirs(stock_standalone)
        done = subprocess.run(
            [*command, operation[0], str(copy), *operation[1:], "--json"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=TIMEOUT,
            check=False,
        )
        assert done.returncode == 0, f"{operation}: exit {done.returncode}\n{done.stderr[-6000:]}"
        outs.append(json.loads(done.stdout))
        apps = app_dirs(stock_standalone) - before
        # spark-submit's application, on the cluster's executors, which ran dvtool's tasks
        assert len(apps) == 1 and finished_tasks(apps) > 0, (operation, apps)
    assert outs[0]["engine"] == "spark"
    assert _summary(outs[0]) == _summary(expected[0])
    # The delete's files are the purge's outputs, named at random: compare all but names.
    deleted, arrow_deleted = _summary(outs[1]), _summary(expected[1])
    assert deleted["metrics"] == arrow_deleted["metrics"]
    assert sorted(f[1:] for f in deleted["files"]) == sorted(f[1:] for f in arrow_deleted["files"])
    assert read_rows(copy) == expected_rows


# -- Iceberg tables ---------------------------------------------------------------------------

# Each Iceberg operation once: a purge on the standalone cluster (rewrite only) and a
# copy-on-write delete on the Connect server (scan and rewrite: both job kinds there).
ICEBERG_OPERATIONS = {
    "purge": ["optimize", "--purge"],
    "cow-delete": ["delete", "--where", "id % 5 = 0 AND cat IS NOT NULL", "--mode", "cow"],
    # both files far above 180% of the target: each split over several new files
    "split-compact": ["optimize", "--target-size", "400"],
}
ICEBERG_COMBINATIONS = [
    ("standalone", "purge"),
    ("connect", "cow-delete"),
    ("standalone", "split-compact"),
]
ICEBERG_FILES = 2
ICEBERG_ROWS = 150  # per file


def _iceberg_cat(i: int) -> str | None:
    return [None, "a", "b"][i % 3]


def _iceberg_table(path: Path) -> None:
    """A v3 path table of two appended files of 150 rows (ids 0..299 in order, so each
    row's `_row_id` is its id and its `_last_updated_sequence_number` its file's append,
    1 or 2), then DVs on `id % 7 = 0` from an arrow-engine delete. Iceberg tables hold
    absolute paths: each test builds its own (in a second, in this process)."""
    from dvtool.commands.delete.command import DeleteRequest
    from dvtool.commands.delete.iceberg import run_delete_iceberg, scan_storage
    from dvtool.engines.arrow import ArrowEngine
    from dvtool.iceberg.snapshot_producer import AddedFile, SnapshotChanges, produce_snapshot
    from dvtool.iceberg.tables import open_iceberg
    from tests.iceberg.snapshot_commits import commit_locally, new_table, parquet_data_file

    table = new_table(path, 3)
    for n in range(ICEBERG_FILES):
        ids = range(n * ICEBERG_ROWS, (n + 1) * ICEBERG_ROWS)
        added = parquet_data_file(
            table, f"f{n}.parquet", [{"id": i, "cat": _iceberg_cat(i)} for i in ids]
        )
        changes = SnapshotChanges("append", added=(AddedFile(added),))
        table = commit_locally(table, produce_snapshot(table, table.io, changes))
    request = DeleteRequest("id % 7 = 0", "dv")
    run_delete_iceberg(table, request, scan_storage(table, {}), engine=ArrowEngine())
    assert open_iceberg(str(path)).metadata.current_snapshot() is not None


def _iceberg_expected(operation: str) -> list[dict[str, Any]]:
    """The rows the table holds after `operation`, computed here."""
    ids = [i for i in range(ICEBERG_FILES * ICEBERG_ROWS) if i % 7]
    if operation == "cow-delete":
        ids = [i for i in ids if not (i % 5 == 0 and _iceberg_cat(i) is not None)]
    return [{"id": i, "cat": _iceberg_cat(i)} for i in ids]


def _iceberg_files(path: Path) -> list[dict[str, Any]]:
    """The live data files of the table's current snapshot: manifest fields (metrics
    included, path as a name) and their rows' `(id, _row_id, _last_updated_sequence_number)`
    read with pyarrow; no delete file may remain (every file was rewritten)."""
    import pyarrow.parquet as pq

    from dvtool.iceberg.live_files import live_files
    from dvtool.iceberg.tables import open_iceberg

    live = live_files(open_iceberg(str(path)))
    assert not live.deletes, "delete files remain after the rewrite"
    files = []
    for data in live.data:
        record = data.record
        columns = ["id", "_row_id", "_last_updated_sequence_number"]
        rows = pq.read_table(record.file_path, columns=columns).to_pylist()
        metrics = {
            name: getattr(record, name)
            for name in ("record_count", "column_sizes", "value_counts", "null_value_counts")
        } | {name: getattr(record, name) for name in ("lower_bounds", "upper_bounds")}
        files.append(
            {"metrics": metrics, "rows": rows, "sequence": data.entry.data_sequence_number}
        )
    return sorted(files, key=lambda f: f["rows"][0]["id"])


def _untimed(metrics: dict[str, Any]) -> dict[str, Any]:
    """Metrics without their durations."""
    return {k: v for k, v in metrics.items() if not k.endswith("TimeMs")}


@pytest.mark.parametrize(("cluster", "operation"), ICEBERG_COMBINATIONS, indirect=["cluster"])
def test_iceberg_same_result_as_arrow(cluster: Server, operation: str, tmp_path: Path) -> None:
    """An Iceberg v3 table's purge or copy-on-write delete on the stock cluster (executors
    without pyiceberg or pyroaring) leaves the rows pyiceberg, DuckDB and polars read as
    computed here, each row its own `_row_id` and sequence number, and the very files and
    metrics the arrow engine writes."""
    from dvtool.iceberg.tables import open_iceberg
    from tests.iceberg_oracles import duckdb_rows, polars_rows, pyiceberg_rows

    spark, arrow = tmp_path / "spark" / "t", tmp_path / "arrow" / "t"
    for path in (spark, arrow):
        _iceberg_table(path)
    args = ICEBERG_OPERATIONS[operation]
    expected_out = _check_ok(
        run_dvtool([args[0], str(arrow), *args[1:], "--json", "--engine", "arrow"])
    )
    work = spark_work(cluster)
    out = run_on(cluster, args, spark)
    assert out.get("engine", "spark") == "spark", out
    assert spark_work(cluster) > work, "the Spark engine ran no work on the cluster"
    assert _untimed(out["metrics"]) == _untimed(expected_out["metrics"])
    metadata = open_iceberg(str(spark)).metadata_location
    expected = _iceberg_expected(operation)
    for read in (pyiceberg_rows, duckdb_rows, polars_rows):
        assert read(metadata) == expected, read.__name__
    files = _iceberg_files(spark)
    arrow_files = _iceberg_files(arrow)
    assert [f["metrics"] for f in files] == [f["metrics"] for f in arrow_files]
    assert [f["sequence"] for f in files] == [f["sequence"] for f in arrow_files]
    lineage = [
        (r["id"], r["_row_id"], r["_last_updated_sequence_number"])
        for f in files
        for r in f["rows"]
    ]
    assert lineage == [(r["id"], r["id"], 1 + r["id"] // ICEBERG_ROWS) for r in expected]
