"""Commands that delete what a table no longer needs: `vacuum`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from dvtool.cli_options import (
    json_option,
    limit_option,
    table_options,
)
from dvtool.errors import exit_code_of

if TYPE_CHECKING:
    from dvtool.log.reader import DeltaLog


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
@json_option
@limit_option
def vacuum(
    log: DeltaLog,
    retain: str | None,
    dry_run: bool,
    lite: bool,
    force: bool,
    as_json: bool,
    limit: int | None,
) -> None:
    """Delete files the table no longer needs (data, DV and change data files)."""
    from dvtool.commands.vacuum import VacuumRequest, parse_duration, run_vacuum
    from dvtool.render import Renderer

    retain_ms = parse_duration(retain) if retain is not None else None
    renderer = Renderer(as_json, limit=limit)
    with renderer.progress("deleting") as progress:
        result = run_vacuum(log, VacuumRequest(retain_ms, dry_run, lite, force), progress)
    renderer.vacuum(result)
    if result.failed:
        click.get_current_context().exit(exit_code_of("storage"))
