"""`dvtool generate-manifest`: symlink manifests for Presto, Trino, Athena, Redshift Spectrum,
as Delta's `GENERATE symlink_format_manifest FOR TABLE` writes them.

A manifest lists the absolute paths of the live data files, one per line (each line
`\\n`-terminated), in the form Delta Spark writes them (Hadoop `Path.toString`: the scheme,
then the percent-decoded path): `file:/data/t/part-0.parquet` on local disk,
`s3://bucket/t/part-0.parquet` on object stores.

- Unpartitioned tables get `_symlink_format_manifest/manifest` (written even when the table
  is empty, as Delta does).
- Partitioned tables get one manifest per partition, under the Hive directory of the
  partition values in the order of the table's partition columns
  (`_symlink_format_manifest/region=eu/day=2024-01-01/manifest`), names and values escaped
  like Spark's `escapePathName` and NULL or empty values as `__HIVE_DEFAULT_PARTITION__`.
  Manifests of partitions that no longer have files are deleted.

Every manifest is replaced atomically (readers see the old or the new list). Manifest readers
cannot apply deletion vectors, so a snapshot with DVs is refused (`purge_first=True` purges
them first, like `dvtool optimize --purge`), and so are column-mapped tables (the files'
column names are physical names), as Delta refuses both.

The manifests themselves, and their refresh after every commit on tables with
`delta.compatibility.symlinkFormatManifest.enabled=true`, live in
`dvtool.delta.log.symlink_manifests`; this module is the command.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.log.symlink_manifests import (
    MANIFEST_DIR,
    ManifestFile,
    check_manifest_table,
    files_with_dvs,
    write_manifests,
)
from dvtool.engines.base import Engine
from dvtool.errors import CommitConflictError, WriteRefusedError

if TYPE_CHECKING:
    # Imported lazily at run time: --purge-first runs optimize.
    from dvtool.commands.optimize.command import OptimizeResult, Progress

EngineFactory = Callable[[int], Engine]
_PURGE_ATTEMPTS = 3


@dataclass(frozen=True)
class ManifestResult:
    """The manifests of snapshot `version`, the stale ones deleted, and the purge if any."""

    version: int
    root: str
    manifests: list[ManifestFile]
    deleted: list[str]
    purge: OptimizeResult | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def num_files(self) -> int:
        return sum(m.num_files for m in self.manifests)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "root": self.root,
            "num_manifests": len(self.manifests),
            "num_files": self.num_files,
            "manifests": [m.to_json() for m in self.manifests],
            "deleted": list(self.deleted),
            "purge": self.purge.to_json() if self.purge is not None else None,
            "warnings": list(self.warnings),
        }


def _arrow_engine(_: int) -> Engine:
    from dvtool.engines.arrow import ArrowEngine

    return ArrowEngine()


def run_generate_manifest(
    log: DeltaLog,
    purge_first: bool = False,
    engine_for: EngineFactory | None = None,
    progress: Progress | None = None,
) -> ManifestResult:
    """Write the symlink manifests of the latest snapshot; see the module docstring.

    With `purge_first`, files with DVs are first rewritten without their deleted rows (a
    REORG ... APPLY (PURGE) commit) and the manifests describe the table after the purge.
    """
    snapshot = log.snapshot()
    check_manifest_table(snapshot)
    purge: OptimizeResult | None = None
    warnings: list[str] = []
    if purge_first:
        snapshot, purge = _purge(log, snapshot, engine_for or _arrow_engine, progress)
        warnings += purge.checkpoint_warnings if purge is not None else []
    _refuse_dvs(snapshot)
    written, deleted = write_manifests(log.storage, snapshot)
    return ManifestResult(
        snapshot.version, log.storage.join(MANIFEST_DIR), written, deleted, purge, warnings
    )


def _refuse_dvs(snapshot: Snapshot) -> None:
    count = files_with_dvs(snapshot)
    if count:
        raise WriteRefusedError(
            f"cannot generate manifests: {count} file(s) at version {snapshot.version} have "
            "deletion vectors, and manifest readers (Presto, Trino, Athena, Redshift Spectrum) "
            "would return their deleted rows",
            hint="Run with --purge-first, or purge them first with "
            "`dvtool optimize TABLE --purge`.",
        )


def _purge(
    log: DeltaLog, snapshot: Snapshot, engine_for: EngineFactory, progress: Progress | None
) -> tuple[Snapshot, OptimizeResult | None]:
    """Purge DVs until the latest snapshot has none (a concurrent delete may add more)."""
    from dvtool.commands.optimize.command import OptimizeRequest, run_optimize

    purge: OptimizeResult | None = None
    for attempt in range(1, _PURGE_ATTEMPTS + 1):
        if not files_with_dvs(snapshot):
            return snapshot, purge
        try:
            purge = run_optimize(log, OptimizeRequest(purge=True), engine_for, progress)
        except CommitConflictError:
            if attempt == _PURGE_ATTEMPTS:
                raise
        snapshot = log.snapshot()
        check_manifest_table(snapshot)
    return snapshot, purge
