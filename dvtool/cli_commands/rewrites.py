"""Commands that change a table's data or protocol: `enable`, `delete`, `optimize`, `downgrade`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from dvtool.cli_options import (
    EngineFactory,
    SizeParam,
    any_table_options,
    engine_options,
    json_option,
    limit_option,
    table_options,
)
from dvtool.errors import UsageError

if TYPE_CHECKING:
    from dvtool.commands.delete.command import DeleteRequest
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.iceberg.tables import IcebergTable
    from dvtool.render.renderer import Renderer


@click.command()
@table_options
@json_option
def enable(log: DeltaLog, as_json: bool) -> None:
    """Turn deletion vectors on (protocol 3/7 and delta.enableDeletionVectors=true)."""
    from dvtool.commands.enable import run_enable
    from dvtool.render.renderer import Renderer

    result = run_enable(log)
    Renderer(as_json).enable(result)


@click.command()
@any_table_options
@click.option("--where", "where", required=True, metavar="SQL", help="Spark SQL boolean predicate.")
@click.option(
    "--mode",
    type=click.Choice(["auto", "dv", "cow"]),
    default="auto",
    show_default=True,
    help="dv: merge-on-read (Delta: deletion vectors; Iceberg: position deletes on v2, "
    "deletion vectors on v3); cow: rewrite files; auto: dv when the table enables DVs "
    "(Iceberg: write.delete.mode=merge-on-read).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@engine_options
@json_option
@limit_option
def delete(
    table: DeltaLog | IcebergTable,
    storage_options: dict[str, str],
    where: str,
    mode: str,
    dry_run: bool,
    engine_for: EngineFactory,
    as_json: bool,
    limit: int | None,
) -> None:
    """Delete the rows matching --where (merge-on-read: deletion vectors; Iceberg: position
    deletes or deletion vectors)."""
    from dvtool.commands.delete.command import DeleteRequest, run_delete
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.render.renderer import Renderer

    renderer = Renderer(as_json, limit=limit)
    request = DeleteRequest(where, mode, dry_run)
    if not isinstance(table, DeltaLog):
        _delete_iceberg(table, storage_options, request, engine_for, renderer)
        return
    with renderer.progress("scanning") as progress:
        result = run_delete(table, request, progress=progress, engine_for=engine_for)
    renderer.delete(result)


def _delete_iceberg(
    table: IcebergTable,
    storage_options: dict[str, str],
    request: DeleteRequest,
    engine_for: EngineFactory,
    renderer: Renderer,
) -> None:
    from dvtool.commands.delete.iceberg import run_delete_iceberg, scan_storage

    with renderer.progress("scanning") as progress:
        result = run_delete_iceberg(
            table,
            request,
            scan_storage(table, storage_options),
            engine_for=engine_for,
            progress=progress,
        )
    renderer.delete_iceberg(result)


@click.command()
@any_table_options
@click.option(
    "--purge",
    is_flag=True,
    help="Rewrite files with DVs (Iceberg: any deletes) without their deleted rows.",
)
@click.option(
    "--rewrite-deletes",
    is_flag=True,
    help="Iceberg: combine position deletes per partition and drop dangling ones; on v3 "
    "tables turn them into deletion vectors.",
)
@click.option(
    "--convert-equality",
    is_flag=True,
    help="Iceberg: turn equality deletes into position deletes (v2) or deletion vectors (v3).",
)
@click.option(
    "--min-deleted-ratio",
    type=float,
    metavar="R",
    help="With --purge: only files whose deleted ratio is at least R (0..1).",
)
@click.option(
    "--target-size",
    type=SizeParam(minimum=1),
    metavar="SIZE",
    help="Compaction target file size: bytes, 256MB, 1GiB (default: delta.targetFileSize, "
    "else 256 MiB; Iceberg: write.target-file-size-bytes, else 512 MiB).",
)
@click.option(
    "--where",
    "where",
    metavar="SQL",
    help="Restrict to partitions (partition columns only); Iceberg: to the data files whose "
    "column metrics may hold a matching row (--rewrite-deletes: to the delete files of the "
    "partitions that may hold one).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@click.option(
    "--batch-size",
    type=int,
    metavar="N",
    help="Commit every N output files (one transaction each; Iceberg: the new files of a "
    "split file count as one).",
)
@engine_options
@json_option
@limit_option
def optimize(
    table: DeltaLog | IcebergTable,
    storage_options: dict[str, str],
    purge: bool,
    rewrite_deletes: bool,
    convert_equality: bool,
    min_deleted_ratio: float | None,
    target_size: int | None,
    where: str | None,
    dry_run: bool,
    batch_size: int | None,
    engine_for: EngineFactory,
    as_json: bool,
    limit: int | None,
) -> None:
    """Purge DVs by rewriting files (--purge), or compact small files; on Iceberg tables
    also rewrite delete files (--rewrite-deletes, --convert-equality)."""
    from dvtool.commands.optimize.command import OptimizeRequest, run_optimize
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.render.renderer import Renderer

    renderer = Renderer(as_json, limit=limit)
    if not isinstance(table, DeltaLog):
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
            batch_size=batch_size,
        )
        renderer.optimize_iceberg(run_optimize_iceberg(table, iceberg_request, engine_for))
        return
    if rewrite_deletes or convert_equality:
        flag = "--rewrite-deletes" if rewrite_deletes else "--convert-equality"
        raise UsageError(
            f"{flag} applies to Iceberg tables; a Delta table has no delete files",
            hint="Use --purge to apply a Delta table's deletion vectors.",
        )
    request = OptimizeRequest(purge, min_deleted_ratio, target_size, where, dry_run, batch_size)
    with renderer.progress("rewriting") as progress:
        result = run_optimize(table, request, engine_for, progress)
    renderer.optimize(result)


@click.command()
@table_options
@click.option(
    "--truncate-history",
    is_flag=True,
    help="Also delete the log before a checkpoint taken after the purge and drop "
    "checkpointProtection, so that writers without DV support can write the table.",
)
@click.option(
    "--force",
    is_flag=True,
    help="With --truncate-history: truncate even if that checkpoint is younger than "
    "delta.dropFeatureTruncateHistory.retentionDuration (24 hours).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@engine_options
@json_option
def downgrade(
    log: DeltaLog,
    truncate_history: bool,
    force: bool,
    dry_run: bool,
    engine_for: EngineFactory,
    as_json: bool,
) -> None:
    """Drop deletion vectors (the deletionVectors table feature) from a table."""
    from dvtool.commands.downgrade.command import HistoryRetentionError, run_downgrade
    from dvtool.render.renderer import Renderer

    renderer = Renderer(as_json)
    with renderer.progress("rewriting") as progress:
        try:
            result = run_downgrade(
                log, truncate_history, dry_run, force, engine_for, progress=progress
            )
        except HistoryRetentionError as e:
            if as_json:
                renderer.downgrade(e.partial)  # what was committed, then the error (exit 1)
            raise
    renderer.downgrade(result)
