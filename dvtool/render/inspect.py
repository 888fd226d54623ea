"""How `dvtool inspect` reads for a person: the summary, the history, the verify report, checks.

The summary is lines of console markup and box tables (`summary_blocks`), drawn through the
renderer (`print_summary`): off a terminal as text without importing rich (`plain_summary`,
see dvtool.render.plain_console; rich's import was most of the start-up of `dvtool inspect TABLE`
on a small table, issue 12), a table too wide for the output as records. The history is one
line per commit with its key metrics in human units, its parameters and other metrics
indented beneath (`history_lines`), readable at 80 columns. The file listing is
`Output.listing`, shared with other commands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dvtool.render.box_table import BoxTable, Column
from dvtool.render.plain_console import KEEP, escape, plain, wrap
from dvtool.render.values import (
    as_int,
    format_bytes,
    format_metrics,
    format_time,
    format_value,
    plural,
    relative_location,
)

if TYPE_CHECKING:
    from dvtool.commands.inspect.command import CheckOutcome, FileEntry, HistoryEntry, VerifyReport
    from dvtool.commands.inspect.summary import TableSummary
    from dvtool.render.output import Output

_HISTOGRAM_WIDTH = 40


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
    blocks.append(histogram_table(s.deleted_ratio_histogram))
    return blocks


def print_summary(renderer: Output, s: TableSummary) -> None:
    for block in summary_blocks(s):
        if isinstance(block, str):
            renderer.say(block)
        else:
            renderer.table(block)


def plain_summary(s: TableSummary, width: int) -> str:
    """What `print_summary` prints `width` wide off a terminal, made without rich; NotPlain
    (dvtool.render.plain_console) for what only rich draws."""
    return "".join(
        "".join(line + "\n" for line in wrap(plain(block), width, "  "))
        if isinstance(block, str)
        else block.text(width)
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


def histogram_table(buckets: Sequence[dict[str, Any]]) -> BoxTable:
    columns = [Column("bucket", "right"), Column("files", "right"), Column("bar")]
    t = BoxTable("Deleted ratio per file", columns, show_header=False)
    peak = max((b["files"] for b in buckets), default=0) or 1
    for b in buckets:
        width = round(b["files"] / peak * _HISTOGRAM_WIDTH)
        t.add_row(b["bucket"], f"{b['files']:,}", "[cyan]" + "█" * width + "[/]")
    return t


# -- --history, --verify, --check --------------------------------------------------------------


# The metrics a history line leads with, in this order: Delta's names and delta-rs's.
_ROW_METRICS = (
    ("written", ("numOutputRows", "num_added_rows")),
    ("inserted", ("numTargetRowsInserted",)),
    ("updated", ("numUpdatedRows", "numTargetRowsUpdated", "num_updated_rows")),
    ("deleted", ("numDeletedRows", "numTargetRowsDeleted", "num_deleted_rows")),
    ("purged", ("numDeletionVectorRowsRemoved",)),
)
_FILE_METRICS = (
    ("added", ("numAddedFiles", "num_added_files"), ("numAddedBytes", "numOutputBytes")),
    ("removed", ("numRemovedFiles", "num_removed_files"), ("numRemovedBytes",)),
)


def print_history(renderer: Output, entries: Sequence[HistoryEntry]) -> None:
    """The commits, newest first, as `history_lines` within the renderer's width."""
    renderer.say("[bold]History[/]")
    renderer.write("".join(line + "\n" for line in history_lines(entries, renderer.width)))


def history_lines(entries: Sequence[HistoryEntry], width: int) -> list[str]:
    """One line per commit (version, time, operation, its key metrics: rows, files and
    bytes), then its parameters that have a value, one a line, and its other metrics that
    are not zero, indented beneath it; every line within `width`, none broken inside a
    metric."""
    digits = max((len(str(e.version)) for e in entries), default=1)
    under = " " * (digits + 2)
    lines: list[str] = []
    for e in entries:
        head, used = _key_metrics(e.operation_metrics)
        line = f"{e.version:>{digits}}  {format_time(e.timestamp)}  {e.operation or 'unknown'}"
        lines += wrap(f"{line}  {head}" if head else line, width, under)
        for key, value in e.operation_parameters.items():
            shown = format_value(value) if value is not None else ""
            if shown:
                lines += wrap(f"{key}: {shown}", width, under + "  ", under)
        rest = format_metrics(e.operation_metrics, used)
        if rest:
            lines += wrap(f"metrics: {rest}", width, under + "  ", under)
    return lines


def _key_metrics(metrics: Mapping[str, Any]) -> tuple[str, frozenset[str]]:
    """`386 rows deleted, 1 file added (4.2 KiB)`: the rows and files a commit changed, in
    human units; and the metric names it used."""
    parts: list[str] = []
    used: set[str] = set()
    for verb, names in _ROW_METRICS:
        name = next((n for n in names if n in metrics), None)
        rows = as_int(metrics.get(name)) if name else None
        if name and rows is not None:
            used.add(name)
            if rows:
                parts.append(f"{plural(rows, 'row')}{KEEP}{verb}".replace(" ", KEEP))
    for verb, file_names, byte_names in _FILE_METRICS:
        name = next((n for n in file_names if n in metrics), None)
        files = as_int(metrics.get(name)) if name else None
        if not name or not files:
            continue
        used.add(name)
        size_name = next((n for n in byte_names if as_int(metrics.get(n)) is not None), None)
        size = f" ({format_bytes(as_int(metrics[size_name]) or 0)})" if size_name else ""
        used.update([size_name] if size_name else [])
        parts.append(f"{plural(files, 'file')} {verb}{size}".replace(" ", KEEP))
    return ", ".join(parts), frozenset(used)


def print_verify(renderer: Output, report: VerifyReport) -> None:
    checkpoints = report.checkpoints_checked
    log = f"{plural(checkpoints, 'checkpoint')}, "
    problems = plural(len(report.problems), "problem")
    renderer.say(
        f"verified {log}{plural(report.files_checked, 'data file')} and "
        f"{plural(report.dvs_checked, 'DV')}: "
        + ("[green]no problems[/]" if report.ok else f"[red]{problems}[/]")
    )
    for p in report.problems:
        renderer.say(f"  [red]{p.kind}[/] {escape(p.message)}", indent="    ")


def print_checks(renderer: Output, outcomes: Sequence[CheckOutcome]) -> None:
    for o in outcomes:
        mark = "[green]pass[/]" if o.passed else "[red]FAIL[/]"
        actual, limit = check_value_text(o.name, o.actual), check_value_text(o.name, o.limit)
        renderer.say(f"check {o.name}: {mark} (actual {actual}, limit {limit})")


def check_value_text(name: str, value: float) -> str:
    """Sizes (`min-avg-file-size`) in bytes and units, counts and ratios as numbers."""
    if name.endswith("-size"):
        exact = f"{int(value):,} B"
        return exact if value < 1024 else f"{exact} = {format_bytes(int(value))}"
    return f"{value:g}"


def print_files(out: Output, files: Sequence[FileEntry], total: int, root: str | None) -> None:
    """The live files; DV files, like data files, relative to the table root."""
    rows = (
        (
            format_bytes(f.size),
            "?" if f.num_records is None else f"{f.num_records:,}",
            f"{f.deleted_rows:,}",
            "" if f.deleted_ratio is None else f"{f.deleted_ratio:.1%}",
            f.dv_storage or "-",
            f.path
            + "".join(f"  {k}={v}" for k, v in f.partition_values.items())
            + (f"  dv={relative_location(f.dv_location, root)}" if f.dv_location else ""),
        )
        for f in files
    )
    header = ("size", "records", "deleted", "ratio", "DV", "path  [partition]  [dv=DV file]")
    out.listing("Live files", header, rows, total, "files", key="path")
