"""The Spark engine: scans and rewrites on a PySpark session (local, a cluster, Spark Connect).

This is the only module of dvtool that imports pyspark, and only inside functions: importing
it starts nothing. `SparkEngine(settings)` creates its session when `find_matches` or
`rewrite` first needs it and keeps it for later calls; `stop()` ends it.

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
tasks (files for a scan, bins for a rewrite); with Spark Connect progress advances when the
operation ends. Spark failures become `SparkEngineError` with Spark's message (or the Python
worker's exception) on one line.

Scan (`find_matches`). All files are read in ONE `spark.read.parquet(...)` with an explicit
schema: the table's data schema with physical names (column mapping) at every level, so a
file lacking a column reads it as NULL. In column mapping `id` mode the fields carry their
`parquet.field.id` and the scan sets `spark.sql.parquet.fieldId.read.enabled`, so columns
are found by field id as Delta Spark finds them; files written before a type change are
widened by Spark's own parquet reader (Spark 4). The predicate's data columns are selected
and renamed to their logical names (nested structs are cast to the struct type with logical
field names) together with `_metadata.file_path` and `_metadata.row_index`. A small
DataFrame built on the driver - one row per file (path as Spark reports it, file index, the
partition columns the predicate uses, typed and under their logical names) - is
broadcast-joined on the path, so `predicate.to_spark_sql()` runs verbatim in `.where(...)`
(and Spark still pushes the data filters into the parquet scan). The matching (file index,
row index) pairs never reach the driver: `mapInArrow` builds one pyroaring bitmap per file
within each Spark partition, subtracts the file's current DV there (the DVs travel,
serialized, in the function's closure, which works for classic and Connect sessions alike)
and yields (file index, serialized bitmap); the driver ORs the partial bitmaps of each file.

Rewrite (`rewrite`). Spark only schedules: one task per bin (up to 2000 tasks; beyond that
a task takes several bins), and each task calls the arrow engine's `write_bin`, which reads
the bin's inputs with pyarrow through dvtool's storage layer, drops each input's `drop` rows
and writes one parquet file with dvtool's writer (schema with field ids, Delta statistics)
under the bin's directory, memory bounded by a row group. The bins reach the tasks as data,
each task only its own: on classic sessions as a parallelized collection
(`parallelize(bins, numSlices=tasks)`, even slices, so one bin per task) whose tasks
`mapPartitions`; Spark Connect has no RDDs, so there `spark.range(n, numPartitions=tasks)`
gives one bin id per task and a broadcast join with a driver-built table of the bins' inputs
(path, location, serialized drop bitmap, directory, partition values) keeps that partitioning
without a shuffle, and `mapInArrow` runs the same task function. A task returns one row per
bin: the written file's description, nothing for a bin whose rows were all dropped (None),
or the error that stopped it - a task catches its error rather than failing the job, so
that the driver, which alone commits, learns which files the other bins wrote, deletes
them and raises the error (message from the worker, on one line). Files of a job Spark
itself fails (executor lost, cancelled) or of speculative duplicate attempts cannot be known
to the driver and are left to `vacuum`; keep `spark.speculation` off (its default).

Why not Spark's parquet reader for rewrites (it did so before): the executors write through
fsspec with the storage options anyway, so reading through it needs no access they lack,
while the JVM path cost a row-by-row conversion of every row to Arrow for the Python
workers and, for bins of several files, a shuffle of all their rows: in the purge benchmark
(scripts/bench_purge.py, 20 files x 1M rows, 2 cores) Spark without its start-up took
10-12x the bare pyarrow read-filter-write that way, and 1.2-2x with one task per bin.
Rewrites therefore need no Hadoop connector, and their locations no path mapping (memory://
tables are refused: the executors are other processes).

Executors run dvtool code: dvtool, pyarrow and pyroaring (and the fsspec backend of
the table, e.g. s3fs) must be importable by the Python workers. For `local[*]` and a
standalone cluster on the same machine that is the same virtual environment (set
`PYSPARK_PYTHON` to its interpreter for standalone workers); on a real cluster install dvtool
in the image or ship a wheel, e.g. `--spark-conf spark.submit.pyFiles=dvtool.whl` (pyarrow
and pyroaring must be installed there). The storage options (`--storage-option`) reach the
executors with the table root in the function's closure, and the executors need the
credentials the fsspec backend reads (environment, instance profile) to read and write
data files. Scans use Spark's own parquet reader, which goes through Hadoop's filesystems
instead, so for scans object stores need their Hadoop connector and credentials configured
through `--spark-conf` (e.g. `spark.jars.packages=org.apache.hadoop:hadoop-aws:...` and
`spark.hadoop.fs.s3a.*`). PySpark needs pandas on the driver for `mapInArrow` and Arrow
conversions: scans and Connect rewrites use them, classic rewrites do not.

Paths (scans). dvtool locations become the Hadoop paths Spark reads:

    /abs/path (local)                -> file:///abs/path  (raw: no percent-encoding)
    s3://bucket/key, s3a://...       -> s3a://bucket/key
    gs://bucket/key, gcs://...       -> gs://bucket/key
    abfs[s]://container@account.dfs.core.windows.net/p -> abfss://container@account.../p
    abfs[s]:// or az://container/p   -> abfss://container@<account_name>.dfs.core.windows.net/p
                                        (`account_name` from the storage options)
    memory://...                     -> refused (Spark cannot see this process's memory)

Hadoop paths are not URIs: characters such as space, `%` or `#` are passed as they are.
Spark would expand glob characters (`{}[]*?\\`), so classic sessions read with the
`__globPaths__=false` option; Spark Connect 4.x does not honour that option (its server
hands option keys on lower-cased), so there every glob character is escaped with a
backslash instead (a path
holding both a glob character and `:` cannot be read through Connect: Hadoop's globber
rejects it). Spark reports files back as URI strings, percent-encoded (`file:/tmp/a%20b/x`
for `/tmp/a b/x`) and in two spellings of local paths (`inputFiles()` gives `file:///...`,
`_metadata.file_path` gives `file:/...`). So dvtool asks Spark which files it will read
(`inputFiles()`), matches each to a location by comparing percent-decoded, canonical forms
(scheme aliases folded, `file:` slashes collapsed, Unicode NFC) - every location must match
exactly one file and vice versa, else the engine fails - and joins on the exact strings
Spark reports, in both `file:` spellings. Matching rows whose path still finds no match fail
the job instead of being skipped (rows filtered out earlier cannot be checked without giving
up Spark's filter pushdown, so there the `inputFiles()` matching above is the guarantee).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import re
import sys
import threading
import unicodedata
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from dvtool.core.arrow_types import delta_to_arrow_type
from dvtool.core.partitions import parse_partition_value
from dvtool.core.schema import ArrayType, DataType, MapType, StructField, StructType
from dvtool.data_files import WrittenFile
from dvtool.engines import SparkSettings, require_spark_packages
from dvtool.engines.base import Progress, RewriteBin, RewriteInput, ScanFile, TableLayout
from dvtool.engines.rewrite import write_bin
from dvtool.errors import DvtoolError, UsageError
from dvtool.storage import Storage

if TYPE_CHECKING:  # the predicate module (sqlglot) costs every rewrite worker ~0.1 s to import
    from pyspark.sql import Column, DataFrame, SparkSession

    from dvtool.predicate import Predicate

__all__ = ["SparkEngine", "SparkEngineError", "hadoop_path", "spark_path_key"]

# Helper column names; no Delta column is expected to use them.
_PATH = "__dvtool_path"
_FILE = "__dvtool_file"
_ROW = "__dvtool_row"
# The column of spark.range: a rewrite's bin id.
_BIN_ID = "id"
_UNMAPPED = "__dvtool_unmapped"

_SESSION_CONF = {"spark.sql.session.timeZone": "UTC", "spark.sql.ansi.enabled": "true"}
# For a Connect rewrite: the plan keeps spark.range's partitioning and runs as one job.
_NO_AQE = {"spark.sql.adaptive.enabled": "false"}
# Defaults the user's --spark-conf may override. Large Arrow batches to the Python workers:
# with Spark's 10,000 rows per batch the per-batch overhead dominated (a purge that still
# went through Spark's reader took 53 s against 29 s for 20 x 1M rows on 2 cores).
_DEFAULT_CONF = {"spark.sql.execution.arrow.maxRecordsPerBatch": "200000"}
_GLOB_CHARS = re.compile(r"([\\{}\[\]*?])")
_MAX_WRITE_PARTITIONS = 2000
_POLL_SECONDS = 0.25

# One row per bin input, sent to the rewrite tasks: the bin's directory and partition
# values (JSON) repeat on each of its inputs; `drop` is the serialized bitmap (null: none).
_BINS_SCHEMA = pa.schema(
    [
        (_BIN_ID, pa.int64()),
        ("input", pa.int32()),
        ("path", pa.string()),
        ("location", pa.string()),
        ("drop", pa.binary()),
        ("directory", pa.string()),
        ("partition_values", pa.string()),
        ("base_row_id", pa.int64()),
        ("default_row_commit_version", pa.int64()),
    ]
)
# One row per bin from the rewrite tasks: the file written (location null: no row remained)
# or the error that stopped the task.
_WRITTEN_SCHEMA = pa.schema(
    [
        ("bin", pa.int64()),
        ("relative_path", pa.string()),
        ("location", pa.string()),
        ("size", pa.int64()),
        ("num_records", pa.int64()),
        ("stats_json", pa.string()),
        ("modification_time_ms", pa.int64()),
        ("error", pa.string()),
    ]
)
_WRITTEN_DDL = (
    "bin BIGINT, relative_path STRING, location STRING, size BIGINT, num_records BIGINT, "
    "stats_json STRING, modification_time_ms BIGINT, error STRING"
)
_MATCHES_SCHEMA = pa.schema([("file", pa.int32()), ("rows", pa.binary())])
_MATCHES_DDL = "file INT, rows BINARY"


class SparkEngineError(DvtoolError):
    """Spark could not run a scan or rewrite (the message carries Spark's own, on one line)."""


class SparkEngine:
    """Scans and rewrites data files on a PySpark session (see the module docstring)."""

    name = "spark"

    def __init__(self, settings: SparkSettings | None = None) -> None:
        self.settings = settings or SparkSettings()
        self._spark: SparkSession | None = None
        self._lock = threading.Lock()

    # -- session -------------------------------------------------------------------------

    @property
    def is_connect(self) -> bool:
        """True when the engine talks to a Spark Connect server."""
        return bool(self.settings.remote)

    def session(self) -> SparkSession:
        """The Spark session, created on first use and reused."""
        with self._lock:
            if self._spark is None:
                self._spark = self._create_session()
            return self._spark

    def _create_session(self) -> SparkSession:
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.appName("dvtool")
        if self.settings.remote:
            builder = builder.remote(self.settings.remote)
        else:
            master = self.settings.master or "local[*]"
            builder = builder.master(master)
            builder = builder.config("spark.ui.showConsoleProgress", "false")
            builder = builder.config("spark.log.level", "ERROR")
            _choose_worker_python(master, self.settings.conf)
        defaults = {k: v for k, v in _DEFAULT_CONF.items() if k not in self.settings.conf}
        for key, value in {**_SESSION_CONF, **defaults, **dict(self.settings.conf)}.items():
            builder = builder.config(key, value)
        with _spark_errors("start a Spark session"):
            spark = builder.getOrCreate()
            for key, value in {**_SESSION_CONF, **defaults}.items():
                spark.conf.set(key, value)
            if not self.is_connect:
                spark.sparkContext.setLogLevel("ERROR")
        return spark

    def stop(self) -> None:
        """Stop the session (a Connect session only closes; the server keeps running)."""
        with self._lock:
            spark, self._spark = self._spark, None
        if spark is not None:
            spark.stop()

    def __enter__(self) -> SparkEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scan ----------------------------------------------------------------------------

    def find_matches(
        self,
        table: TableLayout,
        files: Sequence[ScanFile],
        predicate: Predicate,
        progress: Progress | None = None,
    ) -> list[BitMap64]:
        """Per file (in order), the row indexes that match and are not deleted yet."""
        if not files:
            return []
        require_spark_packages(pandas=True, purpose="a scan on Spark")
        spark = self.session()
        locations = list(dict.fromkeys(f.location for f in files))
        first: dict[str, int] = {}
        for i, f in enumerate(files):
            first.setdefault(f.location, i)
        with _spark_errors("scan the table"), _session_conf(spark, _scan_conf(table)):
            from pyspark.sql import functions as F

            data = self._read(spark, table, locations)
            meta = _metadata(data)
            selected = data.select(
                *_logical_columns(table, predicate),
                meta.getField("file_path").alias(_PATH),
                meta.getField("row_index").alias(_ROW),
            )
            partitions = _partition_columns(table, predicate)
            paths = self._spark_paths(data, table.storage, locations)
            keys = _keys_table(
                paths,
                [first[loc] for loc in locations],
                [files[first[loc]].partition_values for loc in locations],
                partitions,
            )
            joined = selected.join(_broadcast(spark, keys), on=_PATH, how="left")
            hits = joined.where(predicate.to_spark_sql()).select(
                F.col(_FILE),
                F.col(_ROW),
                F.when(F.col(_FILE).isNull(), F.col(_PATH)).alias(_UNMAPPED),
            )
            deleted = {
                first[f.location]: f.deleted.serialize()
                for f in files
                if f.deleted is not None and len(f.deleted)
            }
            job = functools.partial(_collect_matches, deleted)
            with self._tracking(len(files), progress):
                rows = hits.mapInArrow(job, _MATCHES_DDL).collect()
        found: dict[int, BitMap64] = {}
        for index, blob in rows:
            partial = BitMap64.deserialize(bytes(blob))
            if index in found:
                found[index] |= partial
            else:
                found[index] = partial
        return [BitMap64(found.get(first[f.location], BitMap64())) for f in files]

    # -- rewrite -------------------------------------------------------------------------

    def rewrite(
        self,
        table: TableLayout,
        configuration: Mapping[str, str],
        bins: Sequence[RewriteBin],
        progress: Progress | None = None,
    ) -> list[WrittenFile | None]:
        """Per bin (in order), the new file written, or None when no row remained.

        One Spark task per bin (see the module docstring); if a bin fails, the files the
        other bins wrote are deleted before the error is raised.
        """
        if not bins:
            return []
        storage = table.storage
        if storage.protocol == "memory":
            raise UsageError(
                f"the Spark engine cannot rewrite memory:// tables ({storage.root}): "
                "its executors run in other processes"
            )
        spark = self.session()
        job = _WriteJob(
            root=storage.root,
            options=_storage_options(storage),
            schema=table.schema,
            partition_columns=tuple(table.partition_columns),
            column_mapping_mode=table.column_mapping_mode,
            configuration=dict(configuration),
            layout_options=_layout_options(table),
        )
        tasks = min(len(bins), _MAX_WRITE_PARTITIONS)
        with _spark_errors("rewrite data files"):
            run = self._write_on_dataframe if self.is_connect else self._write_on_rdd
            with self._tracking(len(bins), progress):
                rows = run(spark, job, bins, tasks)
        return _written_files(storage, len(bins), rows)

    def _write_on_rdd(
        self, spark: SparkSession, job: _WriteJob, bins: Sequence[RewriteBin], tasks: int
    ) -> list[tuple[Any, ...]]:
        """Classic sessions: the bins as a parallelized collection, `tasks` even slices.

        Each task receives only its own bins (pickled), with no JVM plan, broadcast or
        Arrow conversion in between.
        """
        numbered = list(enumerate(bins))
        writes = spark.sparkContext.parallelize(numbered, tasks)
        return list(writes.mapPartitions(functools.partial(_write_task, job)).collect())

    def _write_on_dataframe(
        self, spark: SparkSession, job: _WriteJob, bins: Sequence[RewriteBin], tasks: int
    ) -> list[tuple[Any, ...]]:
        """Spark Connect (no RDDs): bin ids from `spark.range`, the bins broadcast-joined.

        spark.range splits 0..n-1 evenly, so with n partitions each task gets one bin id;
        the broadcast join keeps that partitioning (no shuffle) and brings each task only
        the rows of its own bins, which `mapInArrow` hands to the same task function.
        """
        ids = spark.range(0, len(bins), 1, tasks)
        described = ids.join(_broadcast(spark, _bins_table(bins)), on=_BIN_ID)
        writes = described.mapInArrow(functools.partial(_write_bins, job), _WRITTEN_DDL)
        with _session_conf(spark, _NO_AQE):
            return [tuple(row) for row in writes.collect()]

    # -- shared parts --------------------------------------------------------------------

    def _read(self, spark: SparkSession, table: TableLayout, locations: Sequence[str]) -> DataFrame:
        """One parquet scan of `locations` with the table's data schema (physical names)."""
        options = _storage_options(table.storage)
        paths = [hadoop_path(loc, options) for loc in locations]
        reader = spark.read.schema(_read_schema(table))
        if self.is_connect:
            paths = [_GLOB_CHARS.sub(r"\\\1", p) for p in paths]
        else:
            reader = reader.option("__globPaths__", "false")
        return reader.parquet(*paths)

    def _spark_paths(
        self, data: DataFrame, storage: Storage, locations: Sequence[str]
    ) -> list[list[str]]:
        """Per location, the strings Spark reports for it (`inputFiles()`, both spellings)."""
        options = _storage_options(storage)
        wanted: dict[str, int] = {}
        for i, loc in enumerate(locations):
            wanted.setdefault(spark_path_key(hadoop_path(loc, options), encoded=False), i)
        out: list[list[str]] = [[] for _ in locations]
        for reported in data.inputFiles():
            index = wanted.get(spark_path_key(reported))
            if index is None:
                raise SparkEngineError(
                    f"Spark reads {reported}, which matches none of the files dvtool asked for"
                )
            for variant in _spellings(reported):
                if variant not in out[index]:
                    out[index].append(variant)
        missing = [loc for loc, found in zip(locations, out, strict=True) if not found]
        if missing:
            raise SparkEngineError(
                f"Spark does not list {len(missing)} of the files to read, e.g. {missing[0]}"
            )
        return out

    @contextlib.contextmanager
    def _tracking(self, total: int, progress: Progress | None) -> Iterator[None]:
        """Advance `progress` by `total` units over the operation, as Spark tasks finish."""
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

        if self.is_connect or self._spark is None:
            yield
            advance(total)
            return
        sc = self._spark.sparkContext
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


# -- driver-side helpers -----------------------------------------------------------------


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
def _spark_errors(action: str) -> Iterator[None]:
    """Turn Spark's (and py4j's) exceptions into a SparkEngineError with a one-line message."""
    try:
        yield
    except DvtoolError:
        raise
    except Exception as exc:
        top = type(exc).__module__.partition(".")[0]
        if top not in ("pyspark", "py4j", "grpc"):
            raise
        raise SparkEngineError(f"cannot {action} with Spark: {_one_line(exc)}") from exc


@contextlib.contextmanager
def _session_conf(spark: SparkSession, values: Mapping[str, str]) -> Iterator[None]:
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


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    # A Python worker's failure ends with the exception it raised: that line says most.
    text = lines[0] if lines else type(exc).__name__
    for line in lines:
        if re.match(r"^[A-Za-z_.]*(Error|Exception): ", line) and "JVM stacktrace" not in line:
            text = line
    return text if len(text) <= 500 else text[:497] + "..."


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


def _broadcast(spark: SparkSession, table: pa.Table) -> DataFrame:
    """A small driver-built table as a broadcast DataFrame."""
    import pyspark
    from pyspark.sql import functions as F

    if int(pyspark.__version__.split(".")[0]) >= 4:
        frame = spark.createDataFrame(table)
    else:  # PySpark 3.5 takes no arrow tables: rows with the schema arrow's types give
        from pyspark.sql.pandas.types import from_arrow_schema

        rows = [tuple(row.values()) for row in table.to_pylist()]
        frame = spark.createDataFrame(rows, schema=from_arrow_schema(table.schema))
    return F.broadcast(frame)


def _metadata(data: DataFrame) -> Column:
    """The `_metadata` column of a file scan (`metadataColumn` where PySpark has it)."""
    if hasattr(data, "metadataColumn"):
        return data.metadataColumn("_metadata")
    from pyspark.sql import functions as F

    return F.col("_metadata")


def _storage_options(storage: Storage) -> dict[str, Any]:
    """The options the table's storage was opened with (to open it again on executors)."""
    return dict(storage.options)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def hadoop_path(location: str, options: Mapping[str, Any] | None = None) -> str:
    """The Hadoop path Spark reads for a dvtool location (see the module docstring)."""
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.\-]*)://(.*)$", location)
    if match is None:
        if location.startswith("file:"):
            return "file:///" + location[len("file:") :].lstrip("/")
        if not location.startswith("/"):
            raise UsageError(f"the Spark engine needs absolute locations, not {location}")
        return "file://" + location
    scheme, rest = match.group(1).lower(), match.group(2)
    if scheme == "file":
        return "file:///" + rest.lstrip("/")
    if scheme in ("s3", "s3a", "s3n"):
        return "s3a://" + rest
    if scheme in ("gs", "gcs"):
        return "gs://" + rest
    if scheme in ("abfs", "abfss", "az"):
        authority, slash, path = rest.partition("/")
        if "@" not in authority:
            account = (options or {}).get("account_name")
            if not account:
                raise UsageError(
                    f"the Spark engine reads {location} as abfss://{authority}@ACCOUNT"
                    ".dfs.core.windows.net/...; give the account with "
                    "--storage-option account_name=ACCOUNT or use that form of URI"
                )
            authority = f"{authority}@{account}.dfs.core.windows.net"
        return f"abfss://{authority}{slash}{path}"
    raise UsageError(f"the Spark engine cannot read {scheme}:// tables ({location})")


_KEY_SCHEMES = {"s3": "s3a", "s3n": "s3a", "gcs": "gs", "abfs": "abfss", "az": "abfss"}


def spark_path_key(path: str, *, encoded: bool = True) -> str:
    """A canonical form of a path as Spark reports it (`encoded`) or a raw Hadoop path.

    Percent-decoded (reported paths are URI strings), scheme aliases folded
    (s3 -> s3a, gcs -> gs, abfs/az -> abfss), `file:` slashes collapsed, Unicode NFC.
    """
    text = unquote(path) if encoded else path
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.\-]*):(.*)$", text, re.DOTALL)
    if match is None:
        text = "file:/" + text.lstrip("/")
    else:
        scheme, rest = match.group(1).lower(), match.group(2)
        if scheme == "file":
            rest = rest.lstrip("/")
            if rest.startswith("localhost/"):
                rest = rest[len("localhost/") :]
            text = "file:/" + rest
        else:
            text = f"{_KEY_SCHEMES.get(scheme, scheme)}:{rest}"
    return unicodedata.normalize("NFC", text)


def _spellings(reported: str) -> list[str]:
    """The exact strings Spark may use for one file: `file:///x` and `file:/x` are both seen."""
    out = [reported]
    if reported.startswith("file:///"):
        out.append("file:/" + reported[len("file:///") :])
    elif reported.startswith("file:/") and not reported.startswith("file://"):
        out.append("file:///" + reported[len("file:/") :])
    return out


# Spark types


_PRIMITIVES = {
    "long": "LongType",
    "bigint": "LongType",
    "integer": "IntegerType",
    "int": "IntegerType",
    "short": "ShortType",
    "smallint": "ShortType",
    "byte": "ByteType",
    "tinyint": "ByteType",
    "float": "FloatType",
    "double": "DoubleType",
    "string": "StringType",
    "boolean": "BooleanType",
    "binary": "BinaryType",
    "date": "DateType",
    "timestamp": "TimestampType",
    "timestamp_ntz": "TimestampNTZType",
}
_DECIMAL = re.compile(r"^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def _is_void(f: StructField) -> bool:
    return isinstance(f.type, str) and f.type.strip().lower() == "void"


def spark_type(t: DataType, mode: str, *, logical: bool = False) -> Any:
    """The Spark type of a Delta type; struct fields by physical (or logical) names.

    Every field, element and value is nullable: Spark reads file sources as nullable, and a
    cast to a non-nullable struct field would be refused.
    """
    from pyspark.sql import types as T

    if isinstance(t, str):
        name = t.strip().lower()
        if name in _PRIMITIVES:
            return getattr(T, _PRIMITIVES[name])()
        if name == "decimal":
            return T.DecimalType(10, 0)
        m = _DECIMAL.match(name)
        if m:
            return T.DecimalType(int(m.group(1)), int(m.group(2)))
        if re.match(r"^(var)?char\s*\(\s*\d+\s*\)$", name):
            return T.StringType()
        raise UsageError(f"the Spark engine cannot read columns of type {t}")
    if isinstance(t, ArrayType):
        return T.ArrayType(spark_type(t.element_type, mode, logical=logical), True)
    if isinstance(t, MapType):
        return T.MapType(
            spark_type(t.key_type, mode, logical=logical),
            spark_type(t.value_type, mode, logical=logical),
            True,
        )
    return T.StructType(
        [
            T.StructField(
                f.name if logical else f.physical_name(mode),
                spark_type(f.type, mode, logical=logical),
                True,
                _field_id_metadata(f, mode, logical),
            )
            for f in t.fields
            if not _is_void(f)
        ]
    )


def _field_id_metadata(f: StructField, mode: str, logical: bool) -> dict[str, Any] | None:
    """`parquet.field.id` for a physical field in column mapping `id` mode: Spark then finds
    the column by its parquet field id (with `_scan_conf`), as Delta Spark reads such tables,
    so a file that holds it under an older name still gives its values."""
    if logical or mode != "id" or f.field_id is None:
        return None
    return {"parquet.field.id": f.field_id}


def _scan_conf(table: TableLayout) -> dict[str, str]:
    """SQL confs a scan of `table` needs: reading by parquet field id in `id` mode. A file
    without field ids then fails the scan (Spark's `ignoreMissing` would read NULLs)."""
    if table.column_mapping_mode != "id":
        return {}
    return {"spark.sql.parquet.fieldId.read.enabled": "true"}


def _data_fields(table: TableLayout) -> list[StructField]:
    excluded = {c.lower() for c in table.partition_columns}
    return [f for f in table.schema.fields if f.name.lower() not in excluded and not _is_void(f)]


def _read_schema(table: TableLayout) -> Any:
    """The Spark schema of the data files: data columns, physical names at every level."""
    return spark_type(StructType(tuple(_data_fields(table))), table.column_mapping_mode)


def _has_struct(t: DataType) -> bool:
    if isinstance(t, StructType):
        return True
    if isinstance(t, ArrayType):
        return _has_struct(t.element_type)
    if isinstance(t, MapType):
        return _has_struct(t.key_type) or _has_struct(t.value_type)
    return False


def _logical_columns(table: TableLayout, predicate: Predicate) -> list[Column]:
    """The predicate's data columns under their logical names (nested names cast too)."""
    from pyspark.sql import functions as F

    mode = table.column_mapping_mode
    by_physical = {f.physical_name(mode): f for f in _data_fields(table)}
    out = []
    for physical in predicate.columns:
        f = by_physical.get(physical)
        if f is None:
            raise SparkEngineError(f"the predicate reads {physical}, not a data column")
        column = F.col(_quote(physical))
        if mode != "none" and _has_struct(f.type):
            column = column.cast(spark_type(f.type, mode, logical=True))
        out.append(column.alias(f.name))
    return out


def _partition_columns(table: TableLayout, predicate: Predicate) -> list[tuple[str, str, str]]:
    """(physical name, logical name, Delta type) of the partition columns the predicate uses."""
    mode = table.column_mapping_mode
    out = []
    for name in table.partition_columns:
        f = table.schema.get(name)
        if f is None or not isinstance(f.type, str):
            continue
        physical = f.physical_name(mode)
        if physical in predicate.partition_columns_used:
            out.append((physical, f.name, f.type))
    return out


def _keys_table(
    paths: Sequence[Sequence[str]],
    indexes: Sequence[int],
    partition_values: Sequence[Mapping[str, str | None]],
    partitions: Sequence[tuple[str, str, str]],
) -> pa.Table:
    """One row per spelling of each file's path: file index and typed partition values."""
    keys: list[str] = []
    files: list[int] = []
    values: list[list[Any]] = [[] for _ in partitions]
    for spellings, index, given in zip(paths, indexes, partition_values, strict=True):
        parsed = [parse_partition_value(given.get(p), t) for p, _, t in partitions]
        for spelling in spellings:
            keys.append(spelling)
            files.append(index)
            for column, value in zip(values, parsed, strict=True):
                column.append(value)
    arrays = [pa.array(keys, pa.string()), pa.array(files, pa.int32())]
    names = [_PATH, _FILE]
    for (_, logical, delta_type), column in zip(partitions, values, strict=True):
        arrays.append(pa.array(column, delta_to_arrow_type(delta_type)))
        names.append(logical)
    return pa.Table.from_arrays(arrays, names=names)


def _bins_table(bins: Sequence[RewriteBin]) -> pa.Table:
    """The rewrite's bins as rows for the tasks (`_BINS_SCHEMA`): one per bin input."""
    rows = [
        {
            _BIN_ID: bin_id,
            "input": order,
            "path": item.path,
            "location": item.location,
            "drop": item.drop.serialize() if item.drop is not None and len(item.drop) else None,
            "directory": b.directory,
            "partition_values": json.dumps(dict(b.partition_values)),
            "base_row_id": item.base_row_id,
            "default_row_commit_version": item.default_row_commit_version,
        }
        for bin_id, b in enumerate(bins)
        for order, item in enumerate(b.inputs)
    ]
    return pa.Table.from_pylist(rows, schema=_BINS_SCHEMA)


def _written_files(
    storage: Storage, count: int, rows: Sequence[tuple[Any, ...]]
) -> list[WrittenFile | None]:
    """The tasks' rows as one result per bin; on any error or gap, delete what was written.

    Every bin must come back exactly once; a bin whose task failed comes back as its error.
    """
    out: list[WrittenFile | None] = [None] * count
    seen: set[int] = set()
    problem: str | None = None
    for row in rows:
        bin_id, relative, location, size, records, stats, mtime, error = row
        if error is not None:
            problem = problem or str(error)
            continue
        if bin_id in seen or not 0 <= bin_id < count:
            problem = problem or f"Spark returned an unexpected result for bin {bin_id}"
            continue
        seen.add(bin_id)
        if location is not None:
            out[bin_id] = WrittenFile(
                relative_path=relative,
                location=location,
                size=int(size),
                num_records=int(records),
                stats_json=stats,
                modification_time_ms=int(mtime),
            )
    if problem is None and len(seen) != count:
        problem = f"Spark returned {len(seen)} of {count} bins"
    if problem is not None:
        written = [row[2] for row in rows if row[7] is None and row[2] is not None]
        with contextlib.suppress(Exception):  # the task's error is the one to report
            storage.delete_many(written)
        raise SparkEngineError(f"cannot rewrite data files with Spark: {problem}")
    return out


# -- executor-side functions (pickled by reference: executors import this module) ---------


def _unmapped_error(batch: pa.RecordBatch) -> RuntimeError:
    paths = [p for p in batch.column(_UNMAPPED).to_pylist() if p is not None]
    shown = paths[0] if paths else "?"
    return RuntimeError(f"dvtool cannot map the file Spark reports as {shown} to a table file")


def _collect_matches(
    deleted: Mapping[int, bytes], batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Matching (file, row index) pairs of one Spark partition -> one bitmap per file."""
    found: dict[int, BitMap64] = {}
    for batch in batches:
        if batch.num_rows == 0:
            continue
        files = batch.column(_FILE)
        if files.null_count:
            raise _unmapped_error(batch)
        rows = batch.column(_ROW)
        uniques = pc.unique(files).to_pylist()
        for index in uniques:
            selected = rows if len(uniques) == 1 else rows.filter(pc.equal(files, index))
            bitmap = found.get(index)
            if bitmap is None:
                bitmap = found[index] = BitMap64()
            bitmap.update(selected.to_pylist())
    if not found:
        return
    indexes, blobs = [], []
    for index, bitmap in found.items():
        if index in deleted:
            bitmap -= BitMap64.deserialize(deleted[index])
        indexes.append(index)
        blobs.append(bitmap.serialize())
    yield pa.RecordBatch.from_arrays(
        [pa.array(indexes, pa.int32()), pa.array(blobs, pa.binary())], schema=_MATCHES_SCHEMA
    )


@dataclass(frozen=True)
class _WriteJob:
    """What every rewrite task needs besides its bins' rows (pickled into the function)."""

    root: str
    options: Mapping[str, Any]
    schema: StructType
    partition_columns: tuple[str, ...]
    column_mapping_mode: str
    configuration: Mapping[str, str]
    layout_options: Mapping[str, Any]

    def layout(self) -> TableLayout:
        """The table layout again, on the executor: storage reopened with the same options."""
        storage = Storage.for_table(self.root, self.options)
        return TableLayout(
            storage,
            self.schema,
            self.partition_columns,
            self.column_mapping_mode,
            **self.layout_options,
        )


def _layout_options(table: TableLayout) -> dict[str, Any]:
    """The fields of `table` beyond storage, schema, partitioning and mapping mode."""
    fields = dataclasses.fields(TableLayout)
    return {f.name: getattr(table, f.name) for f in fields[4:]}


def _task_bins(batches: Iterable[pa.RecordBatch]) -> list[tuple[int, RewriteBin]]:
    """The bins of one task's rows (`_BINS_SCHEMA`), inputs in their order within each bin."""
    rows = [row for batch in batches for row in batch.to_pylist()]
    rows.sort(key=lambda r: (r[_BIN_ID], r["input"]))
    grouped: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row[_BIN_ID], []).append(row)
    out = []
    for bin_id, inputs in grouped.items():
        first = inputs[0]
        rewrite_bin = RewriteBin(
            tuple(
                RewriteInput(
                    r["path"],
                    r["location"],
                    None if r["drop"] is None else BitMap64.deserialize(r["drop"]),
                    r["base_row_id"],
                    r["default_row_commit_version"],
                )
                for r in inputs
            ),
            first["directory"],
            json.loads(first["partition_values"]),
        )
        out.append((bin_id, rewrite_bin))
    return out


def _write_task(
    job: _WriteJob, bins: Iterable[tuple[int, RewriteBin]]
) -> Iterator[tuple[Any, ...]]:
    """Write each (bin id, bin) of one task with the arrow engine's `write_bin`.

    One `_WRITTEN_SCHEMA` tuple per bin. An error ends the task with a tuple that carries it
    instead of failing the Spark job, so that the driver learns which files the other bins
    wrote and can delete them.
    """
    layout: TableLayout | None = None
    for bin_id, rewrite_bin in bins:
        try:
            layout = layout or job.layout()
            written = write_bin(layout, job.configuration, rewrite_bin)
        except Exception as exc:  # reported to the driver, which raises it
            yield (bin_id, None, None, None, None, None, None, _task_error(exc, rewrite_bin))
            return
        if written is None:
            yield (bin_id, None, None, None, None, None, None, None)
        else:
            yield (
                bin_id,
                written.relative_path,
                written.location,
                written.size,
                written.num_records,
                written.stats_json,
                written.modification_time_ms,
                None,
            )


def _write_bins(job: _WriteJob, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`_write_task` as a `mapInArrow` function: bins' rows in, one row per bin out."""
    names = _WRITTEN_SCHEMA.names
    for row in _write_task(job, _task_bins(batches)):
        yield pa.RecordBatch.from_pylist([dict(zip(names, row, strict=True))], _WRITTEN_SCHEMA)


def _task_error(exc: Exception, rewrite_bin: RewriteBin) -> str:
    """One line for the user: dvtool's own message, else the exception and the bin's input."""
    if isinstance(exc, DvtoolError):
        text = exc.message
    else:
        where = rewrite_bin.inputs[0].location if rewrite_bin.inputs else rewrite_bin.directory
        text = f"{type(exc).__name__} while rewriting {where}: {exc}"
    first = next((line.strip() for line in text.splitlines() if line.strip()), text)
    return first if len(first) <= 500 else first[:497] + "..."
