"""How the commands that rewrite a table read for a person: enable, delete, optimize,
generate-manifest and downgrade.

Each function takes the `Output` (dvtool.render.renderer) its output goes through: one JSON
document
with `--json`, else lines within the output's width (`Output.say`), listings and tables
that become records where they do not fit; warnings go to stderr. Totals come last, where a
log's reader looks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dvtool.render.box_table import BoxTable, Column
from dvtool.render.plain_console import escape
from dvtool.render.values import format_bytes, format_metrics, format_protocol, plural

if TYPE_CHECKING:
    from dvtool.commands.delete.command import DeleteResult
    from dvtool.commands.downgrade.command import DowngradeResult
    from dvtool.commands.enable import EnableResult
    from dvtool.commands.manifest import ManifestResult
    from dvtool.commands.optimize.command import OptimizeResult
    from dvtool.render.output import Output

_LISTED_FILES = 20


def enable(r: Output, result: EnableResult) -> None:
    if r.as_json:
        r.json(result.to_json())
    elif result.changed:
        r.say(f"deletion vectors enabled: committed version {result.version}")
    else:
        r.say(f"deletion vectors were already enabled (version {result.read_version})")


def delete(r: Output, result: DeleteResult) -> None:
    if r.as_json:
        r.json(result.to_json())
        return
    m = result.metrics
    if result.dry_run:
        r.say(f"[bold]dry run[/] against version {result.read_version}: nothing written")
    elif result.version is None:
        r.say(f"no rows matched at version {result.read_version}: nothing committed")
    else:
        r.say(f"committed version [bold]{result.version}[/] ({result.mode} mode)")
    if result.dry_run and result.changes:
        rows = (
            (
                f"{ch.deleted_rows:,}",
                "?" if ch.num_records is None else f"{ch.num_records:,}",
                ch.action,
                "scanned" if ch.read else "from stats",
                ch.path,
            )
            for ch in result.changes
        )
        header = ("rows deleted", "records", "action", "read", "path")
        r.listing("Plan", header, rows, len(result.changes), "files")
    # The totals come last, after any listing, where a log's reader looks.
    r.say(
        f"files: {result.files_skipped:,} skipped, {result.files_scanned:,} scanned, "
        f"{len(result.changes):,} changed; rows deleted: {m['numDeletedRows']:,}"
    )
    if not result.dry_run and result.version is not None:
        r.say(f"metrics: {escape(format_metrics(m))}")
    for warning in (result.checkpoint_warning, result.manifest_warning):
        if warning:
            r.warn(warning)


def optimize(r: Output, result: OptimizeResult) -> None:
    if r.as_json:
        r.json(result.to_json())
        return
    m = result.metrics
    what = "purge" if result.operation == "REORG" else "compaction"
    rows = sum(b.rows_dropped for b in result.bins)
    size = format_bytes(sum(b.input_bytes for b in result.bins))
    plan = (
        f"{what}: {plural(sum(len(b.inputs) for b in result.bins), 'file')} ({size}) into "
        f"{plural(len(result.bins), 'new file')}, dropping {plural(rows, 'deleted row')}"
    )
    if result.dry_run:
        r.say(f"[bold]dry run[/] against version {result.read_version} ({result.engine}): {plan}")
        plan_rows = (
            (
                f"{len(b.inputs):,}",
                format_bytes(b.input_bytes),
                f"{b.input_rows:,}",
                f"{b.rows_dropped:,}",
                b.directory or "/",
            )
            for b in result.bins
        )
        header = ("inputs", "bytes", "rows", "rows dropped", "directory")
        r.listing("Plan", header, plan_rows, len(result.bins), "new files")
        r.say(plan)
    elif not result.versions:
        verb = "purge" if result.operation == "REORG" else "compact"
        r.say(f"nothing to {verb} at version {result.read_version}: nothing committed")
    else:
        versions = ", ".join(f"{v}" for v in result.versions)
        r.say(f"committed version(s) [bold]{versions}[/] on {result.engine}: {plan}")
        r.say(
            f"removed {plural(m['numRemovedFiles'], 'file')} "
            f"({format_bytes(m['numRemovedBytes'])}), "
            f"added {m['numAddedFiles']:,} ({format_bytes(m['numAddedBytes'])}), "
            f"{plural(m['numDeletionVectorsRemoved'], 'DV')} removed"
        )
    for warning in result.checkpoint_warnings:
        r.warn(warning)


def manifest(r: Output, result: ManifestResult) -> None:
    if r.as_json:
        r.json(result.to_json())
        return
    if result.purge is not None and result.purge.versions:
        versions = ", ".join(f"{v}" for v in result.purge.versions)
        m = result.purge.metrics
        r.say(
            f"purged deletion vectors: committed version(s) [bold]{versions}[/] "
            f"({plural(m['numRemovedFiles'], 'file')} rewritten, "
            f"{plural(m['numDeletionVectorRowsRemoved'], 'deleted row')} dropped)"
        )
    r.say(
        f"wrote {plural(len(result.manifests), 'manifest')} listing "
        f"{plural(result.num_files, 'file')} of version [bold]{result.version}[/] under "
        f"{escape(result.root)}"
    )
    if result.deleted:
        r.say(f"deleted {plural(len(result.deleted), 'stale manifest')}:")
        for location in result.deleted:
            r.say(f"  {escape(location)}", indent="    ")
    for warning in result.warnings:
        r.warn(warning)


def downgrade(r: Output, result: DowngradeResult) -> None:
    if r.as_json:
        r.json(result.to_json())
        return
    if not result.dropped_features:
        what = "deletion vectors" + (" or checkpointProtection" if result.truncate_history else "")
        r.say(
            f"nothing to downgrade at version {result.read_version}: the table does not "
            f"support {what}"
        )
        return
    dropped = ", ".join(result.dropped_features)
    if result.dry_run:
        r.say(f"[bold]dry run[/] against version {result.read_version}: nothing written")
    elif result.version is not None:
        r.say(f"dropped {dropped}: committed version [bold]{result.version}[/]")
    else:
        r.say(f"{dropped} not dropped yet (version {result.read_version})")
    r.say(
        f"protocol {format_protocol(result.protocol_before)} -> "
        f"{format_protocol(result.protocol_after)}"
    )
    columns = [Column(name) for name in ("step", "version", "detail")]
    t = BoxTable("Plan" if result.dry_run else "Steps", columns)
    for step in result.steps:
        version = "" if step.version is None else f"{step.version}"
        t.add_row(step.action, version, escape(step.detail))
    r.table(t)
    if result.dry_run and result.files_to_rewrite:
        paths = result.files_to_rewrite
        r.say(f"files to rewrite ({len(paths):,}):")
        for path in paths[:_LISTED_FILES]:
            r.say(f"  {escape(path)}", indent="    ")
        if len(paths) > _LISTED_FILES:
            r.say(f"  ... and {len(paths) - _LISTED_FILES:,} more (--json lists all)")
    if result.deleted_log_files:
        verb = "would delete" if result.dry_run else "deleted"
        boundary = result.history_boundary
        start = f"version {boundary}" if boundary is not None else "the new boundary"
        r.say(
            f"{verb} {plural(len(result.deleted_log_files), 'log file')}; history starts at {start}"
        )
    for warning in result.warnings:
        r.warn(warning)
