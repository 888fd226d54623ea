"""How the commands that write an Iceberg table read for a person: delete and optimize.

As `rewrites` does for Delta: one JSON document with `--json`, else lines within the
output's width, a listing of the plan for a dry run, the totals last.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dvtool.render.plain_console import escape
from dvtool.render.values import format_bytes, format_metrics

if TYPE_CHECKING:
    from dvtool.commands.delete.iceberg import IcebergDeleteResult
    from dvtool.commands.optimize.iceberg import IcebergOptimizeResult
    from dvtool.render.output import Output


def delete(r: Output, result: IcebergDeleteResult) -> None:
    """`dvtool delete` on an Iceberg table."""
    if r.as_json:
        r.json(result.to_json())
        return
    base = result.base_snapshot_id
    kind = "deletion vectors" if result.format_version >= 3 else "position deletes"
    if result.mode == "cow":
        kind = "copy-on-write"
    if result.dry_run:
        r.say(f"[bold]dry run[/] against snapshot {base}: nothing written")
    elif result.snapshot_id is None:
        r.say(f"no rows matched at snapshot {base}: nothing committed")
    else:
        version = result.format_version
        r.say(f"committed snapshot [bold]{result.snapshot_id}[/] (Iceberg v{version}, {kind})")
    if result.dry_run and result.changes:
        rows = (
            (
                f"{ch.deleted_rows:,}",
                "?" if ch.num_records is None else f"{ch.num_records:,}",
                ch.action,
                "scanned" if ch.read else "from metrics",
                ch.path,
            )
            for ch in result.changes
        )
        header = ("rows deleted", "records", "action", "read", "path")
        r.listing("Plan", header, rows, len(result.changes), "files")
    m = result.metrics
    r.say(
        f"files: {result.files_skipped:,} skipped, {result.files_scanned:,} scanned, "
        f"{len(result.changes):,} changed; rows deleted: {m['numDeletedRows']:,}"
    )
    if not result.dry_run and result.snapshot_id is not None:
        r.say(f"metrics: {escape(format_metrics(m))}")


def optimize(r: Output, result: IcebergOptimizeResult) -> None:
    """`dvtool optimize` on an Iceberg table: delete rewrites, purge, compaction."""
    if r.as_json:
        r.json(result.to_json())
        return
    base = result.base_snapshot_id
    what = result.operation
    if result.dry_run:
        r.say(f"[bold]dry run[/] of {what} against snapshot {base}: nothing written")
    elif result.snapshot_id is None:
        r.say(f"{what}: nothing to do at snapshot {base}")
    elif len(result.snapshot_ids) > 1:
        ids = ", ".join(str(i) for i in result.snapshot_ids)
        r.say(f"{what}: committed {len(result.snapshot_ids)} snapshots ({ids})")
    else:
        r.say(f"{what}: committed snapshot [bold]{result.snapshot_id}[/]")
    if result.dry_run and result.bins:
        _bins(r, result.bins)
    r.say(f"metrics: {escape(format_metrics(result.metrics))}")


def _bins(r: Output, bins: list[dict[str, Any]]) -> None:
    """The planned new files of a purge or compaction: one line each, with its inputs (a
    file split over several new files counts in each)."""
    rows = (
        (
            str(number),
            f"{len(o['sources']):,}",
            f"{o['rows']:,}",
            f"{o['deleted_rows']:,}",
            format_bytes(o["input_bytes"]),
            _partition(b),
        )
        for number, (b, o) in enumerate(((b, o) for b in bins for o in b["outputs"]), 1)
    )
    header = ("new file", "inputs", "rows kept", "rows dropped", "input bytes", "partition")
    count = sum(len(b["outputs"]) for b in bins)
    r.listing("Plan", header, rows, count, "new files")


def _partition(b: dict[str, Any]) -> str:
    values = ", ".join("null" if v is None else str(v) for v in b["partition"])
    return escape(f"spec {b['spec_id']} ({values})" if values else f"spec {b['spec_id']}")
