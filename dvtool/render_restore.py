"""How `dvtool restore` shows its result: one JSON document, or lines for people.

For people: what was restored (or, for a dry run, what would be), the plan as a listing
(re-added files first, then removed ones; `--limit` applies), and the totals last, where a
log's reader looks. A conflict or a refusal never gets here: it is an error with its exit
code.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from dvtool.plain_console import escape
from dvtool.render_values import format_bytes, format_pairs, format_protocol

if TYPE_CHECKING:
    from dvtool.commands.restore import RestoredFile, RestoreResult
    from dvtool.render import Renderer


def render_restore(renderer: Renderer, result: RestoreResult) -> None:
    """Draw `result` with `renderer` (its JSON document under `--json`)."""
    if renderer.as_json:
        renderer.json(result.to_json())
        return
    c = renderer.console
    target = result.restored_version
    if result.dry_run:
        c.print(
            f"[bold]dry run[/]: restore version {target} on version {result.read_version}: "
            "nothing written"
        )
        if result.files:
            header = ("action", "size", "records", "deleted", "path  [partition]")
            renderer.listing("Plan", header, _rows(result.files), len(result.files), "files")
    else:
        c.print(
            f"restored version {target}: committed version [bold]{result.version}[/] "
            f"(read version {result.read_version})"
        )
    c.print(_totals(result), soft_wrap=True)
    if result.protocol_changed:
        verb = "would become" if result.dry_run else "is now"
        c.print(f"protocol {verb} {format_protocol(result.protocol)}", soft_wrap=True)
    if not result.dry_run:
        c.print(f"metrics: {format_pairs(result.metrics)}", soft_wrap=True)
    for warning in (result.checkpoint_warning, result.manifest_warning):
        if warning:
            renderer.err.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)


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
        f"{re_add} {m['numRestoredFiles']:,} files ({format_bytes(m['restoredFilesSize'])}) "
        f"and {remove} {m['numRemovedFiles']:,} ({format_bytes(m['removedFilesSize'])}); "
        f"the table {then} {m['numOfFilesAfterRestore']:,} files "
        f"({format_bytes(m['tableSizeAfterRestore'])})"
    )
