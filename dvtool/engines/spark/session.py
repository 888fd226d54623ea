"""The Spark session: creating it, its SQL confs, and progress from its status tracker.

Session. `SparkSession.builder` with `.master(settings.master or "local[*]")`, or
`.remote(settings.remote)` for Spark Connect (`sc://host:port`), then every
`settings.conf` item as `.config(key, value)`. dvtool sets `spark.sql.session.timeZone=UTC`
and `spark.sql.ansi.enabled=true` on the session (its predicate semantics are Spark 4's
defaults in UTC), and for classic sessions `spark.ui.showConsoleProgress=false` and log level
ERROR (`spark.log.level` and `setLogLevel`). PySpark starts executors' Python from
PYSPARK_PYTHON (default `python3`); when it is unset, dvtool sets it to the
`spark.pyspark.python` of the settings, or for `local` masters to this interpreter.

Progress: for classic sessions a background thread polls `statusTracker()` for the jobs of
the operation's job group and advances the caller's progress in proportion to the finished
tasks (files for a scan, bins for a rewrite); with Spark Connect, which has no status
tracker, progress advances when the operation ends.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from dvtool.engines import SparkSettings
from dvtool.engines.base import Progress
from dvtool.engines.spark.failures import spark_errors

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_SESSION_CONF = {"spark.sql.session.timeZone": "UTC", "spark.sql.ansi.enabled": "true"}
# Defaults the user's --spark-conf may override. Large Arrow batches to the Python workers:
# with Spark's 10,000 rows per batch the per-batch overhead dominated (a purge that still
# went through Spark's reader took 53 s against 29 s for 20 x 1M rows on 2 cores).
_DEFAULT_CONF = {"spark.sql.execution.arrow.maxRecordsPerBatch": "200000"}
_POLL_SECONDS = 0.25


def create_session(settings: SparkSettings) -> SparkSession:
    """A new (or PySpark's existing) session for `settings`, configured as described above."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("dvtool")
    if settings.remote:
        builder = builder.remote(settings.remote)
    else:
        master = settings.master or "local[*]"
        builder = builder.master(master)
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        builder = builder.config("spark.log.level", "ERROR")
        _choose_worker_python(master, settings.conf)
    defaults = {k: v for k, v in _DEFAULT_CONF.items() if k not in settings.conf}
    for key, value in {**_SESSION_CONF, **defaults, **dict(settings.conf)}.items():
        builder = builder.config(key, value)
    with spark_errors("start a Spark session"):
        spark = builder.getOrCreate()
        for key, value in {**_SESSION_CONF, **defaults}.items():
            spark.conf.set(key, value)
        if not settings.remote:
            spark.sparkContext.setLogLevel("ERROR")
    return spark


def _choose_worker_python(master: str, conf: Mapping[str, str]) -> None:
    """The Python the executors run: PySpark takes it from PYSPARK_PYTHON (else `python3`).

    Unless PYSPARK_PYTHON is set: `spark.pyspark.python` from the settings, or for local
    masters this interpreter, so that local executors import this very dvtool.
    """
    if os.environ.get("PYSPARK_PYTHON"):
        return
    chosen = conf.get("spark.pyspark.python") or (
        sys.executable if master.startswith("local") else None
    )
    if chosen:
        os.environ["PYSPARK_PYTHON"] = chosen


@contextlib.contextmanager
def session_conf(spark: SparkSession, values: Mapping[str, str]) -> Iterator[None]:
    """Set runtime SQL confs for the block, then restore the previous values."""
    previous: dict[str, str | None] = {key: spark.conf.get(key, None) for key in values}
    for key, value in values.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


@contextlib.contextmanager
def tracking(spark: SparkSession | None, total: int, progress: Progress | None) -> Iterator[None]:
    """Advance `progress` by `total` units over the operation, as Spark tasks finish.

    `spark` is the classic session whose status tracker to poll; None (Spark Connect, or no
    session) advances all of `total` when the operation ends.
    """
    if progress is None or total <= 0:
        yield
        return
    reported = 0
    lock = threading.Lock()

    def advance(target: int) -> None:
        nonlocal reported
        with lock:
            step = target - reported
            if step > 0:
                reported = target
                progress(step)

    if spark is None:
        yield
        advance(total)
        return
    sc = spark.sparkContext
    group = f"dvtool-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "dvtool", interruptOnCancel=True)
    stop = threading.Event()

    def poll() -> None:
        tracker = sc.statusTracker()
        while not stop.wait(_POLL_SECONDS):
            with contextlib.suppress(Exception):
                done, tasks = _task_counts(tracker, group)
                if tasks:
                    advance(min(total - 1, total * done // tasks))

    thread = threading.Thread(target=poll, name="dvtool-spark-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        with contextlib.suppress(Exception):
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
            sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
            sc.setLocalProperty("spark.job.interruptOnCancel", None)  # type: ignore[arg-type]
    advance(total)


def _task_counts(tracker: Any, group: str) -> tuple[int, int]:
    """(finished tasks, all known tasks) of the jobs in `group`."""
    done = tasks = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        if job is None:
            continue
        for stage_id in job.stageIds:
            stage = tracker.getStageInfo(stage_id)
            if stage is not None:
                done += stage.numCompletedTasks
                tasks += stage.numTasks
    return done, tasks
