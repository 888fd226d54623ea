"""Symlink manifests (Presto, Trino, Athena, Redshift Spectrum) and their refresh after a commit.

A manifest lists the absolute paths of the live data files, one per line (each line
`\\n`-terminated), in the form Delta Spark writes them (Hadoop `Path.toString`: the scheme,
then the percent-decoded path): `file:/data/t/part-0.parquet` on local disk,
`s3://bucket/t/part-0.parquet` on object stores. Unpartitioned tables get
`_symlink_format_manifest/manifest`; partitioned tables one manifest per partition, under the
Hive directory of the partition values. Every manifest is replaced atomically.

On tables with `delta.compatibility.symlinkFormatManifest.enabled=true` the commit path
(`dvtool.delta.log.transaction`) calls `refresh_manifests_after_commit` after every commit, as
Delta's post-commit hook (`GenerateSymlinkManifest.generateIncrementalManifest`) does: only
the manifests of the partitions the commit touched are rewritten (or deleted, once the
partition has no files). The commit has landed by then, so a refresh that fails is a
warning, never an error. `dvtool generate-manifest` (`dvtool.commands.manifest`) writes them
all on demand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow.fs as pafs

from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.protocol.actions import Metadata
from dvtool.delta.protocol.features import require_writable
from dvtool.delta.protocol.partitions import partition_directory
from dvtool.errors import DvtoolError, WriteRefusedError
from dvtool.storage.table_storage import Storage

MANIFEST_DIR = "_symlink_format_manifest"
MANIFEST_NAME = "manifest"
SYMLINK_MANIFEST_PROPERTY = "delta.compatibility.symlinkFormatManifest.enabled"


@dataclass(frozen=True)
class ManifestFile:
    """One manifest written: its partition directory ("" when unpartitioned), location, size."""

    partition: str
    location: str
    num_files: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def check_manifest_table(snapshot: Snapshot) -> None:
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
        directories = [manifest_directory(columns, v) for v in values]
    for directory, path in zip(directories, paths, strict=True):
        groups.setdefault(directory, []).append(manifest_path(storage, path))
    return {d: sorted(lines) for d, lines in groups.items()}


def manifest_directory(
    columns: Sequence[str], values: Mapping[str, str | None] | Iterable[Any] | None
) -> str:
    """The Hive directory ("" when unpartitioned) of a file's `partitionValues`, given as
    the log's JSON object or as the (key, value) pairs of an arrow map."""
    if not columns:
        return ""
    found = dict(values or [])
    return partition_directory([(c, found.get(c)) for c in columns])


def write_manifests(storage: Storage, snapshot: Snapshot) -> tuple[list[ManifestFile], list[str]]:
    """Write every manifest of `snapshot` and delete those of partitions without files."""
    contents = manifest_contents(storage, snapshot)
    written = [_write_manifest(storage, d, contents[d]) for d in sorted(contents)]
    stale = [d for d in existing_manifests(storage) if d not in contents and d]
    return written, _delete_manifests(storage, stale)


def _manifest_location(storage: Storage, directory: str) -> str:
    inner = f"{directory}/{MANIFEST_NAME}" if directory else MANIFEST_NAME
    return storage.join(f"{MANIFEST_DIR}/{inner}")


def _write_manifest(storage: Storage, directory: str, lines: Sequence[str]) -> ManifestFile:
    """Replace the manifest of partition `directory` atomically with `lines`."""
    location = _manifest_location(storage, directory)
    storage.write_atomic_replace(location, "".join(f"{line}\n" for line in lines).encode())
    return ManifestFile(directory, location, len(lines))


def _delete_manifests(storage: Storage, directories: Sequence[str]) -> list[str]:
    """Delete the manifests of partition `directories` (missing ones are skipped), then
    their emptied local directories; the locations deleted."""
    locations = [_manifest_location(storage, d) for d in sorted(directories)]
    storage.delete_many(locations)
    _prune_empty_dirs(storage, list(directories))
    return locations


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


# -- after every commit (delta.compatibility.symlinkFormatManifest.enabled) ------------------


@dataclass(frozen=True)
class ManifestRefresh:
    """The manifests brought up to date after commit `version`.

    `snapshot_version`: the version they were written from, the latest when the refresh ran
    (as Delta's hook does: a concurrent writer's newer commit is not overwritten by this
    commit's older state, unless it lands while the manifests are being written). `full`:
    every manifest was regenerated, not only those of the partitions the commit touched.
    `warning`: why the manifests could not be brought up to date; the commit stands
    regardless and `dvtool generate-manifest` repairs them. After a failure
    `snapshot_version` is None and `updated`/`deleted` are empty, though some manifests may
    already have been replaced (each atomically).
    """

    version: int
    snapshot_version: int | None = None
    full: bool = False
    updated: list[ManifestFile] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    warning: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "snapshot_version": self.snapshot_version,
            "full": self.full,
            "updated": [m.to_json() for m in self.updated],
            "deleted": list(self.deleted),
            "warning": self.warning,
        }


def symlink_manifests_enabled(configuration: Mapping[str, str]) -> bool:
    """Whether a table configuration asks for manifests kept up to date on every write."""
    value = configuration.get(SYMLINK_MANIFEST_PROPERTY)
    return isinstance(value, str) and value.strip().lower() == "true"


def refresh_manifests_after_commit(
    log: DeltaLog,
    version: int,
    actions: Sequence[Mapping[str, Any]],
    *,
    metadata: Metadata | None = None,
) -> ManifestRefresh | None:
    """Update the symlink manifests after commit `version` made of `actions`, as Delta's
    post-commit hook does on tables with `delta.compatibility.symlinkFormatManifest.enabled`.

    None, with nothing done, unless the configuration at `version` enables it: that of the
    commit's metaData action, else of `metadata` (the table's metaData as of the commit; it
    spares a read of the log), else read from the log. Otherwise the manifest of every
    partition the commit added or removed files in is rewritten from the latest snapshot
    (an unpartitioned table's single manifest), and that of a touched partition left without
    live files deleted. All manifests are regenerated when the table has none yet, the
    commit changes metaData (partition columns may change) or a remove lacks partitionValues.

    Never raises for a failure, since the commit has landed: a manifest that could not be
    written, or a table whose manifests would be wrong (live files with deletion vectors,
    column mapping), is reported in `warning`, as `CommitResult.checkpoint_warning` is.
    """
    try:
        configuration = _configuration_at(log, version, actions, metadata)
    except Exception as e:  # the commit stands whatever happens here
        return ManifestRefresh(
            version,
            warning=f"committed version {version}, but could not read the table configuration "
            f"to tell whether its symlink manifests need updating: {_one_line(e)}",
        )
    if not symlink_manifests_enabled(configuration):
        return None
    try:
        return _refresh(log, version, actions)
    except Exception as e:  # the commit stands whatever happens here
        return ManifestRefresh(
            version,
            warning=f"committed version {version}, but its symlink manifests could not be "
            f"updated: {_one_line(e)}; they may list removed files until "
            "`dvtool generate-manifest TABLE` regenerates them",
        )


def _configuration_at(
    log: DeltaLog, version: int, actions: Sequence[Mapping[str, Any]], metadata: Metadata | None
) -> Mapping[str, str]:
    for action in actions:
        body = action.get("metaData")
        if isinstance(body, Mapping):
            return dict(body.get("configuration") or {})
    if metadata is not None:
        return metadata.configuration
    return log.snapshot(version).metadata.configuration


def _refresh(log: DeltaLog, version: int, actions: Sequence[Mapping[str, Any]]) -> ManifestRefresh:
    """Rewrite the touched partitions' manifests (or all of them) from the latest snapshot."""
    storage = log.storage
    snapshot = log.snapshot()
    check_manifest_table(snapshot)
    count = files_with_dvs(snapshot)
    if count:
        return ManifestRefresh(version, snapshot.version, warning=_dv_warning(version, count))
    touched = _touched_directories(actions, snapshot.metadata.partition_columns)
    if touched is None or not _has_manifests(storage):
        written, deleted = write_manifests(storage, snapshot)
        return ManifestRefresh(version, snapshot.version, True, written, deleted)
    contents = manifest_contents(storage, snapshot)
    written = [_write_manifest(storage, d, contents[d]) for d in sorted(touched & contents.keys())]
    emptied = [
        d
        for d in sorted(touched - contents.keys())
        if storage.exists(_manifest_location(storage, d))
    ]
    deleted = _delete_manifests(storage, emptied)
    return ManifestRefresh(version, snapshot.version, False, written, deleted)


def _touched_directories(
    actions: Sequence[Mapping[str, Any]], columns: Sequence[str]
) -> set[str] | None:
    """The partition directories the commit's adds and removes are in; None when they
    cannot be told (a metaData change, or a remove of a partitioned table without its
    partitionValues), which calls for a full regeneration."""
    touched: set[str] = set()
    for action in actions:
        if "metaData" in action:
            return None
        kind = "add" if "add" in action else "remove" if "remove" in action else None
        body = action.get(kind) if kind else None
        if not isinstance(body, Mapping):
            continue
        values = body.get("partitionValues")
        if values is None and columns and kind == "remove":
            return None
        touched.add(manifest_directory(columns, values))
    return touched


def _has_manifests(storage: Storage) -> bool:
    """Whether `_symlink_format_manifest/` holds anything (Delta regenerates everything
    when the directory does not exist yet); one listing, not a walk of every partition."""
    fs, root = storage.arrow_filesystem(storage.join(MANIFEST_DIR))
    return bool(fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)))


def _dv_warning(version: int, count: int) -> str:
    return (
        f"committed version {version}, but its symlink manifests were not updated: {count} "
        "live file(s) have deletion vectors, and manifest readers (Presto, Trino, Athena, "
        "Redshift Spectrum) would return their deleted rows; run "
        "`dvtool generate-manifest TABLE --purge-first` to purge them and regenerate"
    )


def _one_line(exc: BaseException) -> str:
    """The exception's message on one line (without a DvtoolError's hint)."""
    raw = exc.message if isinstance(exc, DvtoolError) else str(exc)
    text = " ".join(raw.split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
