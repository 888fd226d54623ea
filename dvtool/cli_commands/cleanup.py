"""Commands that delete what a table no longer needs: `vacuum` (data files, or with `--log`
the expired log entries) and `checkpoint` (which cleans up the log after it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from dvtool.cli_options import (
    json_option,
    limit_option,
    table_options,
)
from dvtool.errors import UsageError, exit_code_of

if TYPE_CHECKING:
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.render.renderer import Renderer


@click.command()
@table_options
@click.option(
    "--retain",
    metavar="DURATION",
    help="Keep files removed less than DURATION ago: 168h, 7d, 30m, 0h. "
    "Default: the table's delta.deletedFileRetentionDuration (7 days).",
)
@click.option(
    "--dry-run", is_flag=True, help="List the files to delete (path, size, why); delete nothing."
)
@click.option(
    "--lite",
    is_flag=True,
    help="Take candidates from the log (files removed since the last vacuum) instead of "
    "listing the table directory.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Allow --retain shorter than the table's retention. Dangerous: readers of older "
    "versions (time travel) and writers that have not committed yet may lose files.",
)
@click.option(
    "--log",
    "log_only",
    is_flag=True,
    help="Delete expired _delta_log entries instead of data files: commits, checkpoints and "
    "checksums before the newest checkpoint older than delta.logRetentionDuration (30 days), "
    "as Delta does after a checkpoint.",
)
@json_option
@limit_option
def vacuum(
    log: DeltaLog,
    retain: str | None,
    dry_run: bool,
    lite: bool,
    force: bool,
    log_only: bool,
    as_json: bool,
    limit: int | None,
) -> None:
    """Delete files the table no longer needs (data, DV and change data files)."""
    from dvtool.commands.vacuum.command import VacuumRequest, parse_duration, run_vacuum
    from dvtool.render.renderer import Renderer

    if log_only:
        _vacuum_log(log, retain, lite, force, dry_run, Renderer(as_json, limit=limit))
        return
    retain_ms = parse_duration(retain) if retain is not None else None
    renderer = Renderer(as_json, limit=limit)
    with renderer.progress("deleting") as progress:
        result = run_vacuum(log, VacuumRequest(retain_ms, dry_run, lite, force), progress)
    renderer.vacuum(result)
    if result.failed:
        click.get_current_context().exit(exit_code_of("storage"))


def _vacuum_log(
    log: DeltaLog, retain: str | None, lite: bool, force: bool, dry_run: bool, renderer: Renderer
) -> None:
    """`vacuum --log`: the log cleanup alone, at the table's own log retention."""
    from dvtool.commands.log_cleanup import LogCleanupRequest, run_log_cleanup

    given = [
        name
        for name, value in (("--retain", retain is not None), ("--lite", lite), ("--force", force))
        if value
    ]
    if given:
        raise UsageError(
            f"{', '.join(given)} cannot be combined with --log",
            hint="--log deletes log entries older than the table's delta.logRetentionDuration; "
            "run the data-file vacuum separately.",
        )
    result = run_log_cleanup(log, LogCleanupRequest(dry_run=dry_run))
    renderer.log_cleanup(result)
    if result.error:
        click.get_current_context().exit(exit_code_of("storage"))


@click.command()
@table_options
@json_option
def checkpoint(log: DeltaLog, as_json: bool) -> None:
    """Write a checkpoint of the latest version now, then delete expired log entries."""
    from dvtool.commands.checkpoint import run_checkpoint
    from dvtool.render.renderer import Renderer

    Renderer(as_json).checkpoint(run_checkpoint(log))
