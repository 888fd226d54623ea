"""The base snapshot's manifests in a new snapshot: carried over, rewritten, or dropped.

Iceberg Java's `ManifestFilterManager` for a commit that removes files: a manifest that
holds none of the removed files is carried over unchanged; one that holds some is
rewritten, every live entry copied (EXISTING with its snapshot id, data and file sequence
numbers and, on v3, its inherited `first_row_id`), the removed ones with status DELETED
and the new snapshot's id. Then, as `MergingSnapshotProducer` does, only manifests with
live files or written by this commit are kept (a manifest whose entries an earlier
snapshot all deleted is dropped). On v3 tables, the deletion vectors of removed data files
are removed with them (Java's `removeDanglingDeletesFor`): a DV must not outlive its file.

Every removed key must name a live file of the base snapshot: otherwise the table changed
since the caller planned, and `RemovedFileNotLiveError` tells it to re-plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dvtool.iceberg.manifest_writers import blob_key, inherit_first_row_ids, v3_field
from dvtool.iceberg.snapshot_files import manifest_entries
from dvtool.iceberg.snapshot_summary import is_dv

if TYPE_CHECKING:
    from pyiceberg.manifest import ManifestEntry, ManifestFile

    from dvtool.iceberg.snapshot_producer import _Commit
    from dvtool.iceberg.snapshot_summary import SummaryBuilder

Key = tuple[str, int | None]


@dataclass
class FilteredManifests:
    """The base manifests as the new snapshot lists them, data and delete apart."""

    data: list[ManifestFile] = field(default_factory=list)
    deletes: list[ManifestFile] = field(default_factory=list)
    kept: int = 0
    replaced: int = 0


def has_live_files(manifest: ManifestFile) -> bool:
    """Whether a manifest may hold ADDED or EXISTING entries (unknown counts: yes)."""
    added, existing = manifest.added_files_count, manifest.existing_files_count
    return added is None or existing is None or added > 0 or existing > 0


def filter_manifests(
    commit: _Commit,
    manifests: list[ManifestFile],
    removed: frozenset[Key],
    summary: SummaryBuilder,
) -> FilteredManifests:
    """The base manifests for the new snapshot, rewriting those that hold removed files
    (counted in `summary`); RemovedFileNotLiveError when a removed file is not live."""
    live = [m for m in manifests if has_live_files(m)]
    entries = _read_entries(commit, live) if removed else {}
    doomed = _doomed_keys(commit, entries, removed)
    result = FilteredManifests()
    for manifest in live:
        manifest_entries_ = entries.get(manifest.manifest_path, [])
        if any(blob_key(e.data_file) in doomed for e in manifest_entries_):
            manifest = _rewrite(commit, manifest, manifest_entries_, doomed, summary)
            result.replaced += 1
        else:
            result.kept += 1
        (result.data if int(manifest.content) == 0 else result.deletes).append(manifest)
    return result


def _read_entries(commit: _Commit, manifests: list[ManifestFile]) -> dict[str, list[Any]]:
    """Each manifest's live entries, with inherited sequence numbers and row ids."""
    version = commit.metadata.format_version
    return {
        m.manifest_path: inherit_first_row_ids(manifest_entries(m, commit.io, version), m)
        for m in manifests
    }


def _doomed_keys(
    commit: _Commit, entries: dict[str, list[ManifestEntry]], removed: frozenset[Key]
) -> frozenset[Key]:
    """The keys to remove: `removed`, all live, and on v3 the DVs of removed data files."""
    live = {blob_key(e.data_file) for listed in entries.values() for e in listed}
    missing = sorted(removed - live, key=lambda k: (k[0], k[1] or 0))
    if missing:
        _raise_not_live(missing)
    if commit.metadata.format_version < 3:
        return removed
    removed_paths = {
        e.data_file.file_path
        for listed in entries.values()
        for e in listed
        if int(e.data_file.content) == 0 and blob_key(e.data_file) in removed
    }
    dangling = {
        blob_key(e.data_file)
        for listed in entries.values()
        for e in listed
        if is_dv(e.data_file) and _referenced_data_file(e.data_file) in removed_paths
    }
    return removed | dangling


def _referenced_data_file(data_file: Any) -> str | None:
    value = v3_field(data_file, "referenced_data_file")
    return str(value) if value is not None else None


def _raise_not_live(missing: list[Key]) -> None:
    from dvtool.iceberg.snapshot_producer import RemovedFileNotLiveError

    path, offset = missing[0]
    what = path if offset is None else f"{path} (blob at offset {offset})"
    more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
    raise RemovedFileNotLiveError(
        f"cannot remove {what}{more}: not a live file of the table's current snapshot "
        "(a concurrent commit removed or replaced it)"
    )


def _rewrite(
    commit: _Commit,
    manifest: ManifestFile,
    entries: list[ManifestEntry],
    doomed: frozenset[Key],
    summary: SummaryBuilder,
) -> ManifestFile:
    """A copy of `manifest` with the doomed entries DELETED by this snapshot."""
    with commit.writer(manifest.content, manifest.partition_spec_id) as writer:
        for entry in entries:
            if blob_key(entry.data_file) in doomed:
                writer.delete(entry)
                summary.removed(entry.data_file)
            else:
                writer.existing(entry)
    rewritten: ManifestFile = writer.to_manifest_file()
    return rewritten
