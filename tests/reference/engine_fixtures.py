"""Fixtures of the reference engines, for every test folder: one session per engine per test
process (a plugin of tests/conftest.py, so tests/iceberg and tests/commands use the same
sessions and fixture tables as tests/reference, never a second copy).

Every test under tests/reference/, and every test elsewhere that uses an engine's fixture,
is marked `reference_engines` and put in an xdist group by the engine it uses:
`reference-delta:spark-written` (Delta Spark with the `spark_written` tables, built once),
`reference-delta:TEST` (Delta Spark, a self-contained test such as one long story; xdist's
workers collect these first, so they are handed out before the other one-test units),
`reference-iceberg-paimon`, or for the tests of dvtool's Iceberg writes
`reference-iceberg-writes` and `reference-iceberg-faults` (`ICEBERG_WRITE_GROUPS`), so with
`pytest -n 2 --dist loadgroup` the groups spread over the workers beside the rest of the
suite, and each engine's JVM starts at most once per worker (about 6 s with the jars cached;
the first run on a machine fetches them). The sessions are started on first use and
stopped (by process group) when the run ends.

`iceberg_tables` and `paimon_tables` are the cross-format fixture tables (Iceberg v2/v3 with
position deletes, deletion vectors and equality deletes, partition spec evolution,
compaction and expiry, Flink's upserts; Paimon with deletion vectors), built once per run by
tests/reference/iceberg_tables.py and paimon_tables.py (their docstrings say which tables
and how to build them by hand); the Iceberg ones once for all the workers
(`tests.shared_builds`), the Paimon ones by the one worker of their group.
`iceberg_sql_catalog`, `iceberg_rest_catalog` and `iceberg_s3_table` are Iceberg tables
behind a SQL (SQLite) catalog, a REST catalog server and on the S3 emulator
(tests/reference/iceberg_catalogs.py), each built on first use.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.engines.jvm_engines import DELTA_SPARK, ICEBERG_SPARK, PAIMON_JAVA, JvmSession, running
from tests.reference import iceberg_catalogs, spark_tables
from tests.reference import iceberg_tables as iceberg_tables_module
from tests.reference import paimon_tables as paimon_tables_module
from tests.s3_server import S3Server
from tests.shared_builds import shared_build

HERE = Path(__file__).resolve().parent
# The tests of dvtool's Iceberg writes, in groups of their own beside
# `reference-iceberg-paimon` (the read side, the commit layers, Paimon), so the Iceberg work
# spreads over the workers (they share one build of the fixture tables).
ICEBERG_WRITE_GROUPS = {
    "test_iceberg_delete.py": "reference-iceberg-writes",
    "test_iceberg_optimize_deletes.py": "reference-iceberg-writes",
    "test_iceberg_rewrite_deletes_where.py": "reference-iceberg-writes",
    "test_iceberg_concurrency.py": "reference-iceberg-writes",
    "test_iceberg_rewrites.py": "reference-iceberg-writes",
    "test_iceberg_split_compaction.py": "reference-iceberg-writes",
    "test_iceberg_maintain.py": "reference-iceberg-writes",
    "test_iceberg_spark_engine.py": "reference-iceberg-writes",
    "test_iceberg_faults.py": "reference-iceberg-faults",
    "test_iceberg_catalog_faults.py": "reference-iceberg-faults",
    "test_iceberg_races.py": "reference-iceberg-faults",
    "test_iceberg_write_catalogs.py": "reference-iceberg-faults",
}


DELTA_FIXTURES = {"delta_spark", "spark_written"}
ICEBERG_PAIMON_FIXTURES = {
    "iceberg_spark",
    "iceberg_tables",
    "iceberg_sql_catalog",
    "iceberg_rest_catalog",
    "iceberg_s3_table",
    "paimon_java",
    "paimon_tables",
}


def _group(item: pytest.Item) -> str | None:
    """The xdist group of a test by the engine fixtures it uses (directly or through other
    fixtures); None for a test that uses none outside tests/reference."""
    names = set(getattr(item, "fixturenames", ()))
    if "spark_written" in names:  # its tables are built once per worker: keep them on one
        return "reference-delta:spark-written"
    if names & DELTA_FIXTURES:  # self-contained (a story builds its own table): spread
        return f"reference-delta:{item.nodeid}"
    path = Path(str(item.path)).resolve()
    if path.parent == HERE and path.name in ICEBERG_WRITE_GROUPS:
        return ICEBERG_WRITE_GROUPS[path.name]
    if names & ICEBERG_PAIMON_FIXTURES or HERE in path.parents:
        return "reference-iceberg-paimon"
    return None


# First: xdist's worker plugin reads the groups in its own hook of this name, and a plugin of
# the top-level conftest is registered before it (hooks run last-registered first).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    alone = set()
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.reference_engines)
            item.add_marker(pytest.mark.xdist_group(group))
        if group is not None and group == f"reference-delta:{item.nodeid}":
            alone.add(item.nodeid)
    # xdist 3.8 hands out the groups with the most tests first, then the one-test units in
    # collection order: the self-contained Delta tests (a story each, up to two minutes) go
    # first among those, so that none is left for the end of the run beside an idle worker.
    # (Only in xdist's workers: a run in one process keeps the quick tests first.)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: item.nodeid not in alone)


@pytest.fixture(scope="session")
def delta_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JvmSession]:
    """Delta Spark (io.delta:delta-spark) in a local[2] session."""
    with running(DELTA_SPARK, tmp_path_factory.mktemp("delta-spark")) as session:
        yield session


@pytest.fixture(scope="session")
def iceberg_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JvmSession]:
    """Iceberg's Spark runtime in a local[2] session; catalog `local` (Hadoop, path-based)."""
    with running(ICEBERG_SPARK, tmp_path_factory.mktemp("iceberg-spark")) as session:
        yield session


@pytest.fixture(scope="session")
def paimon_java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JvmSession]:
    """Paimon's Java API (paimon-bundle) in a plain local Spark session's JVM."""
    with running(PAIMON_JAVA, tmp_path_factory.mktemp("paimon-java")) as session:
        yield session


@pytest.fixture(scope="module", params=list(spark_tables.SHAPES))
def spark_written(
    request: pytest.FixtureRequest,
    delta_spark: JvmSession,
    tmp_path_factory: pytest.TempPathFactory,
) -> spark_tables.SparkWritten:
    """Each table shape of tests/reference/spark_tables.py, built by Delta Spark's own DML
    once per worker; never modified by the tests (they copy it)."""
    root = tmp_path_factory.getbasetemp() / "spark-written"
    shape = spark_tables.SHAPES[request.param]
    return shape, spark_tables.built(delta_spark, root, request.param)


@pytest.fixture(scope="session")
def iceberg_tables(iceberg_spark: JvmSession) -> dict[str, Any]:
    """The Iceberg tables of tests/reference/iceberg_tables.py with their manifest entries:
    built once per run by the first test process to ask (`tests.shared_builds`), with its
    `iceberg_spark`, and attached to every process's `iceberg_spark` as
    `fixture.fixtures.NAME`; read-only, shared by the processes (see that module)."""

    def build(out: Path) -> None:
        out.mkdir()
        iceberg_tables_module.build_all(iceberg_spark, out)

    out = shared_build("iceberg-tables", build)
    iceberg_tables_module.attach_fixtures(iceberg_spark, out)
    return iceberg_tables_module.load_manifest(out / "iceberg-manifest.json")


@pytest.fixture(scope="session")
def iceberg_sql_catalog(
    iceberg_spark: JvmSession, tmp_path_factory: pytest.TempPathFactory
) -> iceberg_catalogs.CatalogTable:
    """A v3 table in Iceberg's JdbcCatalog on a SQLite file, which pyiceberg's SqlCatalog
    reads (`load_catalog(t.name, **t.properties).load_table(t.identifier)`)."""
    root = tmp_path_factory.mktemp("iceberg-sql-catalog")
    return iceberg_catalogs.build_sql_catalog_table(iceberg_spark, root)


@pytest.fixture(scope="session")
def iceberg_rest_catalog(
    iceberg_spark: JvmSession, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[iceberg_catalogs.CatalogTable]:
    """A v2 table written through Iceberg's REST catalog fixture server (a java process on
    127.0.0.1, stopped when the run ends); `properties` has its URI."""
    root = tmp_path_factory.mktemp("iceberg-rest-catalog")
    with iceberg_catalogs.rest_catalog_server(root) as url:
        yield iceberg_catalogs.build_rest_catalog_table(iceberg_spark, url)


@pytest.fixture(scope="session")
def iceberg_s3_table(
    iceberg_spark: JvmSession, s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory
) -> iceberg_catalogs.CatalogTable:
    """A v3 table on the moto S3 emulator (Iceberg's S3FileIO), cataloged in SQLite;
    `properties` has the `s3.*` settings pyiceberg needs."""
    root = tmp_path_factory.mktemp("iceberg-s3-catalog")
    return iceberg_catalogs.build_s3_table(iceberg_spark, s3_server, root)


@pytest.fixture(scope="session")
def paimon_tables(
    paimon_java: JvmSession, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The Paimon tables of tests/reference/paimon_tables.py with their manifest entries,
    built once per run with `paimon_java`: copy one (`copy_table`) before writing to it."""
    out = tmp_path_factory.mktemp("paimon-tables")
    manifest: dict[str, Any] = json.loads(
        paimon_tables_module.build_all(paimon_java, out).read_text()
    )
    return manifest
