"""How `dvtool restore` shows its result: one JSON document, or lines for people.

For people: what was restored (or, for a dry run, what would be), the plan as a listing
(re-added files first, then removed ones; `--limit` applies), and the totals last, where a
log's reader looks; all within the output's width (`Output.say`, `Output.listing`).
A conflict or a refusal never gets here: it is an error with its exit code.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from dvtool.render.plain_console import escape
from dvtool.render.values import format_bytes, format_metrics, format_protocol, plural

if TYPE_CHECKING:
    from dvtool.commands.restore.command import RestoredFile, RestoreResult
    from dvtool.render.output import Output


def render_restore(renderer: Output, result: RestoreResult) -> None:
    """Draw `result` with `renderer` (its JSON document under `--json`)."""
    if renderer.as_json:
        renderer.json(result.to_json())
        return
    r = renderer
    target = result.restored_version
    if result.dry_run:
        r.say(
            f"[bold]dry run[/]: restore version {target} on version {result.read_version}: "
            "nothing written"
        )
        if result.files:
            header = ("action", "size", "records", "deleted", "path  [partition]")
            rows = _rows(result.files)
            r.listing("Plan", header, rows, len(result.files), "files", key="path")
    else:
        r.say(
            f"restored version {target}: committed version [bold]{result.version}[/] "
            f"(read version {result.read_version})"
        )
    r.say(_totals(result))
    if result.protocol_changed:
        verb = "would become" if result.dry_run else "is now"
        r.say(f"protocol {verb} {format_protocol(result.protocol)}")
    if not result.dry_run:
        r.say(f"metrics: {escape(format_metrics(result.metrics))}")
    for warning in (result.checkpoint_warning, result.manifest_warning):
        if warning:
            r.warn(warning)


def _rows(files: Sequence[RestoredFile]) -> Iterator[tuple[str, ...]]:
    for f in files:
        partitions = "".join(f"  {k}={v}" for k, v in f.partition_values.items())
        yield (
            f.action,
            format_bytes(f.size),
            "?" if f.num_records is None else f"{f.num_records:,}",
            f"{f.deleted_rows:,}",
            f.path + partitions,
        )


def _totals(result: RestoreResult) -> str:
    m = result.metrics
    verbs = ("would re-add", "remove", "would then have") if result.dry_run else None
    re_add, remove, then = verbs or ("re-added", "removed", "now has")
    return (
        f"{re_add} {plural(m['numRestoredFiles'], 'file')} "
        f"({format_bytes(m['restoredFilesSize'])}) "
        f"and {remove} {m['numRemovedFiles']:,} ({format_bytes(m['removedFilesSize'])}); "
        f"the table {then} {plural(m['numOfFilesAfterRestore'], 'file')} "
        f"({format_bytes(m['tableSizeAfterRestore'])})"
    )
