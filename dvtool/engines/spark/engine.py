"""`SparkEngine`: the driver side of scans and rewrites on a Spark session.

Scan (`find_matches`). All files are read in ONE `spark.read.parquet(...)` with an explicit
schema (`schema.read_schema`: physical names, field ids in `id` mode). The predicate's data
columns are selected and renamed to their logical names together with
`_metadata.file_path` and `_metadata.row_index`. A small DataFrame built on the driver - one
row per file (path as Spark reports it, file index, the partition columns the predicate
uses, typed and under their logical names) - is broadcast-joined on the path, so
`predicate.to_spark_sql()` runs verbatim in `.where(...)` (and Spark still pushes the data
filters into the parquet scan). The matching rows go to `tasks.collect_matches` in
`mapInArrow`, and only one bitmap per file and Spark partition comes back. The paths Spark
reports are matched to the files dvtool asked for through `inputFiles()` (see `paths`):
every location must match exactly one file and vice versa, else the engine fails. Matching
rows whose path still finds no match fail the job; rows filtered out earlier cannot be
checked without giving up Spark's filter pushdown, so there the `inputFiles()` matching is
the guarantee.

Rewrite (`rewrite`). Spark only schedules: one task per bin (up to 2000 tasks; beyond that
a task takes several bins), and each task runs `tasks.write_task`, memory bounded by a row
group. The bins reach the tasks as data, each task only its own: on classic sessions as a
parallelized collection (`parallelize(bins, numSlices=tasks)`, even slices, so one bin per
task) whose tasks `mapPartitions`; Spark Connect has no RDDs, so there
`spark.range(n, numPartitions=tasks)` gives one bin id per task and a broadcast join with a
driver-built table of the bins' inputs (`tasks.bins_table`) keeps that partitioning without
a shuffle, and `mapInArrow` runs the same task function. Files of a job Spark itself fails
(executor lost, cancelled) or of speculative duplicate attempts cannot be known to the
driver and are left to `vacuum`; keep `spark.speculation` off (its default).

Why not Spark's parquet reader for rewrites (it did so before): the executors write through
fsspec with the storage options anyway, so reading through it needs no access they lack,
while the JVM path cost a row-by-row conversion of every row to Arrow for the Python
workers and, for bins of several files, a shuffle of all their rows: in the purge benchmark
(scripts/bench_purge.py, 20 files x 1M rows, 2 cores) Spark without its start-up took
10-12x the bare pyarrow read-filter-write that way, and 1.2-2x with one task per bin.
Rewrites therefore need no Hadoop connector, and their locations no path mapping (memory://
tables are refused: the executors are other processes).

A format's own writes (`run_writes`: Iceberg's data file rewrites) are scheduled the same
way, one task per item, on an RDD or (Connect) `spark.range` joined with a broadcast table
of the pickled items: the function and the items are pickled here on the driver first, so
what cannot travel (a memory:// table, storage options pyarrow cannot take) fails before
any task starts.
"""

from __future__ import annotations

import functools
import pickle
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyroaring import BitMap64

from dvtool.data_files import WrittenFile
from dvtool.engines import SparkSettings, require_spark_packages
from dvtool.engines.base import Item, Progress, Result, RewriteBin, ScanFile, TableLayout
from dvtool.engines.spark.failures import SparkEngineError, spark_errors
from dvtool.engines.spark.paths import glob_escaped, hadoop_path, spark_path_key, spellings
from dvtool.engines.spark.schema import (
    keys_table,
    logical_columns,
    partition_columns,
    read_schema,
    scan_conf,
)
from dvtool.engines.spark.session import borrowed_conf, create_session, session_conf, tracking
from dvtool.engines.spark.shipping import is_connect_session, ship
from dvtool.engines.spark.tasks import (
    BIN_ID_COLUMN,
    FILE_COLUMN,
    MATCHES_DDL,
    PATH_COLUMN,
    ROW_COLUMN,
    UNMAPPED_COLUMN,
    WRITES_DDL,
    WRITTEN_DDL,
    WriteJob,
    bins_table,
    collect_matches,
    items_table,
    layout_options,
    run_writes_batches,
    run_writes_task,
    write_bins,
    write_results,
    write_task,
    written_files,
)
from dvtool.errors import UsageError
from dvtool.storage.data_file_storage import DataFileStorage

if TYPE_CHECKING:  # the predicate module (sqlglot) costs every rewrite worker ~0.1 s to import
    from pyspark.sql import Column, DataFrame, SparkSession

    from dvtool.predicate import Predicate

# For a Connect rewrite: the plan keeps spark.range's partitioning and runs as one job.
_NO_AQE = {"spark.sql.adaptive.enabled": "false"}
_MAX_WRITE_PARTITIONS = 2000


class SparkEngine:
    """Scans and rewrites data files on a PySpark session (see the module docstring).

    `SparkEngine(settings)` creates its session on first use (`session.create_session`) and
    `stop()` ends it. `SparkEngine(session=spark)` (or `from_session(spark)`) borrows a
    session the caller made, classic or Spark Connect: the engine sets only the SQL confs its
    operations need (`session.borrowed_conf()`) while it uses the session, `stop()` restores
    their previous values and leaves the session running. Either way dvtool's own package is
    added to the session once (`shipping.ship`), so executors import the driver's dvtool.
    """

    name = "spark"

    def __init__(
        self, settings: SparkSettings | None = None, *, session: SparkSession | None = None
    ) -> None:
        self.settings = settings or SparkSettings()
        self._spark: SparkSession | None = session
        self._owned = session is None
        self._connect = (
            bool(self.settings.remote) if session is None else is_connect_session(session)
        )
        self._prepared = False
        self._restore = ExitStack()
        self._lock = threading.Lock()

    @classmethod
    def from_session(cls, spark: SparkSession) -> SparkEngine:
        """An engine on `spark`, a session the caller created and keeps (not stopped by it)."""
        return cls(session=spark)

    # -- session -------------------------------------------------------------------------

    @property
    def is_connect(self) -> bool:
        """True when the engine talks to a Spark Connect server."""
        return self._connect

    def session(self) -> SparkSession:
        """The Spark session: created (or borrowed) on first use, dvtool shipped to it once."""
        with self._lock:
            if self._spark is None:
                self._spark = create_session(self.settings)
            spark = self._spark
            if not self._prepared:
                with spark_errors("prepare the Spark session"):
                    if not self._owned:
                        self._restore.enter_context(session_conf(spark, borrowed_conf()))
                    ship(spark)
                self._prepared = True
            return spark

    def stop(self) -> None:
        """Stop a session the engine created (a Connect session only closes; the server keeps
        running); a borrowed session keeps running, with its SQL confs restored."""
        with self._lock:
            spark = self._spark
            restore, self._restore = self._restore, ExitStack()
            self._prepared = False
            if self._owned:
                self._spark = None
        if not self._owned:
            with spark_errors("restore the Spark session's confs"):
                restore.close()
        elif spark is not None:
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
        with spark_errors("scan the table"), session_conf(spark, scan_conf(table)):
            from pyspark.sql import functions as F

            data = self._read(spark, table, locations)
            meta = _metadata(data)
            selected = data.select(
                *logical_columns(table, predicate),
                meta.getField("file_path").alias(PATH_COLUMN),
                meta.getField("row_index").alias(ROW_COLUMN),
            )
            partitions = partition_columns(table, predicate)
            paths = self._spark_paths(data, table.storage, locations)
            keys = keys_table(
                paths,
                [first[loc] for loc in locations],
                [files[first[loc]].partition_values for loc in locations],
                partitions,
            )
            joined = selected.join(_broadcast(spark, keys), on=PATH_COLUMN, how="left")
            hits = joined.where(predicate.to_spark_sql()).select(
                F.col(FILE_COLUMN),
                F.col(ROW_COLUMN),
                F.when(F.col(FILE_COLUMN).isNull(), F.col(PATH_COLUMN)).alias(UNMAPPED_COLUMN),
            )
            deleted = {
                first[f.location]: f.deleted.serialize()
                for f in files
                if f.deleted is not None and len(f.deleted)
            }
            job = functools.partial(collect_matches, deleted)
            with self._tracking(len(files), progress):
                rows = hits.mapInArrow(job, MATCHES_DDL).collect()
        found: dict[int, BitMap64] = {}
        for index, blob in rows:
            partial = BitMap64.deserialize(bytes(blob))
            if index in found:
                found[index] |= partial
            else:
                found[index] = partial
        return [BitMap64(found.get(first[f.location], BitMap64())) for f in files]

    def _read(self, spark: SparkSession, table: TableLayout, locations: Sequence[str]) -> DataFrame:
        """One parquet scan of `locations` with the table's data schema (physical names)."""
        options = _storage_options(table.storage)
        paths = [hadoop_path(loc, options) for loc in locations]
        reader = spark.read.schema(read_schema(table))
        if self.is_connect:
            paths = [glob_escaped(p) for p in paths]
        else:
            reader = reader.option("__globPaths__", "false")
        return reader.parquet(*paths)

    def _spark_paths(
        self, data: DataFrame, storage: DataFileStorage, locations: Sequence[str]
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
            for variant in spellings(reported):
                if variant not in out[index]:
                    out[index].append(variant)
        missing = [loc for loc, found in zip(locations, out, strict=True) if not found]
        if missing:
            raise SparkEngineError(
                f"Spark does not list {len(missing)} of the files to read, e.g. {missing[0]}"
            )
        return out

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
        job = WriteJob(
            root=storage.root,
            options=_storage_options(storage),
            schema=table.schema,
            partition_columns=tuple(table.partition_columns),
            column_mapping_mode=table.column_mapping_mode,
            configuration=dict(configuration),
            layout_options=layout_options(table),
        )
        tasks = min(len(bins), _MAX_WRITE_PARTITIONS)
        with spark_errors("rewrite data files"):
            run = self._write_on_dataframe if self.is_connect else self._write_on_rdd
            with self._tracking(len(bins), progress):
                rows = run(spark, job, bins, tasks)
        return written_files(storage, len(bins), rows)

    def _write_on_rdd(
        self, spark: SparkSession, job: WriteJob, bins: Sequence[RewriteBin], tasks: int
    ) -> list[tuple[Any, ...]]:
        """Classic sessions: the bins as a parallelized collection, `tasks` even slices.

        Each task receives only its own bins (pickled), with no JVM plan, broadcast or
        Arrow conversion in between.
        """
        numbered = list(enumerate(bins))
        writes = spark.sparkContext.parallelize(numbered, tasks)
        return list(writes.mapPartitions(functools.partial(write_task, job)).collect())

    def _write_on_dataframe(
        self, spark: SparkSession, job: WriteJob, bins: Sequence[RewriteBin], tasks: int
    ) -> list[tuple[Any, ...]]:
        """Spark Connect (no RDDs): bin ids from `spark.range`, the bins broadcast-joined.

        spark.range splits 0..n-1 evenly, so with n partitions each task gets one bin id;
        the broadcast join keeps that partitioning (no shuffle) and brings each task only
        the rows of its own bins, which `mapInArrow` hands to the same task function.
        """
        ids = spark.range(0, len(bins), 1, tasks)
        described = ids.join(_broadcast(spark, bins_table(bins)), on=BIN_ID_COLUMN)
        writes = described.mapInArrow(functools.partial(write_bins, job), WRITTEN_DDL)
        with session_conf(spark, _NO_AQE):
            return [tuple(row) for row in writes.collect()]

    # -- a format's own writes -----------------------------------------------------------

    def run_writes(
        self,
        write: Callable[[Item], Result],
        items: Sequence[Item],
        progress: Progress | None = None,
    ) -> list[Result]:
        """Per item (in order), `write(item)` run in one Spark task per item (module
        docstring); an item's error is raised once every task finished."""
        if not items:
            return []
        function = pickle.dumps(write)
        payloads = [pickle.dumps(item) for item in items]
        spark = self.session()
        tasks = min(len(items), _MAX_WRITE_PARTITIONS)
        with spark_errors("write files"), self._tracking(len(items), progress):
            if self.is_connect:
                rows = self._writes_on_dataframe(spark, function, payloads, tasks)
            else:
                numbered = list(enumerate(payloads))
                writes = spark.sparkContext.parallelize(numbered, tasks)
                task = functools.partial(run_writes_task, function)
                rows = list(writes.mapPartitions(task).collect())
        return write_results(len(items), rows)

    def _writes_on_dataframe(
        self, spark: SparkSession, function: bytes, payloads: Sequence[bytes], tasks: int
    ) -> list[tuple[Any, ...]]:
        """Spark Connect: item ids from `spark.range`, the items broadcast-joined (as the
        bins of `_write_on_dataframe`)."""
        ids = spark.range(0, len(payloads), 1, tasks)
        described = ids.join(_broadcast(spark, items_table(payloads)), on=BIN_ID_COLUMN)
        job = functools.partial(run_writes_batches, function)
        writes = described.mapInArrow(job, WRITES_DDL)
        with session_conf(spark, _NO_AQE):
            return [tuple(row) for row in writes.collect()]

    # -- shared parts --------------------------------------------------------------------

    def _tracking(self, total: int, progress: Progress | None) -> AbstractContextManager[None]:
        """Progress over one operation: from the status tracker of a classic session."""
        return tracking(None if self.is_connect else self._spark, total, progress)


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


def _storage_options(storage: DataFileStorage) -> dict[str, Any]:
    """The options the table's storage was opened with (to open it again on executors)."""
    return dict(storage.options)
