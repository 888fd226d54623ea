"""Fixtures for the Spark engine tests: Spark servers on 127.0.0.1, stopped by process id.

The helpers live in spark_cluster.py; pyspark is imported only when a fixture is used.
`spark_engine` is one local SparkEngine for the test process, shared by the modules that use
it: their tests that use it are put in the xdist group `spark-engine` (`SPARK_ENGINE`; a test
that asks for it by `request.getfixturevalue` is marked so by hand), so that with
`-n 2 --dist loadgroup` they run on one worker, one after the other, on one session (one
JVM start, not one per module and worker). Its session is created by the first call and
stopped as soon as the process moves on to a test neither in the group nor in the same
module (`pytest_runtest_teardown`), as in tests/predicate/conftest.py: a session kept for the
whole run once shared its worker with a segmentation fault in an unrelated test; a later
test of the group starts it again. `spark_standalone` and `spark_connect` give the workers
this venv's interpreter and the repository; `stock_standalone` and `stock_connect` (one per
module) give them the stock interpreter of stock_python.py (pyarrow, pandas, numpy only), as
on a real cluster, and check with a Spark job that the executors really run it and cannot
import dvtool.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from dvtool.engines.spark.engine import SparkEngine
    from tests.engines.spark_cluster import Server


SPARK_ENGINE = pytest.mark.xdist_group("spark-engine")
_engines: list[SparkEngine] = []  # the process's engine, once a test asked for it


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (see engine_fixtures.py)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "spark_engine" in getattr(item, "fixturenames", ()):
            item.add_marker(SPARK_ENGINE)


def _in_group(item: pytest.Item) -> bool:
    return any(m.args == SPARK_ENGINE.args for m in item.iter_markers("xdist_group"))


@pytest.fixture(scope="session")
def spark_engine() -> Iterator[SparkEngine]:
    """The process's one local SparkEngine (its session created lazily by the first call,
    stopped when the process leaves the group `spark-engine`, see the module docstring)."""
    from dvtool.engines import SparkSettings
    from dvtool.engines.spark.engine import SparkEngine
    from tests.engines.spark_cluster import DRIVER_CONF

    spark = SparkEngine(SparkSettings(master="local[2]", conf=DRIVER_CONF))
    _engines.append(spark)
    try:
        yield spark
    finally:
        _engines.remove(spark)
        spark.stop()


@pytest.hookimpl(trylast=True)  # after the fixtures' own teardown
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the engine's session when the next test is neither in its group nor in the same
    module (the engine starts a new one if a later test of the group asks)."""
    if _engines and (nextitem is None or (nextitem.path != item.path and not _in_group(nextitem))):
        _engines[0].stop()


@pytest.fixture
def spark_standalone(tmp_path: Path) -> Iterator[Server]:
    """A standalone master and one ALIVE worker; killed (process groups) afterwards."""
    from tests.engines.spark_cluster import start_standalone

    server = start_standalone(tmp_path / "standalone")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def spark_connect(tmp_path: Path) -> Iterator[Server]:
    """A Spark Connect server; killed (process group) afterwards."""
    from tests.engines.spark_cluster import start_connect

    server = start_connect(tmp_path / "connect")
    try:
        yield server
    finally:
        server.stop()


def _stock_server(
    factory: pytest.TempPathFactory, name: str, start: Callable[..., Server]
) -> Iterator[Server]:
    """`start(workdir, worker_python=stock_python())`, probed, then killed afterwards."""
    from tests.engines.stock_python import probe_executors, stock_python

    workdir = factory.mktemp(name)
    server = start(workdir / "server", worker_python=stock_python())
    try:
        probe_executors(server, workdir / "probe")
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def stock_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A standalone master and worker whose executors run the stock Python (module-wide).

    Drivers must run in `server.driver_env()` (PYSPARK_PYTHON is the stock interpreter).
    """
    from tests.engines.spark_cluster import start_standalone

    yield from _stock_server(tmp_path_factory, "stock-standalone", start_standalone)


@pytest.fixture(scope="module")
def stock_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A Spark Connect server whose executors run the stock Python (module-wide)."""
    from tests.engines.spark_cluster import start_connect

    yield from _stock_server(tmp_path_factory, "stock-connect", start_connect)
