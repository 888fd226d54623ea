"""A local Spark session (session time zone UTC) per module of Spark-checked predicate tests.

The modules that use it mark their Spark tests `xdist_group("spark-predicates")`, so that
`-n 2 --dist loadgroup` runs them on one worker, one JVM at a time; each module stops its
session when it ends, like every other Spark test here (a session kept for the whole run
once shared its worker with a segmentation fault in an unrelated test, py4j's threads busy).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A `local[1]` SparkSession with the engine tests' driver settings, in UTC."""
    from pyspark.sql import SparkSession

    from tests.engines.spark_cluster import DRIVER_CONF

    builder = SparkSession.builder.master("local[1]").appName("dvtool-predicates")
    settings = {**DRIVER_CONF, "spark.sql.session.timeZone": "UTC", "spark.log.level": "ERROR"}
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    try:
        yield session
    finally:
        session.stop()
