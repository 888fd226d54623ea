"""How `dvtool inspect` reads for a person: the summary, the history, the verify report, checks.

The summary is lines of console markup and box tables (`summary_blocks`), drawn by rich
(`print_summary`) or, off a terminal, as the same text without importing rich
(`plain_summary`, see dvtool.plain_console): rich's import was most of the start-up of
`dvtool inspect TABLE` on a small table (issue 12). The history, the verify report and the
checks are drawn by rich; the file listing is `Renderer.listing`, shared with other commands.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dvtool.box_table import BoxTable, Column
from dvtool.plain_console import escape, plain
from dvtool.render_values import format_bytes, format_pairs, format_time

if TYPE_CHECKING:
    from rich.console import Console

    from dvtool.commands.inspect import CheckOutcome, HistoryEntry, VerifyReport
    from dvtool.commands.inspect_summary import TableSummary

_HISTOGRAM_WIDTH = 40
# Below this terminal width the history is one block per commit instead of a table.
_NARROW = 120


# -- the summary -----------------------------------------------------------------------------


def summary_blocks(s: TableSummary) -> list[str | BoxTable]:
    """The summary, top to bottom: lines of console markup and tables."""
    title = s.name or s.table_id
    p = s.protocol
    features = ", ".join(sorted(set(s.reader_features) | set(s.writer_features))) or "none"
    blocks: list[str | BoxTable] = [
        f"[bold]{escape(title)}[/]  [dim]{escape(s.location)}[/]",
        f"version [bold]{s.version}[/]  committed {format_time(s.commit_timestamp)}"
        f"  ({s.operation or 'unknown'})",
        f"protocol reader {p['minReaderVersion']} / writer {p['minWriterVersion']}"
        f"  features: {features}",
    ]
    if s.partition_columns:
        blocks.append(f"partitioned by {', '.join(s.partition_columns)}")
    blocks.append(_counts(s))
    blocks += [f"[yellow]warning:[/] {escape(w)}" for w in s.log_warnings]
    if s.configuration:
        blocks.append(_properties(s.configuration))
    blocks.append(_schema(s))
    blocks.append(_histogram(s.deleted_ratio_histogram))
    return blocks


def print_summary(console: Console, s: TableSummary) -> None:
    for block in summary_blocks(s):
        console.print(block if isinstance(block, str) else block.to_rich())


def plain_summary(s: TableSummary, width: int) -> str:
    """What `print_summary` prints on a console `width` wide off a terminal, made without
    rich; NotPlain (dvtool.plain_console) for what only rich draws."""
    return "".join(
        plain(block) + "\n" if isinstance(block, str) else block.plain(width)
        for block in summary_blocks(s)
    )


def _counts(s: TableSummary) -> BoxTable:
    t = BoxTable("Files and rows", [Column("what"), Column("value", "right")], show_header=False)
    dv = s.dv_storage
    t.add_row("live files", f"{s.num_files:,}")
    t.add_row("size", format_bytes(s.size_bytes))
    t.add_row("physical rows", f"{s.physical_rows:,}")
    t.add_row("logical rows", f"{s.logical_rows:,}")
    t.add_row("deleted rows", f"{s.deleted_rows:,} ({s.deleted_ratio:.2%})")
    t.add_row("files with DVs", f"{s.files_with_dvs:,}")
    t.add_row("DV files", f"{dv.dv_files:,} holding {dv.on_disk_dvs:,} DVs")
    t.add_row("inline DVs", f"{dv.inline_dvs:,}")
    t.add_row("absolute-path DVs", f"{dv.absolute_path_dvs:,}")
    t.add_row("DV bytes", format_bytes(dv.dv_bytes))
    t.add_row("tombstones", f"{s.num_tombstones:,}")
    t.add_row("average file size", format_bytes(s.avg_file_size))
    if s.small_files is not None and s.small_file_size is not None:
        t.add_row("small files", f"{s.small_files:,} below {format_bytes(s.small_file_size)}")
    if s.commits_since_checkpoint is not None:
        damaged = [d["version"] for d in s.damaged_checkpoints]
        t.add_row("log", _log_position(s.checkpoint_version, s.commits_since_checkpoint, damaged))
    if s.files_without_stats:
        exact = "counted from footers" if s.row_counts_exact else "not in row counts"
        t.add_row("files without stats", f"{s.files_without_stats:,} ({exact})")
    return t


def _log_position(checkpoint: int | None, commits: int, damaged: Sequence[int] = ()) -> str:
    """Where the version stands in its log: what a reader replays to reach it (and which
    damaged checkpoints it passes over, see the warnings under the table)."""
    replayed = f"{commits:,} commit{'s' if commits != 1 else ''}"
    if damaged:
        versions = ", ".join(f"{v:,}" for v in damaged)
        skipped = f"checkpoint{'s' if len(damaged) > 1 else ''} at version {versions} damaged"
        if checkpoint is None:
            return f"{skipped}, {replayed} replayed from JSON"
        return f"{skipped}, read from version {checkpoint:,} + {replayed}"
    if checkpoint is None:
        return f"no checkpoint, {replayed} to replay"
    return f"checkpoint at version {checkpoint:,}, {replayed} after it"


def _properties(configuration: dict[str, str]) -> BoxTable:
    columns = [Column("property"), Column("value", overflow="fold")]
    t = BoxTable("Table properties", columns, show_header=False)
    for key in sorted(configuration):
        t.add_row(escape(key), escape(configuration[key]))
    return t


def _schema(s: TableSummary) -> BoxTable:
    columns = [Column("column"), Column("type"), Column("nullable")]
    mapped = s.column_mapping_mode != "none"
    if mapped:
        columns.append(Column(f"physical name ({s.column_mapping_mode} mapping)"))
    t = BoxTable("Schema", columns)
    for f in s.schema:
        cells = [escape(f["name"]), escape(f["type"]), "yes" if f["nullable"] else "no"]
        t.add_row(*cells, *([escape(f["physical_name"])] if mapped else []))
    return t


def _histogram(buckets: Sequence[dict[str, Any]]) -> BoxTable:
    columns = [Column("bucket", "right"), Column("files", "right"), Column("bar")]
    t = BoxTable("Deleted ratio per file", columns, show_header=False)
    peak = max((b["files"] for b in buckets), default=0) or 1
    for b in buckets:
        width = round(b["files"] / peak * _HISTOGRAM_WIDTH)
        t.add_row(b["bucket"], f"{b['files']:,}", "[cyan]" + "█" * width + "[/]")
    return t


# -- --history, --verify, --check --------------------------------------------------------------


def print_history(console: Console, entries: Sequence[HistoryEntry]) -> None:
    """A table of the commits; on a narrow terminal, one block per commit."""
    if console.is_terminal and console.width < _NARROW:
        _print_history_blocks(console, entries)
        return
    names = ("version", "time", "operation", "parameters", "metrics")
    t = BoxTable("History", [Column(name) for name in names])
    for e in entries:
        t.add_row(
            str(e.version),
            format_time(e.timestamp),
            e.operation or "",
            escape(format_pairs(e.operation_parameters)),
            escape(format_pairs(e.operation_metrics)),
        )
    console.print(t.to_rich())


def _print_history_blocks(console: Console, entries: Sequence[HistoryEntry]) -> None:
    """The history on a narrow terminal: one block per commit, each line wrapping whole."""
    console.print("[bold]History[/]")
    for e in entries:
        console.print(
            f"[bold]version {e.version}[/]  {format_time(e.timestamp)}  {e.operation or ''}"
        )
        for label, values in (
            ("parameters", e.operation_parameters),
            ("metrics", e.operation_metrics),
        ):
            if values:
                console.print(f"  {label}: {escape(format_pairs(values))}", soft_wrap=False)


def print_verify(console: Console, report: VerifyReport) -> None:
    checkpoints = report.checkpoints_checked
    log = f"{checkpoints:,} checkpoint{'s' if checkpoints != 1 else ''}, "
    console.print(
        f"verified {log}{report.files_checked:,} data files and {report.dvs_checked:,} DVs: "
        + ("[green]no problems[/]" if report.ok else f"[red]{len(report.problems)} problem(s)[/]")
    )
    for p in report.problems:
        console.print(f"  [red]{p.kind}[/] {escape(p.message)}", soft_wrap=True)


def print_checks(console: Console, outcomes: Sequence[CheckOutcome]) -> None:
    for o in outcomes:
        mark = "[green]pass[/]" if o.passed else "[red]FAIL[/]"
        actual, limit = _check_value(o.name, o.actual), _check_value(o.name, o.limit)
        console.print(f"check {o.name}: {mark} (actual {actual}, limit {limit})")


def _check_value(name: str, value: float) -> str:
    """Sizes (`min-avg-file-size`) in bytes and units, counts and ratios as numbers."""
    if name.endswith("-size"):
        exact = f"{int(value):,} B"
        return exact if value < 1024 else f"{exact} = {format_bytes(int(value))}"
    return f"{value:g}"
