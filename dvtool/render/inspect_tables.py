"""How `dvtool inspect PREFIX... --recursive` reads for a person (and in a CI job's log).

One summary table, a row per table: where (relative to the prefix), its format, version
(Iceberg: snapshot id), live data files, logical rows, deleted share, files with deletes,
small files, delete files (Iceberg), gates passed of those that apply (`2/3`), and its
status: `ok` or the kind of its failure (`check-failed`, `integrity`, ...). Then one
line per failed gate, per problem `--verify` found, per warning of a summary, and per gate
that applied to no table; the errors on stderr (with their hints), and a last line with
the totals and the exit code. With `--json` the result's document is printed instead.

Tables are named by `shown(location)` (the CLI maps the absolute locations the result holds
back to what the user typed, relative to the prefix). Where the table does not fit the
width it is one record per table (`dvtool.render.box_table`), as `dvtool maintain`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dvtool.render.box_table import BoxTable, Column
from dvtool.render.inspect import check_value_text
from dvtool.render.plain_console import escape
from dvtool.render.values import names_location, plural

if TYPE_CHECKING:
    from dvtool.commands.inspect.tables import GateOutcome, InspectTablesResult, TableInspection
    from dvtool.render.output import Output

_COLUMNS = (
    Column("table"),
    Column("format"),
    Column("version", "right"),
    Column("files", "right"),
    Column("rows", "right"),
    Column("deleted", "right"),
    Column("w/ deletes", "right"),
    Column("small", "right"),
    Column("del. files", "right"),
    Column("gates", "right"),
    Column("status"),
)


def render_inspect_tables(
    out: Output,
    result: InspectTablesResult,
    shown: Callable[[str], str] = str,
    title: str = "Tables",
) -> None:
    """The result's JSON document, or the summary table, the lines under it, the errors
    and the totals; `shown(location)` is how a table is named."""
    if out.as_json:
        out.json(result.to_json())
        return
    out.table(summary_table(result, shown, title))
    for table in result.tables:
        name = escape(shown(table.location))
        for line in _detail_lines(table):
            out.say(f"{name}: {line}", indent="    ")
    for gate in result.unused_gates():
        formats = " and ".join(f.capitalize() for f in gate.limits)
        out.say(
            f"[yellow]note:[/] --check {gate.name} gated no table: it applies to {formats} "
            "tables only",
            indent="    ",
        )
    for table in result.tables:
        if table.error is not None or table.exception is not None:
            _print_error(out, table, shown)
    out.say(_totals(result))


def summary_table(
    result: InspectTablesResult, shown: Callable[[str], str] = str, title: str = "Tables"
) -> BoxTable:
    """A row per table, its figures in few characters (the details are on the lines)."""
    t = BoxTable(title, _COLUMNS)
    for table in result.tables:
        t.add_row(escape(shown(table.location)), table.format or "", *_figures(table))
    return t


def _figures(table: TableInspection) -> list[str]:
    """version, files, rows, deleted, with deletes, small, delete files, gates, status."""
    from dvtool.commands.inspect.iceberg_summary import IcebergSummary
    from dvtool.commands.inspect.paimon_summary import PaimonSummary

    s = table.summary
    gates, status = _gates(table.checks), _status(table)
    if s is None:
        return ["-"] * 7 + [gates, status]
    exact = s.row_counts_exact
    small = "?" if s.small_files is None else f"{s.small_files:,}"
    if isinstance(s, IcebergSummary):
        version = "-" if s.snapshot_id is None else str(s.snapshot_id)
        delete_files = f"{sum(s.delete_files.values()):,}"
    elif isinstance(s, PaimonSummary):
        version = "-" if s.snapshot_id is None else str(s.snapshot_id)
        delete_files = f"{s.deletion_files:,}"
    else:
        version, delete_files = str(s.version), "-"
    return [
        version,
        f"{s.num_files:,}",
        ("" if exact else "≤") + f"{s.logical_rows:,}",
        ("" if exact else "≥") + f"{s.deleted_ratio:.1%}",
        f"{s.files_with_dvs:,}",
        small,
        delete_files,
        gates,
        status,
    ]


def _gates(checks: list[GateOutcome]) -> str:
    """`passed/applicable` (`-` without gates; `n/a` when none applies)."""
    applicable = [c for c in checks if c.status != "not-applicable"]
    if not checks:
        return "-"
    if not applicable:
        return "n/a"
    passed = sum(c.status == "passed" for c in applicable)
    text = f"{passed}/{len(applicable)}"
    return text if passed == len(applicable) else f"[red]{text}[/]"


def _status(table: TableInspection) -> str:
    """`ok`, or the kind of the failure (`check-failed`, `integrity`, `not-found`, ...)."""
    return "[green]ok[/]" if table.kind == "ok" else f"[red]{table.kind}[/]"


def _detail_lines(table: TableInspection) -> list[str]:
    """A table's failed gates, its problems and its warnings, one line each (markup)."""
    lines = []
    for c in table.checks:
        if c.status == "failed" and c.actual is not None:
            actual, limit = check_value_text(c.name, c.actual), check_value_text(c.name, c.limit)
            lines.append(f"check {c.name}: [red]FAIL[/] (actual {actual}, limit {limit})")
        elif c.status == "error" and (table.error is None or table.error.message != c.detail):
            lines.append(f"check {c.name}: [red]not measured[/]: {escape(c.detail or '')}")
    verify = table.result.verify if table.result is not None else None
    if verify is not None:
        lines += [f"[red]{escape(p.kind)}[/] {escape(p.message)}" for p in verify.problems]
    lines += [f"[yellow]warning:[/] {escape(w)}" for w in _warnings(table)]
    return lines


def _warnings(table: TableInspection) -> list[str]:
    """What the summary warns of: damaged checkpoints (Delta), unreadable Puffin footers
    (Iceberg); a Paimon summary has no warnings."""
    from dvtool.commands.inspect.iceberg_summary import IcebergSummary
    from dvtool.commands.inspect.summary import TableSummary

    s = table.summary
    if isinstance(s, TableSummary):
        return s.log_warnings
    return s.warnings if isinstance(s, IcebergSummary) else []


def _print_error(out: Output, table: TableInspection, shown: Callable[[str], str]) -> None:
    error = table.to_json()["error"] or {}
    message = str(error.get("message"))
    # The table's location, unless the message names it already (a missing prefix did).
    where = "" if names_location(message, table.location) else f"{shown(table.location)}: "
    out.warn(f"{where}{message}", "[bold red]error:[/]")
    if error.get("hint"):
        out.warn(str(error["hint"]), " ")


def _totals(result: InspectTablesResult) -> str:
    statuses = [t.status for t in result.tables]
    counts = ", ".join(f"{statuses.count(s):,} {s}" for s in ("ok", "failed") if s in statuses)
    gates = [c for t in result.tables for c in t.checks if c.status in ("passed", "failed")]
    failed = sum(c.status == "failed" for c in gates)
    checked = f"; {plural(len(gates), 'gate')} checked, {failed:,} failed" if gates else ""
    return (
        f"[bold]{plural(len(result.tables), 'table')}[/]: {counts or 'none'}{checked}; "
        f"exit code {result.exit_code} ({result.kind})"
    )
