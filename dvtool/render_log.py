"""How `dvtool checkpoint` and `dvtool vacuum --log` read for a person.

Each function takes the `Renderer` (dvtool.render) that the command's output goes through:
one JSON document with `--json`, else lines on its console; warnings and errors go to
stderr. A dry run lists the log files it would delete with the renderer's file listing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dvtool.plain_console import escape
from dvtool.render_values import format_bytes, format_time

if TYPE_CHECKING:
    from dvtool.commands.checkpoint import CheckpointResult
    from dvtool.commands.log_cleanup import LogCleanupResult
    from dvtool.render import Renderer


def log_cleanup(renderer: Renderer, result: LogCleanupResult) -> None:
    """The cleanup's cutoff and what it deleted (or, in a dry run, the files it would)."""
    if renderer.as_json:
        renderer.json(result.to_json())
        return
    console = renderer.console
    prefix = "[bold]dry run[/]: " if result.dry_run else ""
    console.print(prefix + _cutoff_line(result), soft_wrap=True)
    console.print(_outcome_line(result), soft_wrap=True)
    if result.dry_run and result.files:
        rows = ((format_bytes(f.size), _version(f.version), f.name) for f in result.files)
        header = ("size", "version", "file under _delta_log")
        renderer.listing("Log files to delete", header, rows, len(result.files), "files")
    if result.error:
        renderer.err.print(f"[red]error:[/] {escape(result.error)}", soft_wrap=True)


def checkpoint(renderer: Renderer, result: CheckpointResult) -> None:
    """The checkpoint written (or found) and the cleanup after it."""
    if renderer.as_json:
        renderer.json(result.to_json())
        return
    console = renderer.console
    names = ", ".join(result.names)
    if result.info is not None:
        console.print(
            f"wrote the checkpoint of version {result.version}: {escape(names)} "
            f"({result.info.size:,} actions, {format_bytes(result.info.size_in_bytes)})",
            soft_wrap=True,
        )
    else:
        console.print(
            f"version {result.version} already has a checkpoint: {escape(names)}", soft_wrap=True
        )
    for repair in result.repairs:
        console.print(f"repaired: {escape(repair)}", soft_wrap=True)
    cleanup = result.log_cleanup
    if cleanup is not None:
        console.print("log cleanup: " + _cutoff_line(cleanup), soft_wrap=True)
        console.print(_outcome_line(cleanup), soft_wrap=True)
    for warning in result.warnings:
        renderer.err.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)


def _cutoff_line(result: LogCleanupResult) -> str:
    from dvtool.commands.vacuum_retention import format_duration

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
        f"{verb} {result.deleted_files:,} log files ({format_bytes(result.deleted_bytes)}) "
        f"before version {result.cutoff_checkpoint}"
    )


def _version(version: int | None) -> str:
    return "-" if version is None else str(version)
