"""Commands that change a table's data or protocol: `enable`, `delete`, `optimize`, `downgrade`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from dvtool.cli_options import (
    EngineFactory,
    SizeParam,
    engine_options,
    json_option,
    limit_option,
    table_options,
)

if TYPE_CHECKING:
    from dvtool.delta.log.reader import DeltaLog


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
@table_options
@click.option("--where", "where", required=True, metavar="SQL", help="Spark SQL boolean predicate.")
@click.option(
    "--mode",
    type=click.Choice(["auto", "dv", "cow"]),
    default="auto",
    show_default=True,
    help="dv: write deletion vectors; cow: rewrite files; auto: dv when the table enables DVs.",
)
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@engine_options
@json_option
@limit_option
def delete(
    log: DeltaLog,
    where: str,
    mode: str,
    dry_run: bool,
    engine_for: EngineFactory,
    as_json: bool,
    limit: int | None,
) -> None:
    """Delete the rows matching --where (merge-on-read with deletion vectors)."""
    from dvtool.commands.delete.command import DeleteRequest, run_delete
    from dvtool.render.renderer import Renderer

    renderer = Renderer(as_json, limit=limit)
    with renderer.progress("scanning") as progress:
        result = run_delete(
            log,
            DeleteRequest(where, mode, dry_run),
            progress=progress,
            engine_for=engine_for,
        )
    renderer.delete(result)


@click.command()
@table_options
@click.option("--purge", is_flag=True, help="Rewrite files with DVs without their deleted rows.")
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
    "else 256 MiB).",
)
@click.option(
    "--where", "where", metavar="SQL", help="Restrict to partitions (partition columns only)."
)
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@click.option(
    "--batch-size",
    type=int,
    metavar="N",
    help="Commit every N output files (one transaction each).",
)
@engine_options
@json_option
@limit_option
def optimize(
    log: DeltaLog,
    purge: bool,
    min_deleted_ratio: float | None,
    target_size: int | None,
    where: str | None,
    dry_run: bool,
    batch_size: int | None,
    engine_for: EngineFactory,
    as_json: bool,
    limit: int | None,
) -> None:
    """Purge DVs by rewriting files (--purge), or compact small files."""
    from dvtool.commands.optimize.command import OptimizeRequest, run_optimize
    from dvtool.render.renderer import Renderer

    renderer = Renderer(as_json, limit=limit)
    request = OptimizeRequest(purge, min_deleted_ratio, target_size, where, dry_run, batch_size)
    with renderer.progress("rewriting") as progress:
        result = run_optimize(log, request, engine_for, progress)
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
