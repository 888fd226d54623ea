"""The command that brings a table back to an earlier version: `restore`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from dvtool.cli_options import TimestampParam, json_option, limit_option, table_options

if TYPE_CHECKING:
    from dvtool.delta.log.reader import DeltaLog


@click.command()
@table_options
@click.option(
    "--version", "version", type=click.IntRange(min=0), help="Restore the table to this version."
)
@click.option(
    "--timestamp",
    type=TimestampParam(),
    help="Restore the version as of this time (ISO 8601; naive means UTC).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@json_option
@limit_option
def restore(
    log: DeltaLog,
    version: int | None,
    timestamp: int | None,
    dry_run: bool,
    as_json: bool,
    limit: int | None,
) -> None:
    """Restore the table to an earlier version (Delta's RESTORE TABLE)."""
    from dvtool.commands.restore.command import RestoreRequest, run_restore
    from dvtool.render.renderer import Renderer

    result = run_restore(log, RestoreRequest(version, timestamp, dry_run))
    Renderer(as_json, limit=limit).restore(result)
