"""How `dvtool maintain` reads for a person (and in a cron job's log).

One summary table, a row per table and a column per step with what the step did (or, in a
dry run, would do), then a line per step that did or would do something, the errors on
stderr, and a last line with the totals and the exit code. With `--json` the result's
document is printed instead.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from dvtool.box_table import BoxTable, Column
from dvtool.plain_console import escape
from dvtool.render_values import format_bytes

if TYPE_CHECKING:
    from dvtool.commands.maintain import MaintainResult, StepOutcome, TableOutcome
    from dvtool.render import Renderer

_STEP_TITLES = {
    "purge": "purge",
    "compaction": "compaction",
    "checkpoint": "checkpoint",
    "vacuum": "vacuum",
    "log-cleanup": "log cleanup",
}
_MARKS = {"skipped": "skipped", "not-run": "not run", "nothing-to-do": "-"}


def render_maintain(renderer: Renderer, result: MaintainResult) -> None:
    """The result's JSON document, or the summary table, the steps' details, the errors
    and the totals."""
    if renderer.as_json:
        renderer.json(result.to_json())
        return
    c = renderer.console
    if result.dry_run:
        c.print("[bold]dry run[/]: nothing written; each step planned against the table as it is")
    c.print(summary_table(result).to_rich())
    for table in result.tables:
        for action in table.actions:
            if action.status in ("done", "planned"):
                c.print(
                    f"{escape(table.location)}: {action.step}: {escape(action.detail)}",
                    soft_wrap=True,
                )
    for table in result.tables:
        if table.kind != "ok":
            _print_error(renderer, table)
    c.print(_totals(result), soft_wrap=True)


def summary_table(result: MaintainResult) -> BoxTable:
    """A row per table: where, its status, versions read and reached, then each step."""
    columns = [Column("table", overflow="fold"), Column("status"), Column("version")]
    columns += [Column(title) for title in _STEP_TITLES.values()]
    t = BoxTable("Maintenance", columns)
    for table in result.tables:
        actions = {a.step: a for a in table.actions}
        cells = [_step_cell(actions.get(step)) for step in _STEP_TITLES]
        t.add_row(escape(table.location), _status(table), _versions(table), *cells)
    return t


def _status(table: TableOutcome) -> str:
    if table.kind != "ok":
        return f"[red]FAILED ({table.kind})[/]"
    return {"ok": "[green]ok[/]", "partial": "[yellow]partial[/]"}.get(
        table.status, f"[yellow]{table.status}[/]"
    )


def _versions(table: TableOutcome) -> str:
    if table.plan is None:
        return ""
    versions = table.metrics.get("versions") or []
    start = table.plan.read_version
    return f"{start} -> {max(versions)}" if versions else str(start)


def _step_cell(action: StepOutcome | None) -> str:
    """What one step did, in a few words."""
    if action is None:
        return ""
    if action.status == "failed":
        return "[red]FAILED[/]"
    if action.status in _MARKS:
        return _MARKS[action.status]
    prefix = "would: " if action.status == "planned" else ""
    return prefix + _what(action.step, action.result or {})


def _what(step: str, result: dict[str, Any]) -> str:
    """The size of what a step did (or would do), from its command's result document."""
    if step in ("purge", "compaction"):
        bins = result.get("bins") or []
        inputs = sum(len(b["inputs"]) for b in bins)
        return f"{inputs:,} files -> {len(bins):,}"
    if step == "checkpoint":
        return f"v{result['version']}" if "version" in result else "due"
    if step == "vacuum":
        deleted = result.get("deleted_files") if not result.get("dry_run") else None
        files = result.get("num_files", 0) if deleted is None else deleted
        size = result.get("num_bytes", 0) if deleted is None else result.get("deleted_bytes", 0)
        return f"{files:,} files ({format_bytes(size)})"
    return f"{result.get('deleted_files', 0):,} files"


def _print_error(renderer: Renderer, table: TableOutcome) -> None:
    error = table.to_json()["error"] or {}
    message = str(error.get("message"))
    # The table's location, unless the message names it already (a missing prefix did).
    where = "" if _names(message, table.location) else f"{escape(table.location)}: "
    renderer.err.print(f"[bold red]error:[/] {where}{escape(message)}", soft_wrap=True)
    if error.get("hint"):
        renderer.err.print(f"  {escape(str(error['hint']))}", soft_wrap=True)


def _names(message: str, location: str) -> bool:
    """Whether `message` names `location` as typed or, for a local path, as an absolute
    path: as a whole path (`t` is not named by "table" but is by "/tmp/x/t:")."""
    spellings = {location.rstrip("/")}
    if "://" not in location:
        spellings.add(os.path.abspath(location))
    return any(
        re.search(rf"(^|[\s/'\"]){re.escape(s)}($|[\s:;,'\"])", message) for s in spellings if s
    )


def _totals(result: MaintainResult) -> str:
    statuses = [t.status for t in result.tables]
    kinds = [s for s in ("ok", "partial", "skipped", "failed") if s in statuses]
    counts = ", ".join(f"{statuses.count(s):,} {s}" for s in kinds)
    budget = " (time budget spent)" if "skipped" in statuses or "partial" in statuses else ""
    return (
        f"{len(result.tables):,} table{'' if len(result.tables) == 1 else 's'}: "
        f"{counts or 'none'}{budget}; "
        f"exit code {result.exit_code} ({result.kind})"
    )
