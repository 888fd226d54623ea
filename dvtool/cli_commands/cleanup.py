"""Commands that delete what a table no longer needs: `vacuum` (data files, or with `--log`
the expired log entries) and `checkpoint` (which cleans up the log after it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from dvtool.cli_options import (
    TABLE_META,
    json_option,
    limit_option,
    parse_storage_options,
    storage_options_option,
    table_options,
)
from dvtool.errors import UsageError, exit_code_of

if TYPE_CHECKING:
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.iceberg.tables import IcebergTable
    from dvtool.paimon.tables import PaimonTable
    from dvtool.render.renderer import Renderer


@click.command()
@click.argument("table", type=click.Path())
@storage_options_option
@click.option(
    "--catalog",
    metavar="NAME",
    help="Open TABLE (namespace.table) through this Iceberg catalog, configured as "
    "pyiceberg configures it (~/.pyiceberg.yaml, PYICEBERG_CATALOG__NAME__*).",
)
@click.option(
    "--retain",
    metavar="DURATION",
    help="Keep files removed less than DURATION ago: 168h, 7d, 30m, 0h. "
    "Default: the table's delta.deletedFileRetentionDuration (7 days). Iceberg: expire "
    "snapshots older than DURATION (default history.expire.max-snapshot-age-ms, 5 days) "
    "and delete orphan files older than DURATION (default 3 days). Paimon: delete orphan "
    "files older than DURATION (default 1 day).",
)
@click.option(
    "--retain-last",
    type=click.IntRange(min=1),
    metavar="N",
    help="Iceberg: each branch keeps at least its N newest snapshots, however old "
    "(default history.expire.min-snapshots-to-keep, 1).",
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
    table: str,
    storage_options: tuple[str, ...],
    catalog: str | None,
    retain: str | None,
    retain_last: int | None,
    dry_run: bool,
    lite: bool,
    force: bool,
    log_only: bool,
    as_json: bool,
    limit: int | None,
) -> None:
    """Delete files the table no longer needs (data, DV and change data files). Iceberg:
    expire old snapshots, then delete the files only they reached and orphan files.
    Paimon: delete orphan files (snapshot expiry stays Paimon's)."""
    from dvtool.commands.vacuum.command import VacuumRequest, parse_duration, run_vacuum
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.paimon.tables import PaimonTable
    from dvtool.render.renderer import Renderer
    from dvtool.table import open_readable_table

    click.get_current_context().meta[TABLE_META] = table
    options = parse_storage_options(storage_options)
    log = open_readable_table(table, options, catalog)
    if isinstance(log, PaimonTable):
        refused = [
            n
            for n, v in (("--lite", lite), ("--log", log_only), ("--retain-last", retain_last))
            if v
        ]
        if refused:
            raise UsageError(
                f"{', '.join(refused)} does not apply to Paimon tables",
                hint="A Paimon table's vacuum deletes its orphan files; snapshot expiry is "
                "Paimon's own (snapshot.num-retained.*, snapshot.time-retained).",
            )
        _vacuum_paimon(
            log, parse_duration(retain) if retain else None, dry_run, force, as_json, limit
        )
        return
    if not isinstance(log, DeltaLog):
        refused = [n for n, v in (("--lite", lite), ("--log", log_only)) if v]
        if refused:
            raise UsageError(
                f"{', '.join(refused)} applies to Delta tables only",
                hint="An Iceberg table's vacuum expires snapshots and deletes the files only "
                "they reached, and orphan files; run it without these options.",
            )
        retain_ms = parse_duration(retain) if retain is not None else None
        _vacuum_iceberg(log, options, retain_ms, retain_last, dry_run, force, as_json, limit)
        return
    if retain_last is not None:
        raise UsageError(
            "--retain-last applies to Iceberg tables only",
            hint="A Delta table keeps files by age: use --retain.",
        )
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


def _vacuum_iceberg(
    table: IcebergTable,
    options: dict[str, str],
    retain_ms: int | None,
    retain_last: int | None,
    dry_run: bool,
    force: bool,
    as_json: bool,
    limit: int | None,
) -> None:
    """`vacuum` on an Iceberg table: expire snapshots, delete unreachable and orphan files."""
    from dvtool.commands.vacuum.iceberg import IcebergVacuumRequest, run_vacuum_iceberg
    from dvtool.render.renderer import Renderer

    renderer = Renderer(as_json, limit=limit)
    request = IcebergVacuumRequest(retain_ms, retain_last, dry_run, force)
    with renderer.progress("deleting") as progress:
        result = run_vacuum_iceberg(table, request, progress, storage_options=options or None)
    renderer.vacuum_iceberg(result)
    if result.failed:
        click.get_current_context().exit(exit_code_of("storage"))


def _vacuum_paimon(
    table: PaimonTable,
    retain_ms: int | None,
    dry_run: bool,
    force: bool,
    as_json: bool,
    limit: int | None,
) -> None:
    """`vacuum` on a Paimon table: delete its orphan files (snapshot expiry is Paimon's)."""
    from dvtool.commands.vacuum.paimon import run_vacuum_paimon
    from dvtool.render.renderer import Renderer

    renderer = Renderer(as_json, limit=limit)
    with renderer.progress("deleting") as progress:
        result = run_vacuum_paimon(table, retain_ms, dry_run, force, progress)
    renderer.vacuum_paimon(result)
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
