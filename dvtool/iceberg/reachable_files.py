"""The files an Iceberg table's metadata reaches, and those a snapshot expiry frees.

A snapshot reaches its manifest list, the manifests the list names, and the live (ADDED or
EXISTING) data and delete files of those manifests (position delete files, equality delete
files, and the Puffin files of deletion vectors, one path for many DVs); the table
metadata reaches the statistics and partition statistics files it lists, its own file, the
earlier metadata files of its `metadata-log`, and `metadata/version-hint.text`.

The files an expiry frees are Iceberg Java's `ReachableFileCleanup` (and Spark's
`expire_snapshots`, which computes the same difference): reachable from the expired
snapshots and not from the kept ones. Manifests are compared by path first, so only the
manifests that go are read for their entries, and the kept manifests only when some
content file could go. Statistics files go when the kept metadata no longer lists them.
Manifests are read with `snapshot_files.manifest_entries` (v3 entries read right).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dvtool.iceberg.snapshot_files import manifest_entries
from dvtool.io_pool import map_io

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table.metadata import TableMetadata

DATA = "data"
POSITION_DELETES = "position deletes"
EQUALITY_DELETES = "equality deletes"
DELETION_VECTORS = "deletion vectors"
MANIFEST = "manifest"
MANIFEST_LIST = "manifest list"
STATISTICS = "statistics"
PARTITION_STATISTICS = "partition statistics"
METADATA = "metadata"
VERSION_HINT = "version hint"

VERSION_HINT_PATH = "metadata/version-hint.text"


def content_kind(record: Any) -> str:
    """The kind of a manifest entry's file: data, position/equality deletes or DVs."""
    content = int(record.content)
    if content == 0:
        return DATA
    if content == 2:
        return EQUALITY_DELETES
    if str(record.file_format).upper().endswith("PUFFIN"):
        return DELETION_VECTORS
    return POSITION_DELETES


@dataclass
class ManifestReader:
    """Reads manifest lists and manifests once each (a manifest is shared by many
    snapshots), the manifests in parallel."""

    io: FileIO
    format_version: int

    def __post_init__(self) -> None:
        self._lists: dict[str, list[Any]] = {}
        self._contents: dict[str, dict[str, str]] = {}
        self.sizes: dict[str, int] = {}
        """The size of every content file and manifest read, by path."""

    def manifests(self, manifest_list: str | None) -> list[Any]:
        """The manifests (pyiceberg `ManifestFile`s) a manifest list names."""
        if not manifest_list:
            return []
        if manifest_list not in self._lists:
            from pyiceberg.manifest import read_manifest_list

            self._lists[manifest_list] = list(read_manifest_list(self.io.new_input(manifest_list)))
        return self._lists[manifest_list]

    def content_files(self, manifests: Iterable[Any]) -> dict[str, str]:
        """The live content files of the manifests: path -> kind."""
        manifests = list(manifests)
        todo = {m.manifest_path: m for m in manifests if m.manifest_path not in self._contents}
        for path, (files, sizes) in zip(todo, map_io(self._read, list(todo.values())), strict=True):
            self._contents[path] = files
            self.sizes.update(sizes)
        out: dict[str, str] = {}
        for m in manifests:
            self.sizes[m.manifest_path] = m.manifest_length
            out.update(self._contents[m.manifest_path])
        return out

    def _read(self, manifest: Any) -> tuple[dict[str, str], dict[str, int]]:
        entries = manifest_entries(manifest, self.io, self.format_version)
        kinds = {e.data_file.file_path: content_kind(e.data_file) for e in entries}
        sizes = {e.data_file.file_path: e.data_file.file_size_in_bytes for e in entries}
        return kinds, sizes


def manifest_lists(metadata: TableMetadata, snapshot_ids: Iterable[int]) -> dict[str, str]:
    """The manifest lists of the snapshots: path -> kind."""
    wanted = set(snapshot_ids)
    return {
        s.manifest_list: MANIFEST_LIST
        for s in metadata.snapshots
        if s.snapshot_id in wanted and s.manifest_list
    }


def snapshot_manifests(
    reader: ManifestReader, metadata: TableMetadata, snapshot_ids: Iterable[int]
) -> dict[str, Any]:
    """The manifests of the snapshots, by path."""
    out: dict[str, Any] = {}
    for path in manifest_lists(metadata, snapshot_ids):
        for manifest in reader.manifests(path):
            out.setdefault(manifest.manifest_path, manifest)
    return out


def statistics_sizes(metadata: TableMetadata) -> dict[str, int]:
    """The sizes of the statistics and partition statistics files the metadata lists."""
    out = {f.statistics_path: f.file_size_in_bytes for f in metadata.statistics}
    out.update({f.statistics_path: f.file_size_in_bytes for f in metadata.partition_statistics})
    return out


def statistics_files(metadata: TableMetadata) -> dict[str, str]:
    """The statistics and partition statistics files the metadata lists."""
    out = {f.statistics_path: STATISTICS for f in metadata.statistics}
    out.update({f.statistics_path: PARTITION_STATISTICS for f in metadata.partition_statistics})
    return out


def metadata_files(metadata: TableMetadata, metadata_location: str | None) -> dict[str, str]:
    """The metadata file itself (when it exists: None before a commit), the earlier ones its
    `metadata-log` keeps, and the version hint of path (Hadoop) tables."""
    out = {entry.metadata_file: METADATA for entry in metadata.metadata_log}
    if metadata_location:
        out[metadata_location] = METADATA
    out[f"{str(metadata.location).rstrip('/')}/{VERSION_HINT_PATH}"] = VERSION_HINT
    return out


def reachable_files(
    reader: ManifestReader, metadata: TableMetadata, metadata_location: str | None
) -> dict[str, str]:
    """Every file the table metadata reaches (all its snapshots): path -> kind. What Java's
    `remove_orphan_files` treats as valid."""
    ids = [s.snapshot_id for s in metadata.snapshots]
    manifests = snapshot_manifests(reader, metadata, ids)
    out = reader.content_files(manifests.values())
    out.update(dict.fromkeys(manifests, MANIFEST))
    out.update(manifest_lists(metadata, ids))
    out.update(statistics_files(metadata))
    out.update(metadata_files(metadata, metadata_location))
    return out


def expired_files(
    reader: ManifestReader,
    before: TableMetadata,
    expired_ids: Iterable[int],
    after: TableMetadata,
) -> dict[str, str]:
    """The files reachable from the expired snapshots of `before` and from no snapshot of
    `after` (the metadata once they are removed): path -> kind (Java's
    `ReachableFileCleanup`). Statistics files `after` no longer lists go too."""
    expired = list(expired_ids)
    if not expired:
        return {}
    kept_ids = [s.snapshot_id for s in after.snapshots]
    kept_manifests = snapshot_manifests(reader, after, kept_ids)
    gone_manifests = {
        path: m
        for path, m in snapshot_manifests(reader, before, expired).items()
        if path not in kept_manifests
    }
    out: dict[str, str] = {}
    if gone_manifests:
        candidates = reader.content_files(gone_manifests.values())
        if candidates:
            kept = reader.content_files(kept_manifests.values())
            out.update({p: k for p, k in candidates.items() if p not in kept})
        out.update(dict.fromkeys(gone_manifests, MANIFEST))
    kept_lists = manifest_lists(after, kept_ids)
    out.update({p: k for p, k in manifest_lists(before, expired).items() if p not in kept_lists})
    kept_stats = statistics_files(after)
    out.update({p: k for p, k in statistics_files(before).items() if p not in kept_stats})
    return out


def dropped_metadata_files(
    before: TableMetadata,
    before_location: str,
    after: TableMetadata,
    properties: Mapping[str, str],
) -> dict[str, str]:
    """The metadata files a commit of `after` drops from the metadata log, when the table
    sets `write.metadata.delete-after-commit.enabled` (Java deletes them after its commit
    then; otherwise they stay until they are orphans)."""
    enabled = properties.get("write.metadata.delete-after-commit.enabled", "false")
    if enabled.strip().lower() != "true":
        return {}
    kept = {entry.metadata_file for entry in after.metadata_log}
    earlier = [entry.metadata_file for entry in before.metadata_log] + [before_location]
    return {path: METADATA for path in earlier if path not in kept}
