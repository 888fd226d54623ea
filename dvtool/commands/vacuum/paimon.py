"""`dvtool vacuum` on a Paimon table: delete its orphan files, as Paimon's
`remove_orphan_files` procedure does (`dvtool.paimon.orphan_files` says which files).

Snapshot expiry stays Paimon's: its rules (`snapshot.num-retained.min/max`,
`snapshot.time-retained`, consumers' positions, tags, changelog decoupling) decide which
snapshots go, and its writers apply them at every commit; dvtool expires nothing. What it
does is the orphan clean: files older than `--retain` (default a day, Paimon's
`older_than`) in the table's data, manifest, index and statistics folders that no kept
snapshot, tag or changelog of any branch reaches, and the temporary files failed commits
left in every branch's `snapshot/` and `changelog/`. Orphans in external data paths
(`data-file.external-paths`) outside the table folder are left to Paimon's own
`remove_orphan_files`. A retention shorter than the default is refused
unless forced (a writer that has not committed yet could lose its files). Files are
deleted through dvtool's storage, each checked again just before to be inside the table
folder (`dvtool.commands.vacuum.delete`); a dry run lists them.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from dvtool.commands.result import CommandResult
from dvtool.commands.vacuum.delete import FailedDelete, Progress, delete_files
from dvtool.commands.vacuum.plan import VacuumFile
from dvtool.commands.vacuum.retention import format_duration
from dvtool.errors import WriteRefusedError
from dvtool.paimon.orphan_files import (
    DEFAULT_ORPHAN_RETENTION_MS,
    OrphanFile,
    candidate_files,
    check_supported,
    external_paths_outside,
    orphan_files,
    used_files,
)
from dvtool.paimon.orphan_roots import all_branches

if TYPE_CHECKING:
    from dvtool.paimon.tables import PaimonTable

ORPHAN = "orphan file"


@dataclass(frozen=True)
class PaimonVacuumResult(CommandResult):
    """The orphan files found (a dry run stops there) and what was deleted."""

    location: str
    dry_run: bool
    retention_ms: int
    cutoff_ms: int
    roots: int
    """The snapshots, tags and changelogs (of every branch) whose files were kept."""
    listed_files: int
    files: list[OrphanFile]
    branches: list[str] = field(default_factory=lambda: ["main"])
    """The branches whose roots were read (the table's, then main: Paimon's order)."""
    external_paths_left: list[str] = field(default_factory=list)
    """External data paths outside the table folder: not listed, left to Paimon."""
    deleted_files: int = 0
    deleted_bytes: int = 0
    failed: list[FailedDelete] = field(default_factory=list)

    @property
    def num_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "paimon",
            "location": self.location,
            "dry_run": self.dry_run,
            "retention_ms": self.retention_ms,
            "cutoff_ms": self.cutoff_ms,
            "roots": self.roots,
            "branches": self.branches,
            "external_paths_left": self.external_paths_left,
            "listed_files": self.listed_files,
            "num_files": len(self.files),
            "num_bytes": self.num_bytes,
            "files": [asdict(f) for f in self.files],
            "deleted_files": self.deleted_files,
            "deleted_bytes": self.deleted_bytes,
            "failed": [f.to_json() for f in self.failed],
        }


def run_vacuum_paimon(
    table: PaimonTable,
    retain_ms: int | None = None,
    dry_run: bool = False,
    force: bool = False,
    progress: Progress | None = None,
    now_ms: int | None = None,
) -> PaimonVacuumResult:
    """Find the orphan files older than `retain_ms` (default a day) and, unless `dry_run`,
    delete them; `force` allows a shorter retention."""
    retention = DEFAULT_ORPHAN_RETENTION_MS if retain_ms is None else retain_ms
    if retention < DEFAULT_ORPHAN_RETENTION_MS and not force:
        raise WriteRefusedError(
            f"--retain {format_duration(retention)} is shorter than a day, Paimon's default "
            "for orphan files: a writer that has not committed yet could lose its files",
            hint="Use a retention of at least 1 day, or add --force if no writer is running.",
        )
    check_supported(table)
    cutoff = (int(time.time() * 1000) if now_ms is None else now_ms) - retention
    candidates = candidate_files(table)
    used = used_files(table)  # after listing: a file committed meanwhile is kept
    orphans = orphan_files(table, cutoff, candidates, used)
    result = PaimonVacuumResult(
        table.location,
        dry_run,
        retention,
        cutoff,
        used.roots,
        len(candidates),
        orphans,
        all_branches(table),
        external_paths_outside(table),
    )
    if dry_run or not orphans:
        return result
    planned = [VacuumFile(f.path, f.size, ORPHAN) for f in orphans]
    deleted, failed = delete_files(table.storage, planned, progress)
    return PaimonVacuumResult(
        **{
            **result.__dict__,
            "deleted_files": len(deleted),
            "deleted_bytes": sum(f.size for f in deleted),
            "failed": failed,
        }
    )
