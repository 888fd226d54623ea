"""How `dvtool vacuum`, `dvtool checkpoint` and `dvtool vacuum --log` read for a person.

Each function takes the `Output` (dvtool.render.renderer) that the command's output goes through:
one JSON document with `--json`, else lines within the output's width; warnings and errors
go to stderr. A dry run lists the files it would delete with the renderer's file listing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dvtool.render.plain_console import escape
from dvtool.render.values import format_bytes, format_time, plural

if TYPE_CHECKING:
    from dvtool.commands.checkpoint import CheckpointResult
    from dvtool.commands.log_cleanup import LogCleanupResult
    from dvtool.commands.vacuum.command import VacuumResult
    from dvtool.render.output import Output


def vacuum(renderer: Output, result: VacuumResult) -> None:
    """What vacuum deletes (or, in a dry run, would delete), and the commits it made."""
    from dvtool.commands.vacuum.command import format_duration

    if renderer.as_json:
        renderer.json(result.to_json())
        return
    r = renderer
    what = "lite vacuum" if result.lite else "vacuum"
    plan = (
        f"{what} of version {result.read_version}: {plural(result.num_files, 'file')} "
        f"({format_bytes(result.num_bytes)}) not needed and last changed before "
        f"{format_time(result.cutoff_ms)} (retention {format_duration(result.retention_ms)})"
    )
    if result.lite_commits:
        first, last = result.lite_commits
        plan += f"; read commits {first} to {last}"
    if result.dry_run:
        r.say("[bold]dry run[/]: " + plan)
        if result.files:
            rows = ((format_bytes(f.size), f.reason, f.path) for f in result.files)
            header = ("size", "reason", "path")
            r.listing("Files to delete", header, rows, len(result.files), "files")
    else:
        r.say(plan)
        r.say(
            f"deleted {plural(result.deleted_files, 'file')} "
            f"({format_bytes(result.deleted_bytes)}) and "
            f"{plural(result.deleted_directories, 'empty directory')}; committed VACUUM START "
            f"(version {result.start_version}) and VACUUM END (version {result.end_version})"
        )
        for failure in result.failed:
            r.warn(f"{failure.path}: {failure.error}", "[red]not deleted:[/]")
    if result.num_ignored_log_paths:
        examples = ", ".join(p.path for p in result.ignored_log_paths[:3])
        r.warn(
            f"{plural(result.num_ignored_log_paths, 'path')} in the log are not inside the "
            f"table root and were ignored (never deleted): {examples}"
        )
    for warning in result.warnings:
        r.warn(warning)


def log_cleanup(renderer: Output, result: LogCleanupResult) -> None:
    """The cleanup's cutoff and what it deleted (or, in a dry run, the files it would)."""
    if renderer.as_json:
        renderer.json(result.to_json())
        return
    prefix = "[bold]dry run[/]: " if result.dry_run else ""
    renderer.say(prefix + _cutoff_line(result))
    renderer.say(_outcome_line(result))
    if result.dry_run and result.files:
        rows = ((format_bytes(f.size), _version(f.version), f.name) for f in result.files)
        header = ("size", "version", "file under _delta_log")
        renderer.listing("Log files to delete", header, rows, len(result.files), "files", "file")
    if result.error:
        renderer.warn(result.error, "[red]error:[/]")


def checkpoint(renderer: Output, result: CheckpointResult) -> None:
    """The checkpoint written (or found) and the cleanup after it."""
    if renderer.as_json:
        renderer.json(result.to_json())
        return
    names = ", ".join(result.names)
    if result.info is not None:
        renderer.say(
            f"wrote the checkpoint of version {result.version}: {escape(names)} "
            f"({plural(result.info.size, 'action')}, {format_bytes(result.info.size_in_bytes)})"
        )
    else:
        renderer.say(f"version {result.version} already has a checkpoint: {escape(names)}")
    for repair in result.repairs:
        renderer.say(f"repaired: {escape(repair)}")
    cleanup = result.log_cleanup
    if cleanup is not None:
        renderer.say("log cleanup: " + _cutoff_line(cleanup))
        renderer.say(_outcome_line(cleanup))
    for warning in result.warnings:
        renderer.warn(warning)


def _cutoff_line(result: LogCleanupResult) -> str:
    from dvtool.commands.vacuum.retention import format_duration

    text = (
        f"log retention {format_duration(result.retention_ms)} (version {result.version}): "
        f"cutoff {format_time(result.cutoff_timestamp_ms)}"
    )
    if result.cutoff_commit is not None:
        text += f", cutoff commit {result.cutoff_commit}"
    if result.cutoff_checkpoint is not None:
        text += f", cutoff checkpoint {result.cutoff_checkpoint}"
    return text


def _outcome_line(result: LogCleanupResult) -> str:
    if result.reason is not None and not result.files:
        return f"nothing deleted: {escape(result.reason)}"
    verb = "would delete" if result.dry_run else "deleted"
    return (
        f"{verb} {plural(result.deleted_files, 'log file')} "
        f"({format_bytes(result.deleted_bytes)}) before version {result.cutoff_checkpoint}"
    )


def _version(version: int | None) -> str:
    return "-" if version is None else str(version)
