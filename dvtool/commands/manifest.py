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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow.fs as pafs

from dvtool.commands.optimize import OptimizeRequest, OptimizeResult, Progress, run_optimize
from dvtool.core.features import require_writable
from dvtool.core.partitions import partition_directory
from dvtool.engines.base import Engine
from dvtool.errors import CommitConflictError, WriteRefusedError
from dvtool.log.reader import DeltaLog
from dvtool.log.snapshot import Snapshot
from dvtool.storage import Storage

MANIFEST_DIR = "_symlink_format_manifest"
MANIFEST_NAME = "manifest"
EngineFactory = Callable[[int], Engine]
_PURGE_ATTEMPTS = 3


@dataclass(frozen=True)
class ManifestFile:
    """One manifest written: its partition directory ("" when unpartitioned), location, size."""

    partition: str
    location: str
    num_files: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


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
    _check_table(snapshot)
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


def _check_table(snapshot: Snapshot) -> None:
    require_writable(snapshot.protocol, snapshot.metadata, "MANIFEST")
    if snapshot.column_mapping_mode != "none":
        raise WriteRefusedError(
            f"cannot generate manifests for a table with column mapping "
            f"(delta.columnMapping.mode={snapshot.column_mapping_mode})",
            hint="Manifest readers would see the physical column names of the data files; "
            "Delta refuses this too.",
        )


def files_with_dvs(snapshot: Snapshot) -> int:
    """Live files of `snapshot` that carry a deletion vector."""
    dv = snapshot.files.column("deletionVector")
    return int(len(dv) - dv.null_count)


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
        _check_table(snapshot)
    return snapshot, purge


# -- manifests -------------------------------------------------------------------------------


def manifest_path(storage: Storage, path_in_log: str) -> str:
    """A data file's line in a manifest: the absolute path as Delta Spark writes it."""
    location = storage.resolve(path_in_log)
    return f"file:{location}" if location.startswith("/") else location


def manifest_contents(storage: Storage, snapshot: Snapshot) -> dict[str, list[str]]:
    """Manifest lines by partition directory ("" for an unpartitioned table)."""
    files = snapshot.files
    paths = files.column("path").to_pylist()
    columns = snapshot.metadata.partition_columns
    groups: dict[str, list[str]] = {}
    if not columns:
        groups[""] = []
        directories = [""] * len(paths)
    else:
        values = files.column("partitionValues").to_pylist()
        directories = [
            partition_directory([(c, dict(v or []).get(c)) for c in columns]) for v in values
        ]
    for directory, path in zip(directories, paths, strict=True):
        groups.setdefault(directory, []).append(manifest_path(storage, path))
    return {d: sorted(lines) for d, lines in groups.items()}


def write_manifests(storage: Storage, snapshot: Snapshot) -> tuple[list[ManifestFile], list[str]]:
    """Write every manifest of `snapshot` and delete those of partitions without files."""
    contents = manifest_contents(storage, snapshot)
    written = []
    for directory in sorted(contents):
        lines = contents[directory]
        relative = f"{MANIFEST_DIR}/{directory}/{MANIFEST_NAME}" if directory else None
        location = storage.join(relative or f"{MANIFEST_DIR}/{MANIFEST_NAME}")
        storage.write_atomic_replace(location, "".join(f"{line}\n" for line in lines).encode())
        written.append(ManifestFile(directory, location, len(lines)))
    stale = [d for d in existing_manifests(storage) if d not in contents and d]
    locations = [storage.join(f"{MANIFEST_DIR}/{d}/{MANIFEST_NAME}") for d in sorted(stale)]
    storage.delete_many(locations)
    _prune_empty_dirs(storage, stale)
    return written, locations


def existing_manifests(storage: Storage) -> list[str]:
    """The partition directories ("" for the root) that hold a manifest now."""
    fs, root = storage.arrow_filesystem(storage.join(MANIFEST_DIR))
    try:
        infos = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True, recursive=True))
    except OSError:
        return []
    prefix = root.rstrip("/") + "/"
    out = []
    for info in infos:
        if info.type != pafs.FileType.File or info.base_name != MANIFEST_NAME:
            continue
        relative = info.path[len(prefix) :] if info.path.startswith(prefix) else None
        if relative is not None:
            out.append(relative.rpartition("/")[0])
    return sorted(out)


def _prune_empty_dirs(storage: Storage, directories: list[str]) -> None:
    """Remove the local directories that held deleted manifests, once empty (object stores
    have no directories)."""
    if storage.protocol != "file":
        return
    fs, root = storage.arrow_filesystem(storage.join(MANIFEST_DIR))
    candidates: set[str] = set()
    for directory in directories:
        parts = directory.split("/")
        candidates.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    for directory in sorted(candidates, key=lambda d: -d.count("/")):
        path = f"{root.rstrip('/')}/{directory}"
        try:
            children = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
            if not children and fs.get_file_info(path).type == pafs.FileType.Directory:
                fs.delete_dir(path)
        except OSError:
            continue
