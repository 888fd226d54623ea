"""How `dvtool inspect` reads for a person on an Iceberg table.

The same shape as Delta's (`dvtool.render.inspect`): a few lines naming the table and its
snapshot, then box tables (files and rows, deletes, properties, schema, the deleted-ratio
histogram), drawn as text off a terminal so that CI logs read plainly; `--history` one line
per snapshot with its key summary figures and the rest indented beneath; `--files` the
renderer's listing; `--verify` and `--check` lines as for Delta.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dvtool.render.box_table import BoxTable, Column
from dvtool.render.inspect import histogram_table, print_checks
from dvtool.render.plain_console import KEEP, escape, wrap
from dvtool.render.values import format_bytes, format_time, format_value, plural, relative_location

if TYPE_CHECKING:
    from dvtool.commands.inspect.iceberg import IcebergFileEntry, IcebergInspectResult
    from dvtool.commands.inspect.iceberg_summary import IcebergSummary
    from dvtool.iceberg.snapshots import SnapshotEntry
    from dvtool.iceberg.verify import IcebergVerifyReport
    from dvtool.render.output import Output


def show(renderer: Output, result: IcebergInspectResult) -> None:
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


def summary_blocks(s: IcebergSummary) -> list[str | BoxTable]:
    """The summary, top to bottom: lines of console markup and tables."""
    title = s.name or s.table_uuid
    blocks: list[str | BoxTable] = [
        f"[bold]{escape(title)}[/]  [dim]{escape(s.location)}[/]",
        f"Iceberg format v{s.format_version}  metadata {escape(s.metadata_location)}",
    ]
    if s.snapshot_id is None:
        blocks.append("no snapshot: the table has no data")
    else:
        blocks.append(
            f"snapshot [bold]{s.snapshot_id}[/]  sequence number {s.sequence_number}  "
            f"committed {format_time(s.commit_timestamp)}  ({s.operation or 'unknown'})"
        )
    if s.partition_spec:
        fields = ", ".join(f"{f['transform']}({f['source']})" for f in s.partition_spec)
        blocks.append(f"partitioned by {escape(fields)}")
    blocks += [_counts(s), _deletes(s)]
    blocks += [f"[yellow]warning:[/] {escape(w)}" for w in s.warnings]
    if s.properties:
        blocks.append(properties_table(s.properties))
    blocks.append(schema_table(s.schema))
    blocks.append(histogram_table(s.deleted_ratio_histogram))
    return blocks


def _counts(s: IcebergSummary) -> BoxTable:
    t = BoxTable("Files and rows", [Column("what"), Column("value", "right")], show_header=False)
    bound = "" if s.row_counts_exact else "at least "
    t.add_row("live data files", f"{s.num_files:,}")
    t.add_row("size", format_bytes(s.size_bytes))
    t.add_row("physical rows", f"{s.physical_rows:,}")
    t.add_row("logical rows", ("at most " if bound else "") + f"{s.logical_rows:,}")
    t.add_row("deleted rows", f"{bound}{s.deleted_rows:,} ({s.deleted_ratio:.2%})")
    if not s.row_counts_exact:
        t.add_row("row counts", "equality deletes not applied (--count-rows applies them)")
    t.add_row("files with deletes", f"{s.files_with_dvs:,}")
    t.add_row("average file size", format_bytes(s.avg_file_size))
    if s.small_files is not None and s.small_file_size is not None:
        t.add_row("small files", f"{s.small_files:,} below {format_bytes(s.small_file_size)}")
    return t


def _deletes(s: IcebergSummary) -> BoxTable:
    t = BoxTable("Delete files", [Column("what"), Column("value", "right")], show_header=False)
    kinds = s.delete_files
    t.add_row("position delete files", f"{kinds['position']:,}")
    t.add_row("deletion vectors", f"{kinds['deletion_vectors']:,}")
    t.add_row("equality delete files", f"{kinds['equality']:,}")
    if kinds["equality"]:
        t.add_row("equality delete rows", f"{s.equality_delete_rows:,}")
        t.add_row("files with equality deletes", f"{s.files_with_equality_deletes:,}")
    t.add_row("delete file bytes", format_bytes(s.delete_file_bytes))
    per_file = s.delete_files_per_data_file
    spread = ", ".join(
        f"{d['delete_files']}:{KEEP}{d['data_files']:,}" for d in per_file["distribution"]
    )
    most = f"max {per_file['max']}" + (f" ({spread})" if spread else "")
    t.add_row("delete files per data file", most)
    t.add_row("dangling deletes", f"{s.dangling_deletes:,}")
    p = s.puffin
    if p.files:
        unused = "?" if p.unused_bytes is None else format_bytes(p.unused_bytes)
        t.add_row("Puffin files", f"{p.files:,}, {format_bytes(p.bytes)} ({unused} unused)")
    return t


def properties_table(properties: dict[str, str]) -> BoxTable:
    columns = [Column("property"), Column("value", overflow="fold")]
    t = BoxTable("Table properties", columns, show_header=False)
    for key in sorted(properties):
        t.add_row(escape(key), escape(properties[key]))
    return t


def schema_table(schema: Sequence[dict[str, Any]]) -> BoxTable:
    t = BoxTable("Schema", [Column("column"), Column("type"), Column("nullable"), Column("id")])
    for f in schema:
        nullable = "yes" if f["nullable"] else "no"
        t.add_row(escape(f["name"]), escape(f["type"]), nullable, str(f["field_id"]))
    return t


def print_files(
    renderer: Output, files: Sequence[IcebergFileEntry], total: int, root: str | None
) -> None:
    """The live data files, relative to the table location, with their delete files."""
    rows = (
        (
            format_bytes(f.size),
            f"{f.num_records:,}",
            "?" if f.deleted_rows is None else f"{f.deleted_rows:,}",
            "" if f.deleted_ratio is None else f"{f.deleted_ratio:.1%}",
            str(len(f.deletes)),
            relative_location(f.path, root)
            + "".join(f"  {k}={format_value(v)}" for k, v in f.partition_values.items()),
        )
        for f in files
    )
    header = ("size", "records", "deleted", "ratio", "deletes", "path  [partition]")
    renderer.listing("Live data files", header, rows, total, "files", key="path")


# The snapshot summary figures a history line leads with.
_KEY_FIGURES = (
    ("added-records", "rows added"),
    ("deleted-records", "rows removed"),
    ("added-position-deletes", "position deletes added"),
    ("added-equality-deletes", "equality deletes added"),
    ("added-data-files", "data files added"),
    ("deleted-data-files", "data files removed"),
    ("added-delete-files", "delete files added"),
    ("removed-delete-files", "delete files removed"),
)


def print_history(renderer: Output, entries: Sequence[SnapshotEntry]) -> None:
    renderer.say("[bold]History[/] (snapshots, newest first; * current)")
    renderer.write("".join(line + "\n" for line in history_lines(entries, renderer.width)))


def history_lines(entries: Sequence[SnapshotEntry], width: int) -> list[str]:
    """One line per snapshot (sequence number, time, operation, id, key figures), then its
    other summary values indented beneath; every line within `width`."""
    digits = max((len(str(e.sequence_number)) for e in entries), default=1)
    under = " " * (digits + 3)
    lines: list[str] = []
    for e in entries:
        mark = "*" if e.current else (" " if e.in_current_lineage else "-")
        head = f"{mark}{e.sequence_number:>{digits}}  {format_time(e.timestamp)}  "
        head += f"{e.operation or 'unknown'}  snapshot{KEEP}{e.snapshot_id}"
        figures = [
            f"{format_value(e.summary[k])} {label}".replace(" ", KEEP)
            for k, label in _KEY_FIGURES
            if e.summary.get(k)
        ]
        lines += wrap(head + ("  " + ", ".join(figures) if figures else ""), width, under)
        shown = {k for k, _ in _KEY_FIGURES}
        rest = ", ".join(f"{k}={format_value(v)}" for k, v in e.summary.items() if k not in shown)
        if rest:
            lines += wrap(rest, width, under + "  ", under)
    return lines


def print_verify(renderer: Output, report: IcebergVerifyReport) -> None:
    problems = plural(len(report.problems), "problem")
    renderer.say(
        "verified the snapshot's data, delete files and DVs: "
        + ("[green]no problems[/]" if report.ok else f"[red]{problems}[/]")
    )
    for p in report.problems:
        renderer.say(f"  [red]{escape(str(p.kind))}[/] {escape(str(p.message))}", indent="    ")
