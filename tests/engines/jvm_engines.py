"""The reference engines in tests: Delta Spark, Iceberg's Spark runtime and Paimon's Java API.

`start(engine, workdir)` gives a `JvmSession`: one classic local Spark session with that
engine's jars, in a child process (tests/engines/jvm_worker.py says why), bound to 127.0.0.1
and stopped by its process group. Requests: `sql(statement)`, `arrow(query) -> pa.Table`,
`python(code, **args)` (PySpark code with `spark`, `jvm` and `args`; used for the Paimon
Java API, which has no Spark bundle served here). An engine's refusal raises `JvmError` with
the Java exception's class and message.

Versions: every engine runs on the pip-installed PySpark, which must be the Spark line the
engines' jars are built for (`SPARK_LINE`); the test extra pins it. The jars come from Maven
Central through Spark's own Ivy (`spark.jars.packages`) with our Ivy settings (Maven Central
only, or `$DVTOOL_MAVEN_REPO`), into one cache folder per machine (`$DVTOOL_JVM_CACHE`,
default `~/.cache/dvtool-tests/jvm`): the first session fetches them (about 150 MB, once),
later ones resolve from the cache offline-fast. A file lock keeps two test workers from
fetching into the cache at the same time.

`python -m tests.engines.jvm_engines fetch` fetches every engine's jars and installs
pypaimon's environment (CI runs it before pytest, so no test pays for the download and a
registry failure names itself).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import selectors
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tests.engines.spark_cluster import LOCALHOST, REPO, Server, spark_env

SPARK_LINE = "4.1"
SCALA = "2.13"
DELTA_VERSION = "4.4.0"
ICEBERG_VERSION = "1.12.0"
PAIMON_VERSION = "1.4.2"
SQLITE_JDBC_VERSION = "3.51.1.0"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
# Small local sessions: two cores, few partitions, UTC, loopback, no UI or progress bars.
BASE_CONF = {
    "spark.driver.host": LOCALHOST,
    "spark.driver.bindAddress": LOCALHOST,
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    # Interpreted expressions, no whole-stage code generation: on the tests' few rows,
    # compiling each query's generated Java costs more than running it (a Delta Spark story
    # of tests/reference/test_delta_spark_reads.py took 84 s instead of 117 s). Spark
    # computes the same results either way (codegen falls back to the interpreted path);
    # only these reference engines run so, never dvtool's own Spark engine, the Spark whose
    # predicate semantics the tests compare (tests/predicate) or a benchmark's Spark peer
    # (PRODUCTION_JVM restores Spark's defaults).
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


@dataclass(frozen=True)
class Engine:
    """A reference engine: the Maven coordinates of its jars and its session settings."""

    name: str
    packages: tuple[str, ...]
    conf: dict[str, str] = field(default_factory=dict)

    def spark_conf(self, workdir: Path, overrides: dict[str, str] | None = None) -> dict[str, str]:
        conf = {**BASE_CONF, **self.conf, **(overrides or {})}
        conf = {k: v.replace("{workdir}", str(workdir)) for k, v in conf.items()}
        conf["spark.jars.packages"] = ",".join(self.packages)
        conf["spark.jars.ivySettings"] = str(ivy_settings())
        conf["spark.jars.ivy"] = str(cache_dir() / "ivy")
        conf["spark.local.dir"] = str(workdir / "spark-local")
        conf["spark.sql.warehouse.dir"] = str(workdir / "spark-warehouse")
        return conf


DELTA_SPARK = Engine(
    "delta-spark",
    (f"io.delta:delta-spark_{SPARK_LINE}_{SCALA}:{DELTA_VERSION}",),
    {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        # Few partitions for the log replay of small test tables, and VACUUM with a short
        # retention (the tests pick the retention; Delta's 7-day check is for people).
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.databricks.delta.retentionDurationCheck.enabled": "false",
    },
)
ICEBERG_SPARK = Engine(
    "iceberg-spark",
    (
        f"org.apache.iceberg:iceberg-spark-runtime-{SPARK_LINE}_{SCALA}:{ICEBERG_VERSION}",
        # For the catalog fixtures (tests/reference/iceberg_catalogs.py): JdbcCatalog on
        # SQLite, and S3FileIO.
        f"org.xerial:sqlite-jdbc:{SQLITE_JDBC_VERSION}",
        f"org.apache.iceberg:iceberg-aws-bundle:{ICEBERG_VERSION}",
    ),
    {
        "spark.sql.extensions": (
            "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
        ),
        # `local`: a Hadoop (path) catalog under the session's folder.
        "spark.sql.catalog.local": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.local.type": "hadoop",
        "spark.sql.catalog.local.warehouse": "{workdir}/iceberg-warehouse",
    },
)
# Paimon publishes no Spark bundle for Spark 4.1 on the registry these machines reach (only
# paimon-spark-3.5 0.9.0), so its engine is Paimon's own Java API (paimon-bundle) in a
# plain Spark session, whose JVM brings the Hadoop classes Paimon's file formats need.
PAIMON_JAVA = Engine("paimon-java", (f"org.apache.paimon:paimon-bundle:{PAIMON_VERSION}",))
ENGINES = {e.name: e for e in (DELTA_SPARK, ICEBERG_SPARK, PAIMON_JAVA)}


class JvmError(Exception):
    """A request the engine refused or failed: the (Java) exception's class and message."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(f"{error}: {message}")
        self.error = error
        self.message = message


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "dvtool-tests" / "jvm"
    path = Path(os.environ.get("DVTOOL_JVM_CACHE", default))
    path.mkdir(parents=True, exist_ok=True)
    return path


def ivy_settings() -> Path:
    """Ivy settings: Maven Central (or $DVTOOL_MAVEN_REPO) only, cached in `cache_dir()`."""
    cache = cache_dir()
    root = os.environ.get("DVTOOL_MAVEN_REPO", MAVEN_CENTRAL)
    text = f"""<ivysettings>
  <settings defaultResolver="central"/>
  <caches defaultCacheDir="{cache}/ivy-cache" resolutionCacheDir="{cache}/ivy-resolution"/>
  <resolvers>
    <ibiblio name="central" m2compatible="true" root="{root}"/>
  </resolvers>
</ivysettings>
"""
    path = cache / "ivysettings.xml"
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


@contextlib.contextmanager
def _cache_lock() -> Iterator[None]:
    with open(cache_dir() / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def check_pyspark() -> None:
    """The engines' jars are built for SPARK_LINE: refuse another PySpark, saying so."""
    import pyspark

    if not pyspark.__version__.startswith(SPARK_LINE + "."):
        raise RuntimeError(
            f"the reference engines need PySpark {SPARK_LINE}.x (found {pyspark.__version__});"
            " install the test extra: pip install -e '.[test]'"
        )


@dataclass
class JvmSession:
    """A reference engine's Spark session in a child process (see the module docstring)."""

    engine: Engine
    server: Server
    workdir: Path
    timeout: float = 900.0
    _selector: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)

    def request(self, **request: Any) -> dict[str, Any]:
        process = self.server.process
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write((json.dumps(request) + "\n").encode())
        process.stdin.flush()
        return self._answer()

    def _answer(self) -> dict[str, Any]:
        process = self.server.process
        assert process.stdout is not None
        if not self._selector.get_map():
            self._selector.register(process.stdout, selectors.EVENT_READ)
        if not self._selector.select(self.timeout):
            raise TimeoutError(f"{self.engine.name}: no answer in {self.timeout}s")
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.engine.name} exited: {self.server.log_tail()}")
        answer: dict[str, Any] = json.loads(line)
        if not answer.get("ok"):
            raise JvmError(answer.get("error", "?"), answer.get("message", ""))
        return answer

    def sql(self, statement: str) -> None:
        """Run one SQL statement (DDL, DML, CALL ...) to completion."""
        self.request(op="sql", sql=statement)

    def arrow(self, query: str) -> pa.Table:
        """The result of a query as an Arrow table."""
        with tempfile.NamedTemporaryFile(dir=self.workdir, suffix=".arrow") as out:
            self.request(op="arrow", sql=query, path=out.name)
            with pa.memory_map(out.name) as source:
                return pa.ipc.open_file(source).read_all()

    def rows(self, query: str) -> list[dict[str, Any]]:
        """The result of a query as Python rows (small results)."""
        return self.arrow(query).to_pylist()

    def python(self, code: str, **args: Any) -> Any:
        """Run PySpark code in the engine's process: `spark`, `jvm`, `args`; set `result`."""
        return self.request(op="python", code=code, args=args).get("result")

    def stop(self) -> None:
        process = self.server.process
        with contextlib.suppress(OSError, ValueError):
            if process.poll() is None and process.stdin is not None:
                process.stdin.write(b'{"op": "stop"}\n')
                process.stdin.flush()
                process.wait(timeout=60)
        self.server.stop()


# For benchmarks: the JVM and Spark as a production driver runs them (both JIT tiers, the
# default collector, Spark's own code generation), not the quick-start settings of BASE_CONF,
# which favour short test sessions.
PRODUCTION_JVM = {
    "spark.driver.extraJavaOptions": "-XX:+UseG1GC",
    "spark.driver.memory": "4g",
    "spark.sql.codegen.wholeStage": "true",
    "spark.sql.codegen.factoryMode": "FALLBACK",
}


def start(engine: Engine, workdir: Path, conf: dict[str, str] | None = None) -> JvmSession:
    """Start `engine`'s session under `workdir` (`conf` overrides settings); the first
    start on a machine fetches the jars."""
    check_pyspark()
    workdir.mkdir(parents=True, exist_ok=True)
    conf_path = workdir / f"{engine.name}.json"
    spark_conf = engine.spark_conf(workdir, conf)
    name = f"dvtool-tests-{engine.name}"
    conf_path.write_text(json.dumps({"name": name, "spark_conf": spark_conf}))
    log = workdir / f"{engine.name}.log"
    env = spark_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    with _cache_lock(), open(log, "wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.engines.jvm_worker", str(conf_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=workdir,
            env=env,
            start_new_session=True,
        )
        session = JvmSession(engine, Server(engine.name, process, log), workdir)
        try:
            session._answer()
        except BaseException:
            session.server.stop()
            raise
    return session


@contextlib.contextmanager
def running(
    engine: Engine, workdir: Path, conf: dict[str, str] | None = None
) -> Iterator[JvmSession]:
    """`start(...)` for a with block: the session is stopped when it ends."""
    session = start(engine, workdir, conf)
    try:
        yield session
    finally:
        session.stop()


def builder_main(
    argv: list[str], module: str, engine: Engine, build_all: Callable[[JvmSession, Path], Path]
) -> int:
    """`python -m MODULE OUT_DIR` for a fixture builder: build into OUT_DIR, print the
    manifest's path."""
    if len(argv) != 1:
        print(f"usage: python -m {module} OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0]).resolve()
    with running(engine, out) as session:
        print(build_all(session, out))
    return 0


def fetch_all(workdir: Path) -> None:
    """Start and stop each engine once, so its jars are in the cache; resolve the jars of
    the Iceberg REST catalog server the tests run beside them; install pypaimon's own
    environment beside the jars (tests/engines/pypaimon_env.py)."""
    from tests.engines import pypaimon_env
    from tests.reference.iceberg_catalogs import rest_server_classpath

    for engine in ENGINES.values():
        start(engine, workdir / engine.name).stop()
    rest_server_classpath()
    pypaimon_env.ensure()


if __name__ == "__main__":
    if sys.argv[1:] != ["fetch"]:
        sys.exit("usage: python -m tests.engines.jvm_engines fetch")
    with tempfile.TemporaryDirectory(prefix="dvtool-jvm-fetch-") as tmp:
        fetch_all(Path(tmp))
    print(f"reference engine jars cached in {cache_dir()}")
