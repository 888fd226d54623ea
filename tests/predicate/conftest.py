"""One local Spark session (session time zone UTC) for the Spark-checked predicate tests.

The modules that use it mark their Spark tests `xdist_group("spark-predicates")`, so that
`-n 2 --dist loadgroup` runs them all on one worker, one after the other. They share one
session (one JVM start, not one per module), which is stopped as soon as the test process
moves on to a module that does not use it (`pytest_runtest_teardown`), like every other
Spark test here: a session kept for the whole run once shared its worker with a
segmentation fault in an unrelated test, py4j's threads busy.
"""

from __future__ import annotations

from typing import Any

import pytest

_session: list[Any] = []  # the running session, if any


def _start() -> Any:
    """A `local[1]` SparkSession with the engine tests' driver settings, in UTC."""
    from pyspark.sql import SparkSession

    from tests.engines.spark_cluster import DRIVER_CONF

    builder = SparkSession.builder.master("local[1]").appName("dvtool-predicates")
    settings = {**DRIVER_CONF, "spark.sql.session.timeZone": "UTC", "spark.log.level": "ERROR"}
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


@pytest.fixture(scope="module")
def spark() -> Any:
    """The shared session, started by the first test that uses it."""
    if not _session:
        _session.append(_start())
    return _session[0]


@pytest.hookimpl(trylast=True)  # after the fixtures' own teardown
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the session when the next test neither uses it nor is in the same module (a
    module's fixtures that build on the session, such as views, live as long as it does)."""
    if not _session:
        return
    leaves = nextitem is None or (
        nextitem.path != item.path and "spark" not in getattr(nextitem, "fixturenames", ())
    )
    if leaves:
        _session.pop().stop()
