"""The Spark engine: scans and rewrites on a PySpark session (local, a cluster, Spark Connect).

This package is the only part of dvtool that imports pyspark, and only inside functions:
importing it starts nothing. `SparkEngine(settings)` creates its session when `find_matches`
or `rewrite` first needs it and keeps it for later calls; `stop()` ends it. Its modules, each
documenting its own part (the package itself imports none of them: executors import `tasks`
and must not pay for, or need the dependencies of, the driver side):

- `engine`: `SparkEngine`, the driver side: the scan's plan (one parquet read, the predicate
  in `.where`, a broadcast join for paths and partition values) and the rewrite's schedule
  (one task per bin, on an RDD or, for Spark Connect, a DataFrame), the same for a format's
  own writes (`run_writes`: Iceberg's data file rewrites).
- `session`: creating the session (confs, the executors' Python, a quiet JVM start) and
  progress from Spark's status tracker.
- `shipping`: dvtool's own package, zipped and added to every session the engine uses.
- `failures`: `SparkEngineError`, Spark's failures with their message on one line.
- `paths`: dvtool locations as Hadoop paths, and the paths Spark reports matched back to
  them (`hadoop_path`, `spark_path_key`). No pyspark.
- `schema`: Delta types as Spark types (field ids in column mapping `id` mode), and the
  typed columns and tables a scan is built from.
- `tasks`: everything that runs on the executors (matches of a scan, the writes of a
  rewrite) and the Arrow rows they exchange with the driver. No pyspark.

Executors run dvtool code. The engine ships dvtool's own pure-Python package to every
session it uses (`shipping`), so the executors need no dvtool installed, only the
dependencies of its executor code (pyarrow and numpy, for Delta and Iceberg tables alike:
an Iceberg table's rewrites run `dvtool.iceberg.rewrite_executor` there through
`run_writes`, from plans the driver made with pyiceberg) in the Python PySpark starts for them:
PYSPARK_PYTHON or `spark.pyspark.python` (for `local` masters dvtool picks this
interpreter). The storage options (`--storage-option`) reach the executors with the table
root in the function's closure, and the executors need the credentials the storage backend
reads (environment, instance profile) to read and write data files. Scans use Spark's own
parquet reader, which goes through Hadoop's filesystems instead, so for scans object stores
need their Hadoop connector and credentials configured through `--spark-conf` (e.g.
`spark.jars.packages=org.apache.hadoop:hadoop-aws:...` and `spark.hadoop.fs.s3a.*`). PySpark
needs pandas on the driver for `mapInArrow` and Arrow conversions: scans and Connect
rewrites use them, classic rewrites do not.
"""
