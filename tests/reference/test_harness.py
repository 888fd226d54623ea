"""The reference-engine harness itself: versions, requests, refusals, a session that dies."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.engines.jvm_engines import (
    DELTA_VERSION,
    SPARK_LINE,
    JvmError,
    JvmSession,
    cache_dir,
)


def test_delta_spark_runs_the_pinned_versions(delta_spark: JvmSession) -> None:
    spark_version = delta_spark.rows("SELECT version() AS v")[0]["v"]
    assert spark_version.startswith(SPARK_LINE + ".")
    code = (
        "loader = jvm.java.lang.Thread.currentThread().getContextClassLoader();"
        "cls = jvm.java.lang.Class.forName('org.apache.spark.sql.delta.DeltaLog', True, loader);"
        "result = str(cls.getProtectionDomain().getCodeSource().getLocation().getPath())"
    )
    jar = Path(delta_spark.python(code)).name
    assert jar == f"io.delta_delta-spark_{SPARK_LINE}_2.13-{DELTA_VERSION}.jar"


def test_delta_spark_jars_come_from_the_cache(delta_spark: JvmSession) -> None:
    jars = delta_spark.python("result = spark.sparkContext.getConf().get('spark.jars')")
    assert all(str(cache_dir()) in jar for jar in jars.split(","))
    assert any("delta-spark" in jar for jar in jars.split(","))


def test_a_refusal_names_the_exception_and_the_session_stays_up(
    delta_spark: JvmSession, tmp_path: Path
) -> None:
    with pytest.raises(JvmError) as refused:
        delta_spark.sql(f"SELECT * FROM delta.`{tmp_path / 'missing'}`")
    assert "is not a Delta table" in refused.value.message or "PATH_NOT_FOUND" in str(refused.value)
    table = tmp_path / "t"
    delta_spark.sql(f"CREATE TABLE delta.`{table}` (id BIGINT) USING delta")
    delta_spark.sql(f"INSERT INTO delta.`{table}` SELECT id FROM range(5)")
    assert delta_spark.rows(f"SELECT sum(id) AS s FROM delta.`{table}`") == [{"s": 10}]


def test_python_requests_return_json_values(delta_spark: JvmSession) -> None:
    assert delta_spark.python("result = [args['a'] * 2, None]", a=21) == [42, None]
    with pytest.raises(JvmError, match="ZeroDivisionError"):
        delta_spark.python("result = 1 / 0")


def test_a_refusal_spark_cannot_format_keeps_the_session_up(
    delta_spark: JvmSession, tmp_path: Path
) -> None:
    """Delta 4.4 refuses `VERSION AS OF` beyond delta.deletedFileRetentionDuration with a
    condition Spark 4.1's error catalogue lacks, so pyspark's getMessage throws: the worker
    still answers with the refusal and stays up."""
    table = tmp_path / "t"
    delta_spark.sql(f"CREATE TABLE delta.`{table}` (id BIGINT) USING delta")
    delta_spark.sql(f"INSERT INTO delta.`{table}` SELECT id FROM range(3)")
    old = time.time() - 8 * 24 * 3600
    os.utime(table / "_delta_log" / f"{0:020d}.json", (old, old))
    with pytest.raises(JvmError) as refused:
        delta_spark.rows(f"SELECT * FROM delta.`{table}` VERSION AS OF 0")
    assert "DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION" in str(
        refused.value
    )
    assert delta_spark.rows(f"SELECT count(*) AS n FROM delta.`{table}`") == [{"n": 3}]
