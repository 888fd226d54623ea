"""Iceberg tables behind real catalogs and object storage, written by Iceberg's Spark runtime.

Each builder writes one table (schema and steps from tests/reference/iceberg_tables.py,
expected rows from intent) through a catalog other than the path-based `local` one, in the
`iceberg_spark` session (the catalog is configured at run time: Spark loads a catalog from
the session's settings on first use), and returns a `CatalogTable`: the pyiceberg catalog
properties that load it, its identifier, its metadata location and its expected rows.

- `build_sql_catalog_table`: Iceberg's `JdbcCatalog` on a SQLite file (the sqlite-jdbc
  driver is one of the `iceberg-spark` engine's packages); pyiceberg's `SqlCatalog` reads
  the same file (`pyiceberg[sql-sqlite]`, catalog name = the Spark catalog's name, which
  JdbcCatalog stores in every row).
- `rest_catalog_server` and `build_rest_catalog_table`: Iceberg's REST catalog test fixture
  (`org.apache.iceberg.rest.RESTCatalogServer`, what the apache/iceberg-rest-fixture image
  runs; backed by a JdbcCatalog on SQLite) as a java process on a free port, stopped by its
  process group. Maven Central serves its classes as `iceberg-open-api:1.11.0` classifier
  `test-fixtures` (no 1.12.0, and no shaded `test-fixtures-runtime` artifact), so the
  server runs Iceberg 1.11.0's core (REST is a wire protocol: the 1.12 Spark client and
  pyiceberg talk to it); `rest_server_classpath` resolves its jars with Spark's own Ivy
  into the harness cache (`python -m tests.engines.jvm_engines fetch` does it too). The
  server takes no host setting (Jetty binds every interface of the machine); the clients
  reach it at 127.0.0.1.
- `build_s3_table`: a JdbcCatalog (SQLite) whose warehouse is on the moto S3 emulator
  (tests/s3_server.py), written with Iceberg's `S3FileIO` (iceberg-aws-bundle, path-style
  requests to the emulator's endpoint); pyiceberg reads it with its `s3.*` properties.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.engines.jvm_engines import (
    SQLITE_JDBC_VERSION,
    JvmSession,
    _cache_lock,
    cache_dir,
    ivy_settings,
)
from tests.engines.spark_cluster import LOCALHOST, Server
from tests.reference.iceberg_tables import (
    TableSpec,
    configure_catalog,
    create_sql,
    delete_multiples,
    expected_rows,
    insert,
    make_rows,
)
from tests.s3_server import KEY_ID, REGION, SECRET, S3Server

Row = dict[str, Any]
REST_FIXTURE_VERSION = "1.11.0"
JETTY_VERSION = "12.1.14"
START_TIMEOUT_S = 120.0
NAMESPACE = "catalogs"
# Short histories (an insert, a delete): what matters here is the catalog and the storage.
CATALOG_STEPS = (insert(make_rows(0, 40)), delete_multiples(7))
SQL_TABLE = TableSpec("sql_v3", 3, None, CATALOG_STEPS)
REST_TABLE = TableSpec("rest_v2", 2, None, CATALOG_STEPS)
S3_TABLE = TableSpec("s3_v3", 3, None, CATALOG_STEPS)

LOOPBACK_LAUNCHER = Path(__file__).with_name("LoopbackRestServer.java")


@dataclass(frozen=True)
class CatalogTable:
    """A table behind a catalog: `pyiceberg.catalog.load_catalog(name, **properties)`
    loads `identifier`, whose current metadata file is `metadata`."""

    name: str
    properties: dict[str, str]
    identifier: str
    metadata: str
    expected: list[Row]


def build_in_catalog(session: JvmSession, catalog: str, spec: TableSpec) -> tuple[str, str]:
    """Create and write `spec`'s table in `catalog` (SQL steps only); its identifier in the
    catalog and its current metadata file."""
    table = f"{catalog}.{NAMESPACE}.{spec.name}"
    session.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{NAMESPACE}")
    session.sql(create_sql(spec, table))
    for step in spec.steps:
        assert step.run is None, "catalog tables are written with SQL only"
        session.sql(step.sql.format(t=table, n=f"{NAMESPACE}.{spec.name}", c=catalog))
    latest = f"SELECT file FROM {table}.metadata_log_entries ORDER BY timestamp DESC LIMIT 1"
    return f"{NAMESPACE}.{spec.name}", str(session.rows(latest)[0]["file"])


def catalog_table(
    name: str, properties: dict[str, str], identifier: str, metadata: str, spec: TableSpec
) -> CatalogTable:
    return CatalogTable(name, properties, identifier, metadata, expected_rows(spec))


def build_sql_catalog_table(session: JvmSession, root: Path) -> CatalogTable:
    """A v3 table (deletion vectors) in a JdbcCatalog on the SQLite file root/catalog.db
    (its V1 schema, which also holds views, as Iceberg's REST fixture uses)."""
    root.mkdir(parents=True, exist_ok=True)
    database, warehouse = root / "catalog.db", root / "warehouse"
    settings = {"type": "jdbc", "uri": f"jdbc:sqlite:{database}", "warehouse": str(warehouse)}
    configure_catalog(session, "sqlcat", {**settings, "jdbc.schema-version": "V1"})
    identifier, metadata = build_in_catalog(session, "sqlcat", SQL_TABLE)
    properties = {"type": "sql", "uri": f"sqlite:///{database}", "warehouse": str(warehouse)}
    return catalog_table("sqlcat", properties, identifier, metadata, SQL_TABLE)


# The REST fixture server's jars (Ivy module file): its classes, Iceberg core and its test
# classes (the servlet), Jetty 12 (ee10 servlet, compression), the SQLite JDBC driver.
REST_IVY_MODULE = f"""<ivy-module version="2.0" xmlns:m="http://ant.apache.org/ivy/maven">
  <info organisation="dvtool-tests" module="iceberg-rest-fixture"/>
  <configurations><conf name="default"/></configurations>
  <dependencies defaultconf="default->default(*),master(*)">
    <dependency org="org.apache.iceberg" name="iceberg-core" rev="{REST_FIXTURE_VERSION}">
      <artifact name="iceberg-core" type="jar"/>
      <artifact name="iceberg-core" type="jar" m:classifier="tests"/>
    </dependency>
    <dependency org="org.apache.iceberg" name="iceberg-open-api" rev="{REST_FIXTURE_VERSION}">
      <artifact name="iceberg-open-api" type="jar" m:classifier="test-fixtures"/>
    </dependency>
    <dependency org="org.eclipse.jetty.ee10" name="jetty-ee10-servlet" rev="{JETTY_VERSION}"/>
    <dependency org="org.eclipse.jetty.compression" name="jetty-compression-server"
                rev="{JETTY_VERSION}"/>
    <dependency org="org.eclipse.jetty.compression" name="jetty-compression-gzip"
                rev="{JETTY_VERSION}"/>
    <dependency org="org.xerial" name="sqlite-jdbc" rev="{SQLITE_JDBC_VERSION}"/>
    <dependency org="org.slf4j" name="slf4j-simple" rev="2.0.17"/>
  </dependencies>
</ivy-module>
"""


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def hadoop_jars() -> list[str]:
    """Hadoop's client jars as PySpark ships them (the server's HadoopFileIO needs them)."""
    return sorted(str(p) for p in pyspark_jars().glob("hadoop-client-*.jar"))


def rest_server_classpath() -> str:
    """The REST fixture server's classpath, resolved once per machine into the harness's
    cache (Spark's Ivy, the harness's settings: Maven Central or $DVTOOL_MAVEN_REPO)."""
    digest = hashlib.sha256(REST_IVY_MODULE.encode()).hexdigest()[:16]
    listing = cache_dir() / f"iceberg-rest-fixture-{digest}.classpath"
    with _cache_lock():
        if not listing.exists() or not all(
            Path(p).is_file() for p in listing.read_text().strip().split(os.pathsep)
        ):
            _resolve(listing)
    return os.pathsep.join([listing.read_text().strip(), *hadoop_jars()])


def _resolve(listing: Path) -> None:
    module = listing.with_suffix(".ivy.xml")
    module.write_text(REST_IVY_MODULE)
    ivy = next(pyspark_jars().glob("ivy-*.jar"))
    command = ["java", "-jar", str(ivy), "-settings", str(ivy_settings()), "-ivy", str(module)]
    command += ["-confs", "default", "-cachepath", str(listing)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0 or not listing.exists():
        raise RuntimeError(f"resolving the REST fixture server's jars failed:\n{done.stdout}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOCALHOST, 0))
        return int(probe.getsockname()[1])


def _wait_until_serving(server: Server, url: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}v1/config", timeout=5):
            return
        if server.process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the REST catalog server did not start:\n{server.log_tail()}")
        time.sleep(0.2)


@contextlib.contextmanager
def rest_catalog_server(root: Path) -> Iterator[str]:
    """Iceberg's REST catalog fixture server (warehouse and SQLite catalog under `root`) on
    a free port of 127.0.0.1 only (LoopbackRestServer.java: Iceberg's RESTCatalogServer
    binds every interface); yields its URL. Stopped by its process group."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx512m"]
    command += ["-cp", rest_server_classpath(), str(LOOPBACK_LAUNCHER), str(port)]
    command += [str(root / "warehouse"), f"jdbc:sqlite:{root / 'catalog.db'}"]
    log = root / "rest-server.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = Server("iceberg-rest", process, log, url=f"http://{LOCALHOST}:{port}/")
    try:
        _wait_until_serving(server, server.url)
        yield server.url
    finally:
        server.stop()


def build_rest_catalog_table(session: JvmSession, url: str) -> CatalogTable:
    """A v2 table (position deletes) written by Spark through the REST catalog at `url`."""
    configure_catalog(session, "restcat", {"type": "rest", "uri": url})
    identifier, metadata = build_in_catalog(session, "restcat", REST_TABLE)
    return catalog_table("restcat", {"type": "rest", "uri": url}, identifier, metadata, REST_TABLE)


def s3_properties(s3: S3Server) -> dict[str, str]:
    """The FileIO properties of the emulator, as both Iceberg Java and pyiceberg name them."""
    return {
        "s3.endpoint": s3.endpoint,
        "s3.access-key-id": KEY_ID,
        "s3.secret-access-key": SECRET,
        "s3.path-style-access": "true",
        "s3.region": REGION,
        "client.region": REGION,
    }


def build_s3_table(session: JvmSession, s3: S3Server, root: Path) -> CatalogTable:
    """A v3 table on the S3 emulator (S3FileIO), its catalog a JdbcCatalog on SQLite."""
    root.mkdir(parents=True, exist_ok=True)
    database, warehouse = root / "catalog.db", s3.uri("iceberg-warehouse")
    io = s3_properties(s3)
    settings = {"type": "jdbc", "uri": f"jdbc:sqlite:{database}", "warehouse": warehouse}
    settings |= {"io-impl": "org.apache.iceberg.aws.s3.S3FileIO", **io}
    configure_catalog(session, "s3cat", settings)
    identifier, metadata = build_in_catalog(session, "s3cat", S3_TABLE)
    properties = {"type": "sql", "uri": f"sqlite:///{database}", "warehouse": warehouse, **io}
    return catalog_table("s3cat", properties, identifier, metadata, S3_TABLE)
