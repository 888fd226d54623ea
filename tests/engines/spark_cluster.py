"""Test helpers for the Spark engine: local Spark servers, and a runner for a child process.

- `start_standalone(workdir)` starts a standalone master and one worker (1 core, 1 GiB) on
  127.0.0.1 with free ports and waits until the master's JSON page shows the worker ALIVE.
- `start_connect(workdir)` starts a Spark Connect server (`SparkConnectServer` through
  `spark-submit`, master `local[1]`) on 127.0.0.1 and waits until its port accepts.
- `Server.stop()` kills a server's process group by its id (SIGTERM, then SIGKILL).
- `Server.driver_env()` is the environment for a driver (or Connect client) process of it.
- `table_scan(root)` gives the TableLayout and ScanFiles of a Delta table, as `dvtool delete`
  builds them (current DVs loaded).
- `python -m tests.engines.spark_cluster SPEC.json` runs `SparkEngine.find_matches` and
  `rewrite` in a fresh process (one classic Spark session per process, and a Connect client
  switches PySpark into Connect mode for the whole process) and prints the results as JSON.

Everything binds to 127.0.0.1. The servers run the pip-installed PySpark (SPARK_HOME is the
pyspark package directory) and, as Python workers, this interpreter with the repository on
PYTHONPATH - unless started with `worker_python` (a stock interpreter, tests/engines/
stock_python.py): then the executors' Python workers run that interpreter in an environment
without PYTHONPATH (`stock_python.clean_env`), as on a real cluster, and import only what
Spark puts on their path (pyspark.zip, py4j) and what the session ships. How PySpark picks
the workers' Python:

- standalone: the driver's `PYSPARK_PYTHON` when its SparkContext starts (`driver_env()`
  sets it); the Python workers' environment is the executor's (inherited from the Worker
  daemon, which runs in the clean environment) plus `spark.executorEnv.*`, and their
  PYTHONPATH is Spark's own plus the executor's PYTHONPATH (none) plus shipped files.
- Spark Connect: the server is the driver; it takes `PYSPARK_PYTHON` from its own
  environment (clean, PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON the stock interpreter), and
  with master `local[1]` its Python workers inherit the server's environment.

`stock_python.probe_executors(server, workdir)` proves it with a Spark job in a child
process (`{"probe": true}` spec) that reports the executors' `sys.executable` and imports.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyspark

from dvtool.delta.dvstore import DVStore
from dvtool.delta.log.reader import open_log
from dvtool.delta.protocol.deletion_vector import DeletionVectorDescriptor
from dvtool.engines import SparkSettings
from dvtool.engines.base import RewriteBin, RewriteInput, ScanFile, TableLayout
from tests.engines.stock_python import clean_env

SPARK_HOME = Path(pyspark.__file__).resolve().parent
REPO = Path(__file__).resolve().parents[2]
LOCALHOST = "127.0.0.1"
# Driver settings for every test session: loopback only, no UI, small and quiet.
DRIVER_CONF = {
    "spark.driver.host": LOCALHOST,
    "spark.driver.bindAddress": LOCALHOST,
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.python.worker.reuse": "true",
}
# For short-lived test drivers and executors: C1 only and the serial GC start the JVMs faster
# (a standalone `optimize --purge` of a small table: 10 s instead of 15 s on 2 cores).
QUICK_JVM = {
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOCALHOST, 0))
        return int(s.getsockname()[1])


def spark_env(worker_python: Path | None = None) -> dict[str, str]:
    """The environment of the Spark servers (master, worker, Connect server).

    By default this interpreter with the repository on PYTHONPATH; with `worker_python`,
    `clean_env()` (no PYTHONPATH, no venv on PATH) and that interpreter as the Python.
    """
    if worker_python is None:
        env = dict(os.environ)
        env.update(
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
            PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p),
        )
    else:
        env = clean_env()
        env.update(PYSPARK_PYTHON=str(worker_python), PYSPARK_DRIVER_PYTHON=str(worker_python))
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP=LOCALHOST, SPARK_LOCAL_HOSTNAME=LOCALHOST)
    return env


def driver_env(worker_python: Path | None = None) -> dict[str, str]:
    """The environment of a driver process: this venv, the repository on PYTHONPATH.

    With `worker_python`, PYSPARK_PYTHON is that interpreter: a classic SparkContext gives
    it to the executors as their Python (a Connect client ignores it).
    """
    env = spark_env()
    if worker_python is not None:
        env["PYSPARK_PYTHON"] = str(worker_python)
    return env


@dataclass
class Server:
    """A server process started in its own process group."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    url: str = ""
    extra: list[Server] = field(default_factory=list)
    worker_python: Path | None = None

    def driver_env(self) -> dict[str, str]:
        """The environment for a driver or client process of this server."""
        return driver_env(self.worker_python)

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        """Kill the process group of this server (and of the servers it brought along)."""
        for server in [*self.extra, self]:
            _kill_group(server.process)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)
    else:
        # The leader is gone; its children (executors, python workers) may not be.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


def _spawn(name: str, args: list[str], workdir: Path, worker_python: Path | None) -> Server:
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / f"{name}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=workdir,
            env=spark_env(worker_python),
            start_new_session=True,
        )
    return Server(name, process, log, worker_python=worker_python)


def _wait(server: Server, ready: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited: {server.log_tail()}")
        with contextlib.suppress(OSError, ValueError):
            if ready():
                return
        time.sleep(0.3)
    raise RuntimeError(f"{server.name}: no {what} after {timeout}s: {server.log_tail()}")


def start_standalone(
    workdir: Path, timeout: float = 120, worker_python: Path | None = None
) -> Server:
    """A standalone master with one ALIVE worker; `url` is `spark://127.0.0.1:PORT`.

    With `worker_python`, master and worker run in `spark_env(worker_python)`; a driver
    must run in `Server.driver_env()` for its executors to use that interpreter.
    """
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port, webui, worker_ui = free_port(), free_port(), free_port()
    master = _spawn(
        "master",
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            LOCALHOST,
            "--port",
            str(port),
            "--webui-port",
            str(webui),
        ],
        workdir,
        worker_python,
    )
    master.url = f"spark://{LOCALHOST}:{port}"
    try:
        worker = _spawn(
            "worker",
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                master.url,
                "--host",
                LOCALHOST,
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                str(worker_ui),
                "--work-dir",
                str(workdir / "work"),
            ],
            workdir,
            worker_python,
        )
        master.extra.append(worker)

        def alive() -> bool:
            page = f"http://{LOCALHOST}:{webui}/json/"
            with urllib.request.urlopen(page, timeout=2) as response:
                state = json.load(response)
            return any(w.get("state") == "ALIVE" for w in state.get("workers", []))

        _wait(master, alive, timeout, "ALIVE worker")
    except BaseException:
        master.stop()
        raise
    return master


def start_connect(workdir: Path, timeout: float = 120, worker_python: Path | None = None) -> Server:
    """A Spark Connect server (master local[1]); `url` is `sc://127.0.0.1:PORT`.

    With `worker_python`, the server runs in `spark_env(worker_python)`: its Python workers
    (its executors', as it is the driver) use that interpreter without PYTHONPATH.
    """
    port = free_port()
    conf = {
        **DRIVER_CONF,
        "spark.connect.grpc.binding.address": LOCALHOST,
        "spark.connect.grpc.binding.port": str(port),
    }
    args = [
        str(SPARK_HOME / "bin" / "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--name",
        "dvtool-test-connect",
        "--master",
        "local[1]",
    ]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    server = _spawn("connect", args, workdir, worker_python)
    server.url = f"sc://{LOCALHOST}:{port}"

    def listening() -> bool:
        with socket.create_connection((LOCALHOST, port), timeout=1):
            return True

    try:
        _wait(server, listening, timeout, f"listener on port {port}")
    except BaseException:
        server.stop()
        raise
    return server


# -- tables ----------------------------------------------------------------------------------


def table_scan(root: str | Path) -> tuple[TableLayout, list[ScanFile], dict[str, str]]:
    """The layout, live files (with their current DVs) and configuration of a Delta table."""
    log = open_log(str(root))
    snapshot = log.snapshot()
    layout = TableLayout(
        log.storage,
        snapshot.schema,
        snapshot.metadata.partition_columns,
        snapshot.column_mapping_mode,
    )
    store = DVStore(log.storage)
    files = []
    columns = ["path", "partitionValues", "numRecords", "deletionVector"]
    for row in snapshot.files.select(columns).to_pylist():
        deleted = None
        if row["deletionVector"] is not None:
            descriptor = DeletionVectorDescriptor.from_json(row["deletionVector"])
            deleted = store.load(descriptor, data_file=row["path"], num_records=row["numRecords"])
        files.append(
            ScanFile(
                row["path"],
                log.storage.resolve(row["path"]),
                dict(row["partitionValues"] or []),
                row["numRecords"],
                deleted,
            )
        )
    files.sort(key=lambda f: f.path)
    return layout, files, dict(snapshot.metadata.configuration)


def bins_from_json(layout: TableLayout, spec: list[dict[str, Any]]) -> list[RewriteBin]:
    """Bins from `{directory, partition_values, inputs: [{path, drop}]}` (drop: row list)."""
    bins = []
    for b in spec:
        inputs = tuple(
            RewriteInput(
                i["path"],
                layout.storage.resolve(i["path"]),
                None if i.get("drop") is None else np.array(i["drop"], dtype=np.uint64),
            )
            for i in b["inputs"]
        )
        bins.append(RewriteBin(inputs, b["directory"], b["partition_values"]))
    return bins


# -- child process runner --------------------------------------------------------------------


def run_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the engine as `spec` says; bitmaps come back as row lists, files as dicts.

    `{"probe": true, "master" | "remote": ...}` runs `executor_report` instead.
    """
    if spec.get("probe"):
        from tests.engines.stock_python import executor_report

        return executor_report(spec.get("master"), spec.get("remote"), DRIVER_CONF | QUICK_JVM)
    from dvtool.engines.spark.engine import SparkEngine
    from dvtool.predicate import Predicate

    settings = SparkSettings(
        master=spec.get("master"), remote=spec.get("remote"), conf=spec.get("conf", {})
    )
    engine = SparkEngine(settings)
    out: dict[str, Any] = {"matches": {}, "written": None, "progress": {}}
    begun = time.monotonic()
    try:
        layout, files, configuration = table_scan(spec["table"])
        for sql in spec.get("predicates", []):
            predicate = Predicate.parse(
                sql, layout.schema, layout.partition_columns, layout.column_mapping_mode
            )
            steps: list[int] = []
            started = time.monotonic()
            found = engine.find_matches(layout, files, predicate, steps.append)
            out["matches"][sql] = [sorted(b) for b in found]
            out["progress"][sql] = [sum(steps), round(time.monotonic() - started, 2)]
        if spec.get("bins"):
            bins = bins_from_json(layout, spec["bins"])
            started = time.monotonic()
            written = engine.rewrite(layout, configuration, bins)
            out["written"] = [None if w is None else w.__dict__ for w in written]
            out["rewrite_seconds"] = round(time.monotonic() - started, 2)
        if spec.get("iceberg"):
            out["iceberg"] = _iceberg_delete_and_purge(engine, spec["iceberg"])
    finally:
        engine.stop()
    out["seconds"] = round(time.monotonic() - begun, 2)
    return out


def _iceberg_delete_and_purge(engine: Any, folder: str) -> dict[str, Any]:
    """On an Iceberg path table: a merge-on-read delete of `id % 3 = 0` (the Spark scan),
    then a purge (Spark rewrites); what they report."""
    from dvtool.commands.delete.command import DeleteRequest
    from dvtool.commands.delete.iceberg import run_delete_iceberg, scan_storage
    from dvtool.commands.optimize.iceberg import IcebergOptimizeRequest, run_optimize_iceberg
    from dvtool.iceberg.tables import open_iceberg

    table = open_iceberg(folder)
    request = DeleteRequest("id % 3 = 0", "dv")
    deleted = run_delete_iceberg(table, request, scan_storage(table, {}), engine=engine)
    purge = IcebergOptimizeRequest("purge")
    purged = run_optimize_iceberg(open_iceberg(folder), purge, lambda _size: engine)
    return {
        "deleted": deleted.metrics["numDeletedRows"],
        "purged": purged.metrics["rewrittenDataFiles"],
        "engine": purged.engine,
    }


def run_in_child(
    spec: dict[str, Any],
    workdir: Path,
    timeout: float = 240,
    worker_python: Path | None = None,
) -> dict[str, Any]:
    """`run_spec(spec)` in a new Python process (in `driver_env(worker_python)`); its result."""
    path = workdir / "spec.json"
    path.write_text(json.dumps(spec))
    done = subprocess.run(
        [sys.executable, "-m", "tests.engines.spark_cluster", str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=driver_env(worker_python),
        timeout=timeout,
        check=False,
    )
    marker = "DVTOOL-RESULT "
    lines = [line for line in done.stdout.splitlines() if line.startswith(marker)]
    if done.returncode != 0 or not lines:
        raise AssertionError(
            f"child exited {done.returncode}\nstdout:\n{done.stdout[-3000:]}\n"
            f"stderr:\n{done.stderr[-6000:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1][len(marker) :])
    return result


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text())
    result = run_spec(spec)
    print("DVTOOL-RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
