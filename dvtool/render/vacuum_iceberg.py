"""How `dvtool vacuum` reads for a person on an Iceberg table.

Like Delta's vacuum view (`dvtool.render.log.vacuum`): one line with the retention and the
snapshots expired, one with the files by reason; a dry run lists the files it would
delete with the renderer's file listing (paths under the table location), a real run says
what it deleted and the metadata file it committed; failures, files outside the table
location and folders not listed are warnings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dvtool.render.plain_console import escape
from dvtool.render.values import format_bytes, format_time, plural

if TYPE_CHECKING:
    from dvtool.commands.vacuum.iceberg import IcebergVacuumResult
    from dvtool.render.output import Output


def show(renderer: Output, result: IcebergVacuumResult) -> None:
    """The plan and, unless a dry run, what was committed and deleted; JSON with --json."""
    from dvtool.commands.vacuum.iceberg import reasons_count
    from dvtool.commands.vacuum.retention import format_duration

    if renderer.as_json:
        renderer.json(result.to_json())
        return
    r = renderer
    expired = plural(len(result.expired_snapshots), "snapshot")
    plan = (
        f"Iceberg vacuum of {escape(result.location)}: {expired} older than "
        f"{format_time(result.cutoff_ms)} expire (retention "
        f"{format_duration(result.retention_ms)}), {len(result.kept_snapshots)} kept"
    )
    if result.expired_refs:
        plan += f"; refs removed: {escape(', '.join(result.expired_refs))}"
    r.say(("[bold]dry run[/]: " if result.dry_run else "") + plan)
    counts = ", ".join(f"{n} {escape(reason)}" for reason, n in reasons_count(result.files).items())
    r.say(
        f"{plural(result.num_files, 'file')} ({format_bytes(result.num_bytes)}) to delete"
        + (f": {counts}" if counts else "")
        + f"; orphans are files older than {format_time(result.orphan_cutoff_ms)} "
        f"(retention {format_duration(result.orphan_retention_ms)}) among "
        f"{plural(result.listed_files, 'listed file')}"
    )
    if result.dry_run:
        if result.files:
            rows = (
                ("-" if f.size is None else format_bytes(f.size), f.reason, f.path)
                for f in result.files
            )
            header = ("size", "reason", "path")
            r.listing("Files to delete", header, rows, len(result.files), "files")
    else:
        committed = result.committed_metadata_location
        line = (
            f"deleted {plural(result.deleted_files, 'file')} ({format_bytes(result.deleted_bytes)})"
        )
        if committed is not None:
            line += f"; committed {escape(committed)}"
        r.say(line)
        for failure in result.failed:
            r.warn(f"{failure.path}: {failure.error}", "[red]not deleted:[/]")
    _warnings(r, result)


def _warnings(r: Output, result: IcebergVacuumResult) -> None:
    if result.outside_location:
        examples = ", ".join(result.outside_location[:3])
        r.warn(
            f"{plural(len(result.outside_location), 'unreachable file')} outside the table "
            f"location {result.location} were not deleted: {examples}"
        )
    if result.not_listed:
        r.warn(
            "not searched for orphan files (outside the table location): "
            + ", ".join(result.not_listed)
        )
    for warning in result.warnings:
        r.warn(warning)
