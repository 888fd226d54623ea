"""How `dvtool vacuum` reads for a person on a Paimon table.

One line with the retention and what was read (snapshots, tags and changelogs kept, of
which branches, files listed), one per external data path left to Paimon, one with the
orphan files found; a dry run lists them with the renderer's file listing (paths under
the table folder), a real run says what it deleted; a file that could not be deleted is a
warning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dvtool.render.plain_console import escape
from dvtool.render.values import format_bytes, format_time, plural

if TYPE_CHECKING:
    from dvtool.commands.vacuum.paimon import PaimonVacuumResult
    from dvtool.render.output import Output


def show(renderer: Output, result: PaimonVacuumResult) -> None:
    """The orphan files and, unless a dry run, what was deleted; JSON with --json."""
    from dvtool.commands.vacuum.retention import format_duration

    if renderer.as_json:
        renderer.json(result.to_json())
        return
    r = renderer
    r.say(
        ("[bold]dry run[/]: " if result.dry_run else "")
        + f"Paimon orphan files of {escape(result.location)}: files older than "
        f"{format_time(result.cutoff_ms)} (retention {format_duration(result.retention_ms)}) "
        f"that none of the {result.roots:,} kept snapshots, tags and changelogs"
        + _of_branches(result.branches)
        + f" reaches, among {plural(result.listed_files, 'listed file')}"
    )
    for path in result.external_paths_left:
        r.say(
            f"external data path {escape(path)}: outside the table, left to Paimon's "
            "remove_orphan_files"
        )
    r.say(f"{plural(len(result.files), 'orphan file')} ({format_bytes(result.num_bytes)})")
    if result.dry_run:
        if result.files:
            rows = (
                (format_bytes(f.size), format_time(f.modification_time_ms), f.path)
                for f in result.files
            )
            r.listing(
                "Files to delete", ("size", "modified", "path"), rows, len(result.files), "files"
            )
        return
    r.say(f"deleted {plural(result.deleted_files, 'file')} ({format_bytes(result.deleted_bytes)})")
    for failure in result.failed:
        r.warn(f"{failure.path}: {failure.error}", "[red]not deleted:[/]")


def _of_branches(branches: list[str]) -> str:
    """` of branches dev, main` when the table has more than main; else nothing."""
    return "" if branches == ["main"] else f" of branches {escape(', '.join(branches))}"
