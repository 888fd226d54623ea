"""How `dvtool maintain` reads for a person (and in a cron job's log).

One summary table, a row per table and a column per step with what the step did (or, in a
dry run, would do), then a line per step that did or would do something, the errors on
stderr, and a last line with the totals and the exit code. With `--json` the result's
document is printed instead.

Tables are named as the user named them (`shown`: the CLI maps the absolute locations the
result holds back to the prefixes typed, `dvtool.render.values.location_as_given`). Where
the summary table does not fit the width it is one record per table (`dvtool.render.box_table`):
headers are never cut and paths break only at `/`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dvtool.render.box_table import BoxTable, Column
from dvtool.render.plain_console import escape
from dvtool.render.values import format_bytes, names_location, plural

if TYPE_CHECKING:
    from dvtool.commands.maintain.command import MaintainResult, StepOutcome, TableOutcome
    from dvtool.render.output import Output

_STEP_TITLES = {
    "inspect": "inspect",
    "purge": "purge",
    "rewrite-deletes": "rewrite deletes",
    "compaction": "compaction",
    "checkpoint": "checkpoint",
    "vacuum": "vacuum",
    "log-cleanup": "log cleanup",
}
_FORMAT_STEPS = {"rewrite-deletes", "inspect"}
"""Steps of one format only: a column only when a table of that format is present."""
_MARKS = {
    "skipped": "skipped",
    "not-run": "not run",
    "nothing-to-do": "-",
    "not-applicable": "n/a",
}


def render_maintain(
    renderer: Output, result: MaintainResult, shown: Callable[[str], str] = str
) -> None:
    """The result's JSON document, or the summary table, the steps' details, the errors
    and the totals; `shown(location)` is how a table's location is printed."""
    if renderer.as_json:
        renderer.json(result.to_json())
        return
    r = renderer
    if result.dry_run:
        r.say(
            "[bold]dry run[/]: nothing written; each step planned against the table as it is "
            "(Delta compaction: as the planned purge would leave it)"
        )
    r.table(summary_table(result, shown))
    for table in result.tables:
        for action in table.actions:
            if action.status in ("done", "planned"):
                r.say(f"{escape(shown(table.location))}: {action.step}: {escape(action.detail)}")
    for table in result.tables:
        if table.kind != "ok":
            _print_error(renderer, table, shown)
    r.say(_totals(result))


def summary_table(result: MaintainResult, shown: Callable[[str], str] = str) -> BoxTable:
    """A row per table: where, its status, versions read and reached, then each step (the
    steps of the formats present: Iceberg's rewrite of delete files only with an Iceberg
    table, Paimon's inspection only with a Paimon table; a step a table's format has not is
    `n/a`)."""
    present = {a.step for table in result.tables for a in table.actions}
    steps = [step for step in _STEP_TITLES if step in present or step not in _FORMAT_STEPS]
    columns = [Column("table"), Column("status"), Column("version")]
    columns += [Column(_STEP_TITLES[step]) for step in steps]
    t = BoxTable("Maintenance", columns)
    for table in result.tables:
        actions = {a.step: a for a in table.actions}
        cells = [_step_cell(actions.get(step), table.format) for step in steps]
        t.add_row(escape(shown(table.location)), _status(table), _versions(table), *cells)
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


def _step_cell(action: StepOutcome | None, table_format: str | None = None) -> str:
    """What one step did, in a few words (`n/a`: a step of another format)."""
    if action is None:
        return _MARKS["not-applicable"] if table_format is not None else ""
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
        if result.get("format") == "iceberg":
            inputs = sum(len(b["files"]) for b in bins)
            return f"{plural(inputs, 'file')} -> {sum(1 for b in bins if b['rows']):,}"
        inputs = sum(len(b["inputs"]) for b in bins)
        return f"{plural(inputs, 'file')} -> {len(bins):,}"
    if step == "inspect":
        return "full compaction due" if result.get("compaction_due") else "healthy"
    if step == "rewrite-deletes":
        metrics = result.get("metrics") or {}
        return plural(metrics.get("removedDeleteEntries", 0), "delete file")
    if step == "checkpoint":
        return f"v{result['version']}" if "version" in result else "due"
    if step == "vacuum":
        deleted = result.get("deleted_files") if not result.get("dry_run") else None
        files = result.get("num_files", 0) if deleted is None else deleted
        size = result.get("num_bytes", 0) if deleted is None else result.get("deleted_bytes", 0)
        expired = result.get("expired_snapshots")
        snapshots = f"{plural(len(expired), 'snapshot')}, " if expired else ""
        return f"{snapshots}{plural(files, 'file')} ({format_bytes(size)})"
    return plural(result.get("deleted_files", 0), "file")


def _print_error(renderer: Output, table: TableOutcome, shown: Callable[[str], str]) -> None:
    error = table.to_json()["error"] or {}
    message = str(error.get("message"))
    # The table's location, unless the message names it already (a missing prefix did).
    where = "" if names_location(message, table.location) else f"{shown(table.location)}: "
    renderer.warn(f"{where}{message}", "[bold red]error:[/]")
    if error.get("hint"):
        renderer.warn(str(error["hint"]), " ")


def _totals(result: MaintainResult) -> str:
    statuses = [t.status for t in result.tables]
    kinds = [s for s in ("ok", "partial", "skipped", "failed") if s in statuses]
    counts = ", ".join(f"{statuses.count(s):,} {s}" for s in kinds)
    budget = " (time budget spent)" if "skipped" in statuses or "partial" in statuses else ""
    return (
        f"{plural(len(result.tables), 'table')}: "
        f"{counts or 'none'}{budget}; "
        f"exit code {result.exit_code} ({result.kind})"
    )
