"""Planning and scanning a `--where` delete on an Iceberg snapshot.

1. The live files (`dvtool.iceberg.live_files`): every data file with its manifest record
   and the delete files that apply to it.
2. Per data file, the predicate judged from its column metrics (`iceberg_layout.file_stats`):
   no row can match (skipped), every row matches (the file goes, unread), or some might
   (scanned).
3. The rows already deleted (`DeletedBefore`: the file's DV or position deletes, and the
   rows its equality deletes match) never count as matches.
4. The scan: the engine reads the predicate's columns of the files to scan, by field id,
   and returns the newly matching positions per file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyroaring import BitMap64

from dvtool.commands import iceberg_layout
from dvtool.commands.iceberg_layout import metrics_verdict, stats_paths, table_layout
from dvtool.engines.base import ScanFile
from dvtool.iceberg.live_files import (
    Deleted,
    DeletedBefore,
    LiveDataFile,
    LiveFiles,
    all_rows,
    live_files,
)
from dvtool.predicate import Match, Predicate

if TYPE_CHECKING:
    from datetime import datetime

    from dvtool.engines.base import Engine, Progress
    from dvtool.iceberg.tables import IcebergTable
    from dvtool.storage.data_file_storage import DataFileStorage


@dataclass
class Touched:
    """A data file the delete changes: the rows it newly deletes, and what was deleted
    before (`Deleted`: by position, by equality)."""

    file: LiveDataFile
    before: Deleted
    new_rows: BitMap64
    read: bool

    @property
    def everything(self) -> bool:
        """Whether no row of the file remains (the file is removed instead)."""
        records = self.file.entry.record_count
        gone = self.new_rows | self.before.positional | self.before.by_equality
        return records <= 0 or gone.rank(records - 1) >= records


@dataclass
class Plan:
    """What the predicate does to each live data file."""

    table: IcebergTable
    predicate: Predicate
    live: LiveFiles
    skipped: int = 0
    whole: list[LiveDataFile] = field(default_factory=list)
    scan: list[LiveDataFile] = field(default_factory=list)


def parse_predicate(table: IcebergTable, where: str, now: datetime | None) -> Predicate:
    """`where` bound to the table's current schema (by field id)."""
    return iceberg_layout.parse_predicate(table.metadata, where, now)


def plan_delete(table: IcebergTable, predicate: Predicate) -> Plan:
    """Judge every live data file from its column metrics."""
    plan = Plan(table, predicate, live_files(table))
    paths = stats_paths(table.metadata.schema(), predicate.columns)
    for live in plan.live.data:
        verdict = metrics_verdict(predicate, live, paths)
        if verdict is Match.NONE:
            plan.skipped += 1
        elif verdict is Match.ALL:
            plan.whole.append(live)
        else:
            plan.scan.append(live)
    return plan


def whole_files(plan: Plan, deleted: DeletedBefore) -> list[Touched]:
    """The files every row of which matches: their remaining rows are the new deletes."""
    out = []
    for live, before in zip(plan.whole, deleted.load(plan.whole), strict=True):
        remaining = all_rows(live.entry.record_count) - before.positional - before.by_equality
        out.append(Touched(live, before, remaining, read=False))
    return out


def scan_files(
    plan: Plan,
    deleted: DeletedBefore,
    storage: DataFileStorage,
    engine: Engine,
    progress: Progress | None,
) -> list[Touched]:
    """Scan the files the metrics could not decide; the files with new matches."""
    if not plan.scan:
        return []
    before = deleted.load(plan.scan)
    files = [
        ScanFile(live.path, live.path, {}, live.entry.record_count, _gone(b))
        for live, b in zip(plan.scan, before, strict=True)
    ]
    layout = table_layout(storage, plan.table.metadata.schema())
    matches = engine.find_matches(layout, files, plan.predicate, progress)
    return [
        Touched(live, b, new, read=True)
        for live, b, new in zip(plan.scan, before, matches, strict=True)
        if len(new)
    ]


def _gone(before: Deleted) -> BitMap64 | None:
    gone = before.positional | before.by_equality
    return gone if len(gone) else None
