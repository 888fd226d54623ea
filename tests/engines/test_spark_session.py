"""The Spark engine's sessions: dvtool ships itself, starts quietly, fails on one line, and runs
under spark-submit on the session spark-submit's driver provides.

Without Spark: the package zip (deterministic, importable alone in an isolated interpreter),
shipping once per SparkContext or Connect session, a borrowed session's confs set and
restored and the session never stopped (fake sessions), and the one-line message of a Python
worker's failure. With Spark, in child processes (one classic session per process): `python
-m dvtool` on `local[1]` keeps the JVM's start-up lines off stderr unless `-v`; executors that
cannot import pyarrow fail `optimize --purge` with exactly one error line and its hint; and a
real `spark-submit` of `dvtool/spark_submit.py` purges a table on spark-submit's own
application (its master and name, read back from Spark's event log).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

import dvtool
from dvtool.delta.log.reader import open_log
from dvtool.engines import SparkSettings
from dvtool.engines.spark import shipping
from dvtool.engines.spark.engine import SparkEngine
from dvtool.engines.spark.failures import SparkEngineError, spark_errors
from tests.engines.spark_cluster import DRIVER_CONF, REPO, SPARK_HOME, spark_env

TIMEOUT = 300
# What a classic JVM prints on start-up (Spark 4 on Java 17, pip-installed PySpark).
STARTUP_LINES = (
    "Using incubator modules",
    "Using Spark's default log4j profile",
    "Setting default log level to",
    "WARN NativeCodeLoader",
    "WARN Utils",
)


# -- the package zip -------------------------------------------------------------------------


def test_package_zip_is_deterministic_and_imports_alone(tmp_path: Path) -> None:
    path = shipping.package_zip()
    assert path is shipping.package_zip() and path.is_file()
    data = path.read_bytes()
    assert shipping.zip_bytes() == data  # same content, same bytes
    assert path.name.startswith(f"dvtool-{dvtool.__version__}-") and path.suffix == ".zip"
    package = shipping.package_dir()
    expected = {
        "dvtool/" + p.relative_to(package).as_posix()
        for p in package.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
    assert names == expected
    assert {
        "dvtool/__init__.py",
        "dvtool/deletion_vectors/roaring.py",
        "dvtool/engines/spark/tasks.py",
    } <= names

    # An isolated interpreter (-I -S: no PYTHONPATH, no site, so no editable finder) with
    # the zip first and only the venv's site-packages after it imports dvtool from the zip.
    site = Path(pa.__file__).resolve().parents[1]
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); sys.path.append(sys.argv[2]); "
        "import dvtool.deletion_vectors.roaring, dvtool.engines.spark.tasks; "
        "print(dvtool.deletion_vectors.roaring.__file__); "
        "print(dvtool.engines.spark.tasks.__file__)"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(path), str(site)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    files = done.stdout.split()
    assert len(files) == 2 and all(f.startswith(str(path) + os.sep) for f in files)


# -- shipping and borrowed sessions, with fake sessions ---------------------------------------


class FakeContext:
    def __init__(self) -> None:
        self._python_includes: list[str] = []
        self.added: list[str] = []

    def addPyFile(self, path: str) -> None:
        self.added.append(path)
        self._python_includes.append(Path(path).name)


class FakeConf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = dict(values)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)


class FakeSession:
    """A classic session as the engine sees it: conf, sparkContext, stop."""

    def __init__(self, context: FakeContext | None = None, **conf: str) -> None:
        self.sparkContext = context or FakeContext()
        self.conf = FakeConf(conf)
        self.stopped = 0

    def stop(self) -> None:
        self.stopped += 1


class FakeConnectSession(FakeSession):
    __module__ = "pyspark.sql.connect.session"

    def __init__(self) -> None:
        super().__init__()
        self.artifacts: list[tuple[str, bool]] = []

    def addArtifacts(self, *paths: str, pyfile: bool = False) -> None:
        self.artifacts += [(p, pyfile) for p in paths]


def test_shipping_happens_once_per_context_and_connect_session() -> None:
    context = FakeContext()
    first, second = FakeSession(context), FakeSession(context)  # two sessions, one context
    assert shipping.ship(first) is True
    assert shipping.ship(first) is False
    assert shipping.ship(second) is False
    assert context.added == [str(shipping.package_zip())]

    listed = FakeContext()  # a context that has the zip already (e.g. another engine's)
    listed._python_includes.append(shipping.package_zip().name)
    assert shipping.ship(FakeSession(listed)) is False and listed.added == []

    connect = FakeConnectSession()
    assert shipping.is_connect_session(connect)
    assert shipping.ship(connect) is True and shipping.ship(connect) is False
    assert connect.artifacts == [(str(shipping.package_zip()), True)]
    assert connect.sparkContext.added == []


def test_borrowed_session_gets_confs_for_a_while_and_is_never_stopped() -> None:
    spark = FakeSession(**{"spark.sql.session.timeZone": "America/New_York"})
    engine = SparkEngine.from_session(spark)  # type: ignore[arg-type]
    assert not engine.is_connect
    assert engine.session() is spark and engine.session() is spark
    assert spark.conf.values["spark.sql.session.timeZone"] == "UTC"
    assert spark.conf.values["spark.sql.ansi.enabled"] == "true"
    assert spark.sparkContext.added == [str(shipping.package_zip())]
    engine.stop()
    assert spark.conf.values == {"spark.sql.session.timeZone": "America/New_York"}
    assert spark.stopped == 0
    assert engine.session() is spark  # usable again, confs set again, not shipped again
    assert spark.conf.values["spark.sql.session.timeZone"] == "UTC"
    with engine:
        pass
    assert spark.conf.values == {"spark.sql.session.timeZone": "America/New_York"}
    assert spark.stopped == 0 and len(spark.sparkContext.added) == 1

    assert SparkEngine(session=FakeConnectSession()).is_connect  # type: ignore[arg-type]
    assert SparkEngine(SparkSettings(remote="sc://127.0.0.1:1")).is_connect


# -- failures on one line ---------------------------------------------------------------------


WORKER_FAILURE = """An exception was thrown from the Python worker:
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/worker.py", \
line 4327, in invoke_udf
    run_process()
  File "/tmp/dvtool-x/dvtool-0.1.0-abc.zip/dvtool/engines/spark/tasks.py", line 44, in <module>
    import pyarrow as pa
ModuleNotFoundError: No module named 'pyarrow'
"""
JVM_FAILURE = """An error occurred while calling o57.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 \
failed 1 times, most recent failure: Lost task 0.0 (TID 1) (127.0.0.1 executor driver): \
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/x/worker.py", line 1, in main
    process()
pyarrow.lib.ArrowInvalid: Parquet magic bytes not found in footer
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException
Driver stacktrace:
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages
"""


class PythonException(Exception):
    """Stands in for PySpark's exception class (its module decides what spark_errors takes)."""

    __module__ = "pyspark.errors.exceptions.captured"


def test_a_python_workers_error_is_one_line_with_a_hint_for_missing_modules() -> None:
    with pytest.raises(SparkEngineError) as caught, spark_errors("rewrite data files"):
        raise PythonException(WORKER_FAILURE)
    error = caught.value
    assert error.message == (
        "cannot rewrite data files with Spark: ModuleNotFoundError: No module named 'pyarrow'"
    )
    assert error.hint is not None and error.hint.startswith("executors cannot import pyarrow: ")
    assert str(error).count("\n") == 1

    with pytest.raises(SparkEngineError) as caught, spark_errors("scan the table"):
        raise PythonException(JVM_FAILURE)
    assert caught.value.message == (
        "cannot scan the table with Spark: "
        "pyarrow.lib.ArrowInvalid: Parquet magic bytes not found in footer"
    )
    assert caught.value.hint is None


# -- with Spark, in child processes -----------------------------------------------------------


def _dv_table(root: Path) -> list[int]:
    """Two files, deletion vectors enabled, DVs written by `dvtool.delete` (arrow); the ids
    left."""
    for k in range(2):
        ids = list(range(40 * k, 40 * (k + 1)))
        data = pa.table(
            {"id": pa.array(ids, pa.int64()), "s": [["a", "b", None][i % 3] for i in ids]}
        )
        write_deltalake(
            str(root), data, mode="append", configuration={"delta.enableDeletionVectors": "true"}
        )
    result = dvtool.delete(root, "id % 7 = 0")
    assert result.metrics["numDeletionVectorsAdded"] == 2
    return [i for i in range(80) if i % 7 != 0]


def _ids(root: Path) -> list[int]:
    import polars as pl

    return sorted(pl.read_delta(str(root))["id"].to_list())


def _dvtool(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    spark = ["--engine", "spark", "--spark-master", "local[1]"]
    for key, value in DRIVER_CONF.items():
        spark += ["--spark-conf", f"{key}={value}"]
    return subprocess.run(
        [sys.executable, "-m", "dvtool", *args, *spark],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=TIMEOUT,
        check=False,
    )


def test_cli_keeps_the_jvm_quiet_unless_verbose(tmp_path: Path) -> None:
    root = tmp_path / "t"
    left = _dv_table(root)
    env = spark_env()
    quiet = _dvtool(["delete", str(root), "--where", "id % 5 = 0"], env, tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert "committed version 3" in quiet.stdout
    assert quiet.stderr == ""  # nothing of the JVM's, nothing else
    left = [i for i in left if i % 5 != 0]
    assert _ids(root) == left

    verbose = _dvtool(["-v", "delete", str(root), "--where", "id % 11 = 0"], env, tmp_path)
    assert verbose.returncode == 0, verbose.stderr
    assert "Using Spark's default log4j profile" in verbose.stderr
    assert "committed version 4" in verbose.stdout
    assert _ids(root) == [i for i in left if i % 11 != 0]


def test_executors_without_pyarrow_fail_on_one_line_with_a_hint(tmp_path: Path) -> None:
    """The executors' Python finds a pyarrow that cannot be imported: the purge fails with the
    worker's own error on one line, and the hint - nothing of Spark's on stderr."""
    root = tmp_path / "t"
    left = _dv_table(root)
    hidden = tmp_path / "no-pyarrow" / "pyarrow"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pyarrow'\", name='pyarrow')\n"
    )
    python = tmp_path / "python-without-pyarrow"
    python.write_text(
        f'#!/bin/sh\nPYTHONPATH="{hidden.parent}:$PYTHONPATH" exec "{sys.executable}" "$@"\n'
    )
    python.chmod(0o755)
    env = {**spark_env(), "PYSPARK_PYTHON": str(python)}
    done = _dvtool(["optimize", str(root), "--purge"], env, tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        "error: cannot rewrite data files with Spark: ModuleNotFoundError: "
        "No module named 'pyarrow'",
        "executors cannot import pyarrow: install it in the executors' Python environment "
        "(PYSPARK_PYTHON / spark.pyspark.python), or ship one (spark.archives)",
    ]
    assert _ids(root) == left


def test_a_jvm_that_cannot_start_fails_on_one_line(tmp_path: Path) -> None:
    """spark-submit finds no java: the error names the launcher's own complaint."""
    root = tmp_path / "t"
    _dv_table(root)
    env = {**spark_env(), "JAVA_HOME": str(tmp_path / "no-java")}
    done = _dvtool(["delete", str(root), "--where", "id = 1"], env, tmp_path)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 2, done.stderr
    assert lines[0].startswith("error: cannot start a Spark session: the JVM exited (")
    assert f"{tmp_path / 'no-java'}/bin/java: No such file or directory" in lines[0]
    assert lines[1] == "run with -v to see Spark's output"


def _events(directory: Path) -> list[dict[str, Any]]:
    logs = [p for p in directory.iterdir() if p.is_file()]
    assert len(logs) == 1, logs  # one application: spark-submit's
    return [json.loads(line) for line in logs[0].read_text().splitlines() if line.strip()]


def test_spark_submit_runs_the_cli_on_its_own_session(tmp_path: Path) -> None:
    root = tmp_path / "t"
    left = _dv_table(root)
    events = tmp_path / "events"
    events.mkdir()
    conf = {
        **DRIVER_CONF,
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": events.as_uri(),
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
    }
    command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", "local[1]"]
    command += ["--name", "dvtool-submit-test"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    script = REPO / "dvtool" / "spark_submit.py"
    command += [str(script), "optimize", str(root), "--purge", "--json"]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=spark_env(),
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    result = json.loads(done.stdout)
    assert result["engine"] == "spark" and result["versions"] == [3]
    assert result["metrics"]["numDeletionVectorsRemoved"] == 2
    assert _ids(root) == left
    files = open_log(str(root)).snapshot().files
    assert files.column("deletionVector").null_count == files.num_rows

    # One application, spark-submit's (master, name), which the entry script stopped.
    log = _events(events)
    kinds = [e["Event"] for e in log]
    assert kinds.count("SparkListenerApplicationStart") == 1
    assert "SparkListenerApplicationEnd" in kinds
    started = next(e for e in log if e["Event"] == "SparkListenerEnvironmentUpdate")
    properties = dict(started["Spark Properties"])
    assert properties["spark.master"] == "local[1]"
    assert properties["spark.app.name"] == "dvtool-submit-test"
