"""How `dvtool inspect` reads for a person on a Paimon table.

The same shape as Delta's and Iceberg's (`dvtool.render.inspect`, `inspect_iceberg`): a few
lines naming the table, its kind and snapshot, then box tables (files and rows, deletion
vectors and index files, LSM levels, options, schema, the deleted-ratio histogram); a
primary-key table's pending level-0 files are called out, since DV readers do not see them
until Paimon compacts. `--history` one line per snapshot, `--files` the renderer's listing,
`--verify` and `--check` lines as for the other formats.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dvtool.render.box_table import BoxTable, Column
from dvtool.render.inspect import histogram_table, print_checks
from dvtool.render.inspect_iceberg import properties_table, schema_table
from dvtool.render.plain_console import KEEP, escape, wrap
from dvtool.render.values import format_bytes, format_time, format_value, plural, relative_location

if TYPE_CHECKING:
    from dvtool.commands.inspect.paimon import (
        PaimonFileEntry,
        PaimonInspectResult,
        PaimonSnapshotEntry,
    )
    from dvtool.commands.inspect.paimon_summary import PaimonSummary
    from dvtool.paimon.verify import PaimonVerifyReport
    from dvtool.render.output import Output


def show(renderer: Output, result: PaimonInspectResult) -> None:
    """The whole result, or its JSON with `--json`."""
    if renderer.as_json:
        renderer.json(result.to_json())
        return
    if result.summary is not None:
        for block in summary_blocks(result.summary):
            if isinstance(block, str):
                renderer.say(block)
            else:
                renderer.table(block)
    if result.files is not None:
        total = result.summary.num_files if result.summary else len(result.files)
        root = result.summary.location if result.summary else None
        print_files(renderer, result.files, total, root)
    if result.history is not None:
        print_history(renderer, result.history)
    if result.verify is not None:
        print_verify(renderer, result.verify)
    if result.checks is not None:
        print_checks(renderer, result.checks)


def summary_blocks(s: PaimonSummary) -> list[str | BoxTable]:
    """The summary, top to bottom: lines of console markup and tables."""
    blocks: list[str | BoxTable] = [
        f"[bold]{escape(s.name)}[/]  [dim]{escape(s.location)}[/]",
        f"Paimon {_kind(s)}",
    ]
    if s.branch != "main":
        blocks.append(f"branch [bold]{escape(s.branch)}[/]")
    elif s.branches:
        names = escape(", ".join(s.branches))
        blocks.append(f"branch main; other branches: {names} (inspect one with --branch NAME)")
    if s.snapshot_id is None:
        blocks.append("no snapshot: the table has no data")
    else:
        blocks.append(
            f"snapshot [bold]{s.snapshot_id}[/]  schema {s.schema_id}  "
            f"committed {format_time(s.commit_timestamp)}  ({s.commit_kind or 'unknown'})"
        )
    if s.partition_keys:
        blocks.append(f"partitioned by {escape(', '.join(s.partition_keys))}")
    blocks += [_counts(s), _deletes(s), _levels(s)]
    if s.pending_level0_files:
        blocks.append(
            f"[yellow]note:[/] {plural(s.pending_level0_files, 'level-0 file')} "
            f"({s.pending_level0_rows:,} rows) not yet read by deletion-vector readers: "
            "Paimon's compaction moves them up"
        )
    if s.options:
        blocks.append(properties_table(s.options))
    blocks.append(schema_table(s.schema))
    blocks.append(histogram_table(s.deleted_ratio_histogram))
    return blocks


def _kind(s: PaimonSummary) -> str:
    if s.table_kind == "primary-key":
        kind = f"primary-key table ({', '.join(s.primary_keys)})"
    else:
        kind = "append table"
    buckets = {-1: "dynamic buckets", -2: "postponed buckets"}.get(s.bucket, f"{s.bucket} buckets")
    if s.table_kind == "append" and s.bucket == -1:
        buckets = "bucket-unaware"
    if not s.deletion_vectors_enabled:
        dvs = "deletion vectors off"
    else:
        dvs = "deletion vectors " + ("64-bit" if s.bitmap64 else "32-bit")
    return f"{kind}, {buckets}, {dvs}"


def _counts(s: PaimonSummary) -> BoxTable:
    t = BoxTable("Files and rows", [Column("what"), Column("value", "right")], show_header=False)
    t.add_row("live data files", f"{s.num_files:,}")
    t.add_row("size", format_bytes(s.size_bytes))
    b = s.buckets
    t.add_row("buckets with files", f"{b['count']:,} (at most {b['max_files']:,} files in one)")
    if _has_pending_level0(s):
        t.add_row("level-0 files not read yet", f"{s.pending_level0_files:,}")
        t.add_row("most in a bucket", f"{b['max_pending_level0_files']:,}")
    t.add_row("physical rows (read)", f"{s.physical_rows:,}")
    t.add_row("logical rows", ("" if s.row_counts_exact else "at most ") + f"{s.logical_rows:,}")
    t.add_row("deleted rows", f"{s.deleted_rows:,} ({s.deleted_ratio:.2%})")
    if not s.row_counts_exact:
        t.add_row("row counts", "merged on read: not known from metadata")
    t.add_row("files with DVs", f"{s.files_with_dvs:,}")
    t.add_row("average file size", format_bytes(s.avg_file_size))
    if s.small_files is not None and s.small_file_size is not None:
        t.add_row("small files", f"{s.small_files:,} below {format_bytes(s.small_file_size)}")
    return t


def _has_pending_level0(s: PaimonSummary) -> bool:
    """Whether the table keeps level-0 files from DV readers (a primary-key table in
    deletion-vectors mode)."""
    return s.table_kind == "primary-key" and s.deletion_vectors_enabled


def _deletes(s: PaimonSummary) -> BoxTable:
    t = BoxTable("Index files", [Column("what"), Column("value", "right")], show_header=False)
    t.add_row("deletion files", f"{s.deletion_files:,} ({format_bytes(s.deletion_file_bytes)})")
    t.add_row("deletion vectors", f"{s.deletion_vectors:,}")
    if s.hash_index_files:
        hashes = f"{s.hash_index_files:,} ({format_bytes(s.hash_index_bytes)})"
        t.add_row("hash index files", hashes)
    return t


def _levels(s: PaimonSummary) -> BoxTable:
    columns = [
        Column("level", "right"),
        Column("files", "right"),
        Column("rows", "right"),
        Column("size", "right"),
        Column("with DVs", "right"),
    ]
    t = BoxTable("LSM levels", columns)
    for level in s.levels:
        t.add_row(
            str(level["level"]),
            f"{level['files']:,}",
            f"{level['rows']:,}",
            format_bytes(level["size_bytes"]),
            f"{level['files_with_dvs']:,}",
        )
    return t


def print_files(
    renderer: Output, files: Sequence[PaimonFileEntry], total: int, root: str | None
) -> None:
    """The live data files, relative to the table location, with their DVs."""
    rows = (
        (
            format_bytes(f.size),
            f"{f.num_records:,}",
            f"{f.deleted_rows:,}",
            "" if f.deleted_ratio is None else f"{f.deleted_ratio:.1%}",
            f"{f.level}" + ("" if f.visible else "*"),
            relative_location(f.path, root),
        )
        for f in files
    )
    header = ("size", "records", "deleted", "ratio", "level", "path  (* not read yet)")
    renderer.listing("Live data files", header, rows, total, "files", key="path")


def print_history(renderer: Output, entries: Sequence[PaimonSnapshotEntry]) -> None:
    renderer.say("[bold]History[/] (snapshots, newest first; * latest)")
    renderer.write("".join(line + "\n" for line in history_lines(entries, renderer.width)))


def history_lines(entries: Sequence[PaimonSnapshotEntry], width: int) -> list[str]:
    """One line per snapshot (id, time, commit kind, record counts), within `width`."""
    digits = max((len(str(e.snapshot_id)) for e in entries), default=1)
    under = " " * (digits + 3)
    lines: list[str] = []
    for e in entries:
        mark = "*" if e.current else " "
        head = f"{mark}{e.snapshot_id:>{digits}}  {format_time(e.timestamp)}  {e.commit_kind}"
        figures = [
            f"{format_value(value)} {label}".replace(" ", KEEP)
            for value, label in (
                (e.total_record_count, "records"),
                (e.delta_record_count, "delta"),
                (e.changelog_record_count, "changelog"),
            )
            if value is not None
        ]
        lines += wrap(head + ("  " + ", ".join(figures) if figures else ""), width, under)
    return lines


def print_verify(renderer: Output, report: PaimonVerifyReport) -> None:
    problems = plural(len(report.problems), "problem")
    renderer.say(
        "verified data files, deletion files, DVs and hash indexes: "
        + ("[green]no problems[/]" if report.ok else f"[red]{problems}[/]")
    )
    for p in report.problems:
        renderer.say(f"  [red]{escape(p.kind)}[/] {escape(p.message)}", indent="    ")
