"""The Spark session: creating it, its SQL confs, and progress from its status tracker.

Session. `SparkSession.builder` with `.master(settings.master or "local[*]")`, or
`.remote(settings.remote)` for Spark Connect (`sc://host:port`), then every
`settings.conf` item as `.config(key, value)`. dvtool sets `spark.sql.session.timeZone=UTC`
and `spark.sql.ansi.enabled=true` on the session (its predicate semantics are Spark 4's
defaults in UTC), and for classic sessions `spark.ui.showConsoleProgress=false` and log level
ERROR (`spark.log.level` and `setLogLevel`; not with `settings.verbose`). PySpark starts
executors' Python from PYSPARK_PYTHON (default `python3`); when it is unset, dvtool sets it
to the `spark.pyspark.python` of the settings, or for `local` masters to this interpreter.

Quiet start. When dvtool starts PySpark's JVM itself (a classic session in a process without
one), it launches the JVM through PySpark's `launch_gateway` with the same confs, so that the
JVM's stdout goes to this process's stderr (never into `--json` output) and, unless
`settings.verbose`, its stderr - the launcher's and log4j's start-up lines (`WARNING: Using
incubator modules`, "Using Spark's default log4j profile", `WARN Utils`, `WARN
NativeCodeLoader`), and later the executors' ERROR logs of failed tasks, which dvtool reports
itself on one line - goes to a log file in dvtool's temporary directory instead of the
terminal. Spark's log4j configuration and `spark.driver.extraJavaOptions` are left as they
are. If the JVM dies before PySpark connects, the error carries the log's last line.

spark-submit. In a driver spark-submit started (`in_spark_driver()`: PySpark's gateway port
in the environment), the JVM runs already with spark-submit's master and confs: without
`settings.master`, dvtool's session uses them (no `.master()`, no app name, Spark's logging
untouched) and adds only `settings.conf` and the SQL confs above.

Borrowed sessions (`SparkEngine.from_session`) are not configured here: the engine sets
`borrowed_conf()` on them with `session_conf` while it uses them and restores the previous
values on `stop()`.

Progress: for classic sessions a background thread polls `statusTracker()` for the jobs of
the operation's job group and advances the caller's progress in proportion to the finished
tasks (files for a scan, bins for a rewrite); with Spark Connect, which has no status
tracker, progress advances when the operation ends.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dvtool.engines import SparkSettings, in_spark_driver
from dvtool.engines.base import Progress
from dvtool.engines.spark.failures import SparkEngineError, spark_errors
from dvtool.engines.spark.shipping import temp_dir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_SESSION_CONF = {"spark.sql.session.timeZone": "UTC", "spark.sql.ansi.enabled": "true"}
# Defaults the user's --spark-conf may override. Large Arrow batches to the Python workers:
# with Spark's 10,000 rows per batch the per-batch overhead dominated (a purge that still
# went through Spark's reader took 53 s against 29 s for 20 x 1M rows on 2 cores).
_DEFAULT_CONF = {"spark.sql.execution.arrow.maxRecordsPerBatch": "200000"}
_POLL_SECONDS = 0.25
# What a JVM prints before it fails, which does not say why.
_STARTUP_LINES = (
    "WARNING: Using incubator modules",
    "Using Spark's default log4j profile",
    "Setting default log level",
    "To adjust logging level",
)
_LOG_LINE = re.compile(r" (TRACE|DEBUG|INFO|WARN) ")
_ERROR_WORDS = re.compile(r"error|exception|no such|not found|cannot|could not|failed", re.I)


def create_session(settings: SparkSettings) -> SparkSession:
    """A new (or PySpark's existing) session for `settings`, configured as described above."""
    from pyspark.sql import SparkSession

    defaults = {k: v for k, v in _DEFAULT_CONF.items() if k not in settings.conf}
    options: dict[str, str] = {}
    own_jvm = False  # a classic session on a JVM this process starts (or started)
    if settings.remote:
        options = {"spark.app.name": "dvtool", "spark.remote": settings.remote}
    elif in_spark_driver() and not settings.master:
        pass  # spark-submit's JVM: its master, app name and logging stay
    else:
        own_jvm = True
        master = settings.master or "local[*]"
        options = {
            "spark.app.name": "dvtool",
            "spark.master": master,
            "spark.ui.showConsoleProgress": "false",
        }
        if not settings.verbose:
            options["spark.log.level"] = "ERROR"
        _choose_worker_python(master, settings.conf)
    options.update({**_SESSION_CONF, **defaults, **dict(settings.conf)})
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    with spark_errors("start a Spark session"):
        if own_jvm:
            _launch_jvm(options, settings.verbose)
        spark = builder.getOrCreate()
        for key, value in {**_SESSION_CONF, **defaults}.items():
            spark.conf.set(key, value)
        if own_jvm and not settings.verbose:
            spark.sparkContext.setLogLevel("ERROR")
    return spark


def borrowed_conf() -> dict[str, str]:
    """The SQL confs dvtool sets on a session it did not create, while it uses it."""
    return {**_SESSION_CONF, **_DEFAULT_CONF}


def _launch_jvm(options: Mapping[str, str], verbose: bool) -> None:
    """Start PySpark's JVM with `options` unless it runs: stdout to stderr, stderr to a log.

    The log (unless `verbose`, which leaves stderr alone) is `jvm.log` in dvtool's
    temporary directory; a JVM that exits before PySpark connects fails with its last line.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    with SparkContext._lock:
        if SparkContext._gateway is not None or in_spark_driver():
            return
        conf = SparkConf(loadDefaults=False)
        for key, value in options.items():
            conf.set(key, value)
        log = None if verbose else temp_dir() / "jvm.log"
        with contextlib.ExitStack() as stack:
            popen: dict[str, Any] = {"stdout": 2}  # never onto stdout (--json)
            if log is not None:
                popen["stderr"] = stack.enter_context(open(log, "ab"))
            try:
                gateway = launch_gateway(conf, popen_kwargs=popen)  # type: ignore[no-untyped-call]
            except Exception as exc:
                if log is None or type(exc).__module__.partition(".")[0] != "pyspark":
                    raise
                raise SparkEngineError(
                    f"cannot start a Spark session: the JVM exited ({_jvm_error(log)})",
                    "run with -v to see Spark's output",
                ) from exc
        SparkContext._ensure_initialized(gateway=gateway, conf=conf)


def _jvm_error(log: Path) -> str:
    """The line of the JVM's log that says why it exited (at most 300 characters).

    The first unindented line that reads like an error, past the start-up lines and log4j's
    WARN and INFO lines; else the last such line.
    """
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return "no output"
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.strip()
        and not line[0].isspace()
        and not line.startswith(_STARTUP_LINES)
        and not _LOG_LINE.search(line)
    ]
    error = next((line for line in lines if _ERROR_WORDS.search(line)), None)
    found = error or (lines[-1] if lines else "no output")
    return found if len(found) <= 300 else found[:297] + "..."


def stop_active_session() -> None:
    """Stop the classic SparkContext this process runs, if any (pyspark is not imported)."""
    if "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        context.stop()


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
