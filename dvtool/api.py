"""dvtool's Python API: the commands as functions, for Airflow, Dagster and notebooks.

`inspect`, `inspect_tables` (every table under prefixes), `enable`, `delete`, `optimize`,
`vacuum`, `cleanup_log` (`vacuum --log`), `checkpoint` and `restore` take what the CLI takes,
as keyword arguments, and return the command's result object; `result.to_dict()` is exactly the
document `dvtool COMMAND --json` prints. Each opens the table at `table` (a local path or an
fsspec URI such as `s3://bucket/t`, with `storage_options` for its backend, as
`--storage-option` gives the CLI). With `spark=` (`delete` and `optimize`; a classic
SparkSession or a Spark Connect one) the data-heavy part runs on that session: dvtool adds its
own package to it (once per session, so the executors need only pyarrow and numpy, not dvtool),
sets the SQL confs it needs (`spark.sql.session.timeZone=UTC`, `spark.sql.ansi.enabled=true`,
`spark.sql.execution.arrow.maxRecordsPerBatch`) only while it runs, restores them afterwards,
and never stops the session. Without `spark=` it runs in-process on pyarrow.

    import dvtool

    result = dvtool.delete("s3://bucket/events", "day < DATE '2024-01-01'", spark=spark,
                           storage_options={"region": "eu-west-1"})
    print(result.version, result.metrics["numDeletedRows"])
    dvtool.optimize("s3://bucket/events", purge=True, spark=spark)

Errors are `dvtool.DvtoolError` subclasses (from `dvtool.errors`, with a message meant for
people): `UsageError` (invalid arguments, e.g. a predicate on a missing column or `mode`),
`PredicateError` (SQL dvtool cannot parse or evaluate), `TableNotFoundError`, `LogError`
(a malformed log), `UnsupportedFeatureError` (a table feature dvtool does not implement),
`DeletionVectorError`, `StorageError` (reads and writes; `CommitOutcomeUnknownError` when a
commit's outcome cannot be confirmed), `CommitConflictError` (a concurrent writer won every
retry), `WriteRefusedError`, and `dvtool.engines.spark.failures.SparkEngineError` (Spark
could not run a scan or a rewrite; its message is the executor's own error on one line).

Importing `dvtool` imports neither this module's dependencies nor pyspark: `dvtool.delete` and
`dvtool.optimize` load it on first use.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dvtool import interrupts
from dvtool.errors import UsageError

if TYPE_CHECKING:
    import datetime as dt

    from dvtool.commands.checkpoint import CheckpointResult
    from dvtool.commands.delete.command import DeleteResult
    from dvtool.commands.delete.iceberg import IcebergDeleteResult
    from dvtool.commands.enable import EnableResult
    from dvtool.commands.inspect.command import InspectResult
    from dvtool.commands.inspect.iceberg import IcebergInspectResult
    from dvtool.commands.inspect.paimon import PaimonInspectResult
    from dvtool.commands.inspect.tables import InspectTablesResult
    from dvtool.commands.log_cleanup import LogCleanupResult
    from dvtool.commands.maintain.command import MaintainResult
    from dvtool.commands.optimize.command import OptimizeResult
    from dvtool.commands.optimize.iceberg import IcebergOptimizeResult
    from dvtool.commands.restore.command import RestoreResult
    from dvtool.commands.vacuum.command import VacuumResult
    from dvtool.commands.vacuum.iceberg import IcebergVacuumResult
    from dvtool.commands.vacuum.paimon import PaimonVacuumResult
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.engines.base import Engine

__all__ = [
    "checkpoint",
    "cleanup_log",
    "delete",
    "enable",
    "inspect",
    "inspect_tables",
    "maintain",
    "optimize",
    "restore",
    "vacuum",
]


def inspect(
    table: str | os.PathLike[str],
    *,
    version: int | None = None,
    timestamp: dt.datetime | None = None,
    files: bool = False,
    history: int | None = None,
    verify: bool = False,
    checks: Mapping[str, float] | None = None,
    count_rows: bool = False,
    storage_options: Mapping[str, str] | None = None,
    catalog: str | None = None,
    branch: str | None = None,
) -> InspectResult | IcebergInspectResult | PaimonInspectResult:
    """The table's summary (and its files, history, verification, gates); `dvtool inspect`.

    `table` is a Delta, Iceberg or Paimon table's location (an Iceberg table also by its
    `*.metadata.json`), or with `catalog` (a pyiceberg catalog name) an Iceberg table's
    `namespace.table`. `version` (an Iceberg or Paimon snapshot id) or `timestamp` (an aware
    datetime; naive means UTC) time-travel. `files` lists every live file, `history` the last N
    commits or snapshots, `verify` reads every data file footer and DV (and every delete
    file), `checks` are the `--check` gates (`{"max-deleted-ratio": 0.2}`), `count_rows`
    reads footers of files without `numRecords` (Iceberg: applies equality deletes).
    `branch` reads a Paimon table's branch (`--branch`; `UsageError` on other tables).
    `result.exit_code` is what the CLI would exit with (6 when `verify` found problems, 3
    when a gate failed, else 0).
    """
    from dvtool.commands.inspect.command import InspectRequest, parse_check, run_inspect
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.paimon.tables import PaimonTable
    from dvtool.table import open_readable_table

    request = InspectRequest(
        version=version,
        timestamp_ms=_epoch_ms(timestamp),
        files=files,
        history=history,
        verify=verify,
        count_rows=count_rows,
    )
    gates = [f"{k}={v}" for k, v in (checks or {}).items()]
    interrupts.begin_library_call()
    opened = open_readable_table(os.fspath(table), dict(storage_options or {}), catalog)
    if branch is not None and not isinstance(opened, PaimonTable):
        raise UsageError("branch applies to Paimon tables (their branch/branch-NAME folders)")
    if isinstance(opened, DeltaLog):
        return run_inspect(opened, replace(request, checks=tuple(map(parse_check, gates))))
    if isinstance(opened, PaimonTable):
        from dvtool.commands.inspect.paimon import run_inspect_paimon
        from dvtool.commands.inspect.paimon_checks import parse_paimon_check

        paimon_checks = tuple(map(parse_paimon_check, gates))
        opened = opened if branch is None else opened.open_branch(branch)
        return run_inspect_paimon(opened, replace(request, checks=paimon_checks))
    from dvtool.commands.inspect.iceberg import run_inspect_iceberg
    from dvtool.commands.inspect.iceberg_checks import parse_iceberg_check

    iceberg_checks = tuple(map(parse_iceberg_check, gates))
    return run_inspect_iceberg(opened, replace(request, checks=iceberg_checks))


def inspect_tables(
    prefixes: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    recursive: bool = True,
    checks: Mapping[str, float] | None = None,
    verify: bool = False,
    count_rows: bool = False,
    storage_options: Mapping[str, str] | None = None,
) -> InspectTablesResult:
    """Every table (Delta, Iceberg or Paimon) at or under `prefixes`, each as `inspect` sees it,
    with the same `checks`, `verify` and `count_rows`; `dvtool inspect PREFIX... -r`.

    Without `recursive` the prefixes are the tables. A gate of one format only (`checks`
    key) is not applicable on the other format's tables and does not fail them; a name no
    format has raises `UsageError`. A table's failure never raises: `result.tables` holds
    each one's `format`, `result` (the single-table `InspectResult`, `IcebergInspectResult`
    or `PaimonInspectResult`), `checks`, `error` and `exit_code`; `result.exit_code` is the
    worst of theirs.
    """
    from dvtool.commands.inspect.tables import run_inspect_tables

    interrupts.begin_library_call()
    paths = [prefixes] if isinstance(prefixes, (str, os.PathLike)) else list(prefixes)
    return run_inspect_tables(
        [os.fspath(p) for p in paths],
        checks=[f"{k}={v}" for k, v in (checks or {}).items()],
        verify=verify,
        count_rows=count_rows,
        recursive=recursive,
        storage_options=storage_options,
    )


def enable(
    table: str | os.PathLike[str], *, storage_options: Mapping[str, str] | None = None
) -> EnableResult:
    """Turn deletion vectors on (protocol 3/7, `delta.enableDeletionVectors=true`)."""
    from dvtool.commands.enable import run_enable

    return run_enable(_open(table, storage_options))


def vacuum(
    table: str | os.PathLike[str],
    *,
    retain: str | None = None,
    dry_run: bool = False,
    lite: bool = False,
    force: bool = False,
    storage_options: Mapping[str, str] | None = None,
    catalog: str | None = None,
    retain_last: int | None = None,
) -> VacuumResult | IcebergVacuumResult | PaimonVacuumResult:
    """Delete the files the table no longer needs; `dvtool vacuum`.

    `retain` is a duration as the CLI takes it (`"168h"`, `"7d"`; default the table's
    `delta.deletedFileRetentionDuration`); a shorter one than the table's needs `force`.
    `lite` takes candidates from the log instead of listing the directory. `result.failed`
    lists files that could not be deleted. An Iceberg table (by location, or with `catalog`
    its `namespace.table`) has its snapshots expired (older than `retain`, each branch
    keeping `retain_last`) and returns an `IcebergVacuumResult`; `lite` is Delta's only. A
    Paimon table has its orphan files older than `retain` (default a day) deleted and
    returns a `PaimonVacuumResult`.
    """
    from dvtool.commands.vacuum.command import VacuumRequest, parse_duration, run_vacuum
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.paimon.tables import PaimonTable
    from dvtool.table import open_readable_table

    retain_ms = parse_duration(retain) if retain is not None else None
    interrupts.begin_library_call()
    options = dict(storage_options or {})
    opened = open_readable_table(os.fspath(table), options, catalog)
    if isinstance(opened, PaimonTable):
        from dvtool.commands.vacuum.paimon import run_vacuum_paimon

        if lite or retain_last is not None:
            raise UsageError("lite and retain_last do not apply to Paimon tables")
        return run_vacuum_paimon(opened, retain_ms, dry_run, force)
    if isinstance(opened, DeltaLog):
        if retain_last is not None:
            raise UsageError("retain_last applies to Iceberg tables only")
        return run_vacuum(opened, VacuumRequest(retain_ms, dry_run, lite, force))
    from dvtool.commands.vacuum.iceberg import IcebergVacuumRequest, run_vacuum_iceberg

    if lite:
        raise UsageError("lite applies to Delta tables only")
    request = IcebergVacuumRequest(retain_ms, retain_last, dry_run, force)
    return run_vacuum_iceberg(opened, request, storage_options=options or None)


def cleanup_log(
    table: str | os.PathLike[str],
    *,
    dry_run: bool = False,
    storage_options: Mapping[str, str] | None = None,
) -> LogCleanupResult:
    """Delete the expired `_delta_log` entries (older than `delta.logRetentionDuration`,
    before the newest checkpoint that old); `dvtool vacuum --log`. `result.reason` says why
    nothing was deleted (e.g. `delta.enableExpiredLogCleanup` is false)."""
    from dvtool.commands.log_cleanup import LogCleanupRequest, run_log_cleanup

    return run_log_cleanup(_open(table, storage_options), LogCleanupRequest(dry_run=dry_run))


def checkpoint(
    table: str | os.PathLike[str], *, storage_options: Mapping[str, str] | None = None
) -> CheckpointResult:
    """Write a checkpoint of the latest version, then clean up the log; `dvtool checkpoint`.
    `result.log_cleanup` is the cleanup's `LogCleanupResult`."""
    from dvtool.commands.checkpoint import run_checkpoint

    return run_checkpoint(_open(table, storage_options))


def delete(
    table: str | os.PathLike[str],
    where: str,
    *,
    mode: str = "auto",
    dry_run: bool = False,
    spark: Any = None,
    storage_options: Mapping[str, str] | None = None,
    catalog: str | None = None,
) -> DeleteResult | IcebergDeleteResult:
    """Delete the rows of `table` matching `where`; what `dvtool delete` does.

    `where` is a Spark SQL boolean predicate on the table's columns. `mode` is `"dv"`
    (merge-on-read: deletion vectors; on Iceberg tables position deletes (v2) or deletion
    vectors (v3)), `"cow"` (rewrite the files without the rows) or `"auto"` (`dv` when the
    table enables deletion vectors; Iceberg: when `write.delete.mode` is merge-on-read).
    `dry_run` plans and writes nothing. `spark` is a SparkSession to scan (and for `cow`
    rewrite) on, kept running; None runs in-process.
    `catalog` opens an Iceberg table (`namespace.table`) through a pyiceberg catalog.
    Returns the `DeleteResult` (`version`: the committed version, None for a dry run or when
    nothing matched; `metrics` Delta's operation metrics; `changes` one entry per file), or
    for an Iceberg table the `IcebergDeleteResult` (`snapshot_id` instead of `version`).
    Conflicting concurrent commits are retried (re-planned) up to 10 times.
    """
    from dvtool.commands.delete.command import DeleteRequest, run_delete
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.table import open_table

    request = DeleteRequest(where, mode, dry_run)
    interrupts.begin_library_call()
    opened = open_table(os.fspath(table), dict(storage_options or {}), catalog)
    if not isinstance(opened, DeltaLog):
        from dvtool.commands.delete.iceberg import run_delete_iceberg, scan_storage

        storage = scan_storage(opened, dict(storage_options or {}))
        with _engine(spark) as engine:
            return run_delete_iceberg(opened, request, storage, engine=engine)
    with _engine(spark) as engine:
        return run_delete(opened, request, engine=engine)


def optimize(
    table: str | os.PathLike[str],
    *,
    purge: bool = False,
    min_deleted_ratio: float | None = None,
    target_size: int | None = None,
    where: str | None = None,
    dry_run: bool = False,
    spark: Any = None,
    storage_options: Mapping[str, str] | None = None,
    rewrite_deletes: bool = False,
    convert_equality: bool = False,
    catalog: str | None = None,
) -> OptimizeResult | IcebergOptimizeResult:
    """Purge deletion vectors (`purge=True`) or compact small files; what `dvtool optimize` does.

    With `purge`, files with deletion vectors are rewritten without their deleted rows
    (only those whose deleted ratio is at least `min_deleted_ratio`, 0..1, if given);
    otherwise small files are compacted towards `target_size` bytes (default the table's
    `delta.targetFileSize`, else 256 MiB; with `purge` it is a UsageError). `where`
    restricts the work to partitions (a predicate on partition columns only). `dry_run`
    plans and writes nothing. `spark` is a SparkSession to rewrite on, kept running; None
    rewrites in-process. Returns the `OptimizeResult`: `versions` the committed versions,
    `bins` the planned output files, `metrics` Delta's operation metrics.

    Iceberg tables (`catalog` opens one through a pyiceberg catalog): `purge` rewrites every
    data file that deletes apply to without its deleted rows, keeping its data sequence
    number, and removes the delete files no other file needs; without it small files are
    compacted and files above 180% of the target split (default target
    `write.target-file-size-bytes`, else 512 MiB);
    `rewrite_deletes` combines position deletes per partition (v3: into deletion vectors)
    and `convert_equality` turns equality deletes into position deletes or DVs (at most one
    of the three); `where` (purge and compaction) chooses the data files whose column
    metrics do not rule out a matching row, on any column. Returns the
    `IcebergOptimizeResult` (`snapshot_id`, `metrics`, `bins` with their planned `outputs`).
    """
    from dvtool.commands.optimize.command import OptimizeRequest, run_optimize
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.table import open_table

    interrupts.begin_library_call()
    opened = open_table(os.fspath(table), dict(storage_options or {}), catalog)
    if not isinstance(opened, DeltaLog):
        from dvtool.commands.optimize.iceberg import optimize_request, run_optimize_iceberg

        flags = {
            "purge": purge,
            "rewrite-deletes": rewrite_deletes,
            "convert-equality": convert_equality,
        }
        iceberg_request = optimize_request(
            flags,
            dry_run=dry_run,
            min_deleted_ratio=min_deleted_ratio,
            target_size=target_size,
            where=where,
        )
        with _engine(spark) as engine:
            return run_optimize_iceberg(opened, iceberg_request, lambda _bytes: engine)
    if rewrite_deletes or convert_equality:
        raise UsageError("rewrite_deletes and convert_equality apply to Iceberg tables only")
    request = OptimizeRequest(purge, min_deleted_ratio, target_size, where, dry_run)
    with _engine(spark) as engine:
        return run_optimize(opened, request, lambda _bytes: engine)


def restore(
    table: str | os.PathLike[str],
    *,
    version: int | None = None,
    timestamp: dt.datetime | None = None,
    dry_run: bool = False,
    storage_options: Mapping[str, str] | None = None,
) -> RestoreResult:
    """Restore the table to an earlier `version`, or to the version as of `timestamp` (an
    aware datetime; naive means UTC); `dvtool restore`. Exactly one of them. `dry_run`
    plans and writes nothing. `result.version` is the committed version, `result.files`
    the files re-added and removed, `result.metrics` Delta's RESTORE metrics. A restore
    that needs vacuumed files raises `FileMissingError`; a concurrent commit,
    `CommitConflictError` (nothing committed)."""
    from dvtool.commands.restore.command import RestoreRequest, run_restore

    request = RestoreRequest(version, _epoch_ms(timestamp), dry_run)
    return run_restore(_open(table, storage_options), request)


def _epoch_ms(timestamp: dt.datetime | None) -> int | None:
    """`timestamp` in epoch milliseconds (a naive datetime is UTC)."""
    if timestamp is None:
        return None
    import datetime as dt

    aware = timestamp if timestamp.tzinfo else timestamp.replace(tzinfo=dt.timezone.utc)
    return int(aware.timestamp() * 1000)


def maintain(
    targets: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    recursive: bool = False,
    dry_run: bool = False,
    purge_ratio: float | None = None,
    target_size: int | None = None,
    checkpoint_interval: int | None = None,
    retain: str | None = None,
    time_budget: str | None = None,
    spark: Any = None,
    storage_options: Mapping[str, str] | None = None,
    catalog: str | None = None,
) -> MaintainResult:
    """Purge, compact, checkpoint, vacuum and clean up the log of each table; `dvtool maintain`.

    `targets` are tables, or with `recursive` prefixes searched for tables. The thresholds
    default to the table properties (`purge_ratio`: `dvtool.maintain.purgeRatio`, else 0.2;
    `target_size` bytes: `delta.targetFileSize`, else 256 MiB; `checkpoint_interval`:
    `delta.checkpointInterval`, else 10); `retain` (`"30d"`) only lengthens the table's
    retention; `time_budget` (`"30m"`) stops starting new steps and tables once spent.
    Iceberg tables get purge, rewrite of delete files, compaction and vacuum (`target_size`:
    `write.target-file-size-bytes`, else 512 MiB; `retain` lengthens
    `history.expire.max-snapshot-age-ms`); with `catalog` the targets are that Iceberg
    catalog's `namespace.table` names. Paimon tables get an inspection (`purge_ratio`
    bounds the deleted ratio, `target_size` defaults to `target-file-size`; when a gate
    fails, the table's `recommendation` is Paimon's full compaction) and the vacuum of
    orphan files older than a day (`retain` lengthens it).
    `dry_run` plans and writes nothing; `spark` is a SparkSession to rewrite on. A table's
    failure never raises: `result.tables` holds each one's plan, actions, metrics and
    error, and `result.exit_code` is the worst of theirs.
    """
    from dvtool.commands.maintain.command import (
        MaintainRequest,
        parse_option_duration,
        run_maintain,
    )

    interrupts.begin_library_call()
    paths = [targets] if isinstance(targets, (str, os.PathLike)) else list(targets)
    request = MaintainRequest(
        purge_ratio=purge_ratio,
        target_size=target_size,
        checkpoint_interval=checkpoint_interval,
        retain_ms=None if retain is None else parse_option_duration(retain, "retain"),
        dry_run=dry_run,
        time_budget_ms=(
            None if time_budget is None else parse_option_duration(time_budget, "time_budget")
        ),
    )
    with _engine(spark) as engine:
        return run_maintain(
            [os.fspath(p) for p in paths],
            request,
            recursive=recursive,
            storage_options=storage_options,
            engine_for=lambda _bytes: engine,
            catalog=catalog,
        )


def _open(table: str | os.PathLike[str], storage_options: Mapping[str, str] | None) -> DeltaLog:
    from dvtool.delta.log.reader import open_log

    interrupts.begin_library_call()
    return open_log(os.fspath(table), dict(storage_options or {}))


@contextlib.contextmanager
def _engine(spark: Any) -> Iterator[Engine]:
    """The arrow engine, or an engine on the caller's session, stopped (confs restored, the
    session left running) at the end."""
    if spark is None:
        from dvtool.engines.arrow import ArrowEngine

        yield ArrowEngine()
        return
    if not (hasattr(spark, "conf") and hasattr(spark, "createDataFrame")):
        raise UsageError(f"spark must be a SparkSession, not {type(spark).__name__}")
    from dvtool.engines.spark.engine import SparkEngine

    engine = SparkEngine.from_session(spark)
    try:
        yield engine
    except BaseException:
        with contextlib.suppress(Exception):  # the command's error says more
            engine.stop()
        raise
    engine.stop()
