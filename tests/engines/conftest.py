"""Fixtures for the Spark engine tests: Spark servers on 127.0.0.1, stopped by process id.

The helpers live in spark_cluster.py; pyspark is imported only when a fixture is used.
`spark_engine` is one local SparkEngine per module (its session created by the first call,
stopped after the module's tests). `spark_standalone` and `spark_connect` give the workers
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


@pytest.fixture(scope="module")
def spark_engine() -> Iterator[SparkEngine]:
    """The module's one local Spark session (created lazily by the first call)."""
    from dvtool.engines import SparkSettings
    from dvtool.engines.spark.engine import SparkEngine
    from tests.engines.spark_cluster import DRIVER_CONF

    spark = SparkEngine(SparkSettings(master="local[2]", conf=DRIVER_CONF))
    try:
        yield spark
    finally:
        spark.stop()


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
