"""dvtool's Python API: `dvtool.delete` and `dvtool.optimize`, in-process and on a session.

`import dvtool` stays cheap (the API loads on first use). Without `spark=` the commands run on
arrow; with a caller's local SparkSession (created here like a user's pipeline would) they
run on it: the table ends up holding what the arrow engine leaves (read with polars), the
session is neither stopped nor replaced, its SQL confs are back to the caller's values, and
dvtool was added to it once - its Python workers import dvtool from the shipped zip.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

import dvtool
from dvtool.commands.delete.command import DeleteResult
from dvtool.commands.optimize.command import OptimizeResult
from dvtool.errors import DvtoolError, TableNotFoundError, UsageError


def _table(root: Path) -> None:
    """Three files, deletion vectors enabled."""
    for k in range(3):
        ids = list(range(30 * k, 30 * (k + 1)))
        data = pa.table(
            {"id": pa.array(ids, pa.int64()), "s": [["a", "b", None][i % 3] for i in ids]}
        )
        write_deltalake(
            str(root), data, mode="append", configuration={"delta.enableDeletionVectors": "true"}
        )


def _ids(root: Path) -> list[int]:
    import polars as pl

    return sorted(pl.read_delta(str(root))["id"].to_list())


def test_import_dvtool_is_cheap_and_the_api_loads_on_use() -> None:
    code = (
        "import sys, dvtool; heavy = ('pyarrow', 'pyspark', 'fsspec', 'dvtool.api'); "
        "print(sorted(m for m in heavy if m in sys.modules)); "
        "print(dvtool.delete.__module__, dvtool.OptimizeResult.__name__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.splitlines() == ["[]", "dvtool.api OptimizeResult"]
    assert dvtool.DvtoolError is DvtoolError
    with pytest.raises(AttributeError):
        dvtool.no_such_name  # noqa: B018


def test_delete_and_optimize_in_process(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _table(root)
    planned = dvtool.delete(root, "id % 4 = 0", dry_run=True)
    assert isinstance(planned, DeleteResult) and planned.version is None
    result = dvtool.delete(str(root), "id % 4 = 0", storage_options={})
    assert result.version == 3 and result.mode == "dv"
    assert result.metrics["numDeletedRows"] == 23
    optimized = dvtool.optimize(root, purge=True)
    assert isinstance(optimized, OptimizeResult) and optimized.engine == "arrow"
    assert optimized.versions == [4]
    assert _ids(root) == [i for i in range(90) if i % 4 != 0]

    with pytest.raises(TableNotFoundError):
        dvtool.delete(tmp_path / "missing", "id = 1")
    with pytest.raises(UsageError, match="mode"):
        dvtool.delete(root, "id = 1", mode="sideways")
    with pytest.raises(UsageError, match="SparkSession"):
        dvtool.optimize(root, purge=True, spark="local[1]")
    with pytest.raises(DvtoolError):
        dvtool.optimize(root, purge=True, min_deleted_ratio=2.0)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A user's local session, made with PySpark's builder (not by dvtool)."""
    from pyspark.sql import SparkSession

    from tests.engines.spark_cluster import DRIVER_CONF

    builder = SparkSession.builder.master("local[1]").appName("a user's pipeline")
    for key, value in DRIVER_CONF.items():
        builder = builder.config(key, value)
    # The Python workers need pyarrow: this venv's interpreter (PySpark's default is python3).
    previous = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = builder.getOrCreate()
    try:
        yield session
    finally:
        session.stop()
        if previous is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = previous


def test_api_runs_on_an_existing_session_and_leaves_it_running(spark: Any, tmp_path: Path) -> None:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from dvtool.engines.spark import shipping

    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    context = spark.sparkContext
    roots = {name: tmp_path / name for name in ("spark", "arrow")}
    for name, root in roots.items():
        _table(root)
        session = spark if name == "spark" else None
        deleted = dvtool.delete(root, "id % 5 = 1 OR s IS NULL AND id < 20", spark=session)
        assert deleted.version == 3 and deleted.files_scanned == 3
        purged = dvtool.optimize(root, purge=True, spark=session)
        assert purged.engine == name and purged.versions == [4]
    assert _ids(roots["spark"]) == _ids(roots["arrow"])
    assert len(_ids(roots["arrow"])) == 67

    # The caller's session: still running, still the only one, its confs as they were.
    assert SparkContext._active_spark_context is context
    assert SparkSession.getActiveSession() is spark
    assert not context._jsc.sc().isStopped()
    assert spark.conf.get("spark.sql.session.timeZone") == "America/New_York"
    assert spark.conf.get("spark.sql.ansi.enabled") == "false"
    # dvtool was added once, and is on the Python workers' path.
    name = shipping.package_zip().name
    assert context._python_includes.count(name) == 1
    paths = context.parallelize([0], 1).flatMap(lambda _: __import__("sys").path).collect()
    assert any(p.endswith(name) for p in paths)


def test_inspect_an_iceberg_table_by_path_and_by_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`dvtool.inspect` opens an Iceberg table (written by pyiceberg, in a SQL catalog) by its
    folder and through the catalog, as pyiceberg configures catalogs (environment); the
    figures are pyiceberg's."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.utils.config import Config

    monkeypatch.setenv("PYICEBERG_CATALOG__API__TYPE", "sql")
    monkeypatch.setenv("PYICEBERG_CATALOG__API__URI", f"sqlite:///{tmp_path / 'catalog.db'}")
    monkeypatch.setenv("PYICEBERG_CATALOG__API__WAREHOUSE", f"file://{tmp_path / 'warehouse'}")
    # pyiceberg reads its configuration once, when imported: read it as a new process would.
    monkeypatch.setattr("pyiceberg.catalog._ENV_CONFIG", Config())
    catalog = load_catalog("api")
    catalog.create_namespace("ns")
    data = pa.table({"id": pa.array(range(7), pa.int64())})
    location = tmp_path / "warehouse" / "t"
    table = catalog.create_table("ns.t", schema=data.schema, location=f"file://{location}")
    table.append(data)
    table.append(data)
    expected = table.refresh().scan().to_arrow().num_rows

    by_path = dvtool.inspect(location)
    by_catalog = dvtool.inspect("ns.t", catalog="api")
    for result in (by_path, by_catalog):
        assert isinstance(result, dvtool.IcebergInspectResult) and result.exit_code == 0
        doc = result.to_dict()
        assert doc["format"] == "iceberg" and doc["logical_rows"] == expected == 14
        assert doc["num_files"] == len(table.inspect.files())
    history = dvtool.inspect("ns.t", catalog="api", history=5).to_dict()["history"]
    assert [h["snapshot_id"] for h in history] == [
        s.snapshot_id for s in sorted(table.snapshots(), key=lambda s: -s.timestamp_ms)
    ]
