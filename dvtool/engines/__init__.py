"""Engines do the data-heavy work (scans and rewrites) behind one small interface (base.py).

`arrow` runs in-process on pyarrow; `spark` runs on a PySpark session (local, a cluster
master, or Spark Connect) and is the only package that imports pyspark, lazily, when chosen.
`auto` picks Spark when a master or remote is configured, when dvtool runs in a driver
spark-submit started (`in_spark_driver()`), or when the bytes to rewrite exceed the threshold
(default 1 GiB), arrow otherwise.

PySpark (with pandas, which its Arrow exchange needs) is the optional extra `dvtool[spark]`:
asking for Spark without it is a usage error saying what to install, while `auto` over the
threshold quietly stays on arrow. Rewrites on a local or standalone session need no pandas;
scans and Spark Connect do, and say so when it is missing.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dvtool.errors import UsageError

if TYPE_CHECKING:  # executors import dvtool.engines.* packages: keep this one light
    from dvtool.engines.base import Engine

ENGINES = ("auto", "arrow", "spark")
DEFAULT_SPARK_THRESHOLD = 1024**3
MASTER_ENV = "DVTOOL_SPARK_MASTER"
REMOTE_ENV = "DVTOOL_SPARK_REMOTE"
# PySpark's driver, when spark-submit started it, finds the JVM's gateway through these.
GATEWAY_ENV = "PYSPARK_GATEWAY_PORT"


def in_spark_driver() -> bool:
    """True in a Python driver that spark-submit started (its JVM runs and waits for it)."""
    return bool(os.environ.get(GATEWAY_ENV))


@dataclass(frozen=True)
class SparkSettings:
    """Where and how to run Spark: a master URL (default `local[*]`) or a Connect remote.

    In a driver spark-submit started, no master means spark-submit's session (its master and
    confs). `verbose` leaves the output and logging of a JVM dvtool starts alone (the CLI's
    `-v`); otherwise dvtool keeps them off the terminal (see `dvtool.engines.spark.session`).
    """

    master: str | None = None
    remote: str | None = None
    conf: Mapping[str, str] = field(default_factory=dict)
    verbose: bool = False

    @classmethod
    def from_options(
        cls,
        master: str | None,
        remote: str | None,
        conf: Mapping[str, str],
        verbose: bool = False,
    ) -> SparkSettings:
        """Options first, then DVTOOL_SPARK_MASTER / DVTOOL_SPARK_REMOTE."""
        master = master or os.environ.get(MASTER_ENV) or None
        remote = remote or os.environ.get(REMOTE_ENV) or None
        if master and remote:
            raise UsageError("--spark-master and --spark-remote cannot be used together")
        return cls(master, remote, dict(conf), verbose)

    @property
    def configured(self) -> bool:
        """A master or remote is set, or spark-submit runs dvtool (`auto` then uses Spark)."""
        return bool(self.master or self.remote) or in_spark_driver()


def missing_spark_packages(*, pandas: bool) -> list[str]:
    """Which of pyspark (and pandas, if `pandas`) are not installed, checked without importing."""
    names = ("pyspark", "pandas") if pandas else ("pyspark",)
    return [name for name in names if importlib.util.find_spec(name) is None]


def require_spark_packages(*, pandas: bool, purpose: str = "the Spark engine") -> None:
    """UsageError naming what to install unless the packages `purpose` needs are there."""
    missing = missing_spark_packages(pandas=pandas)
    if missing:
        raise UsageError(
            f"{purpose} needs {' and '.join(missing)}, which {'is' if len(missing) == 1 else 'are'}"
            " not installed",
            hint="pip install 'dvtool[spark]' (or 'dvtool[connect]' for --spark-remote), "
            "or use --engine arrow.",
        )


def choose_engine(
    name: str,
    spark: SparkSettings,
    bytes_to_process: int = 0,
    threshold: int = DEFAULT_SPARK_THRESHOLD,
) -> Engine:
    """The engine `--engine NAME` asks for; `auto` decides by configuration and size."""
    if name not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, not {name!r}")
    asked = name == "spark" or (name == "auto" and spark.configured)
    if asked:
        require_spark_packages(pandas=bool(spark.remote))
    big = name == "auto" and bytes_to_process > threshold
    if big and not asked and missing_spark_packages(pandas=False):
        big = False
    if asked or big:
        from dvtool.engines.spark.engine import SparkEngine

        return SparkEngine(spark)
    from dvtool.engines.arrow import ArrowEngine

    return ArrowEngine()
