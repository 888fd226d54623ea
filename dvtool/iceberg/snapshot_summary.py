"""A snapshot's summary as Iceberg Java's `SnapshotSummary` and `SnapshotProducer` fill it.

The summary counts what a snapshot changed (spec.md "Optional Snapshot Summary Fields"):
files, records and bytes added and removed, by content (data, position deletes, deletion
vectors, equality deletes), the partitions changed, and the table's running totals carried
from the parent snapshot (`total-*`: parent total + added - removed; left out when the
parent has none, as Java's `updateTotal` does). As Java since 1.7 counts them:

- a deletion vector counts in `added-dvs` / `removed-dvs` instead of the
  `*-position-delete-files` counts, and still in `added-delete-files` and
  `added-position-deletes` (its cardinality); its size is its blob's
  `content_size_in_bytes`, not the Puffin file's (`ScanTaskUtil.contentSizeInBytes`);
- `changed-partition-count` counts partition paths, the unpartitioned path "" included;
  per-partition `partitions.{path}` entries only when there are at most
  `write.summary.partition-limit` (default 0) of them and the table is partitioned;
- `manifests-created`, `manifests-kept`, `manifests-replaced` as `MergingSnapshotProducer`
  reports them.

pyiceberg's `SnapshotSummaryCollector` has no DV counts and counts no unpartitioned path,
hence this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table.metadata import TableMetadata

PARTITION_SUMMARY_LIMIT = "write.summary.partition-limit"


@dataclass
class UpdateMetrics:
    """What a snapshot added and removed, in Java's `SnapshotSummary.UpdateMetrics` order."""

    added_files: int = 0
    removed_files: int = 0
    added_eq_delete_files: int = 0
    removed_eq_delete_files: int = 0
    added_pos_delete_files: int = 0
    removed_pos_delete_files: int = 0
    added_delete_files: int = 0
    removed_delete_files: int = 0
    added_dvs: int = 0
    removed_dvs: int = 0
    added_records: int = 0
    deleted_records: int = 0
    added_size: int = 0
    removed_size: int = 0
    added_pos_deletes: int = 0
    removed_pos_deletes: int = 0
    added_eq_deletes: int = 0
    removed_eq_deletes: int = 0

    def count(self, data_file: DataFile, added: bool) -> None:
        """Count one file added (or removed)."""
        side = "added" if added else "removed"
        self._add(f"{side}_size", content_size(data_file))
        content = int(data_file.content)
        if content == 0:
            self._add("added_files" if added else "removed_files", 1)
            self._add("added_records" if added else "deleted_records", data_file.record_count)
            return
        self._add(f"{side}_delete_files", 1)
        if content == 2:
            self._add(f"{side}_eq_delete_files", 1)
            self._add(f"{side}_eq_deletes", data_file.record_count)
            return
        self._add(f"{side}_dvs" if is_dv(data_file) else f"{side}_pos_delete_files", 1)
        self._add(f"{side}_pos_deletes", data_file.record_count)

    def _add(self, name: str, amount: int) -> None:
        setattr(self, name, getattr(self, name) + amount)

    def properties(self) -> dict[str, str]:
        """The positive counts under their summary names."""
        return {
            _PROPERTY[f.name]: str(getattr(self, f.name))
            for f in fields(self)
            if getattr(self, f.name) > 0
        }


_PROPERTY = {
    "added_files": "added-data-files",
    "removed_files": "deleted-data-files",
    "added_eq_delete_files": "added-equality-delete-files",
    "removed_eq_delete_files": "removed-equality-delete-files",
    "added_pos_delete_files": "added-position-delete-files",
    "removed_pos_delete_files": "removed-position-delete-files",
    "added_delete_files": "added-delete-files",
    "removed_delete_files": "removed-delete-files",
    "added_dvs": "added-dvs",
    "removed_dvs": "removed-dvs",
    "added_records": "added-records",
    "deleted_records": "deleted-records",
    "added_size": "added-files-size",
    "removed_size": "removed-files-size",
    "added_pos_deletes": "added-position-deletes",
    "removed_pos_deletes": "removed-position-deletes",
    "added_eq_deletes": "added-equality-deletes",
    "removed_eq_deletes": "removed-equality-deletes",
}
# (total, added, removed), in Java's SnapshotProducer.summary order.
TOTALS = (
    ("total-records", "added-records", "deleted-records"),
    ("total-files-size", "added-files-size", "removed-files-size"),
    ("total-data-files", "added-data-files", "deleted-data-files"),
    ("total-delete-files", "added-delete-files", "removed-delete-files"),
    ("total-position-deletes", "added-position-deletes", "removed-position-deletes"),
    ("total-equality-deletes", "added-equality-deletes", "removed-equality-deletes"),
)


def is_dv(data_file: DataFile) -> bool:
    """Whether a delete file is a deletion vector (Java's `ContentFileUtil.isDV`: Puffin)."""
    return str(data_file.file_format).upper().endswith("PUFFIN")


def content_size(data_file: DataFile) -> int:
    """The bytes a file adds to the table: a DV's blob size, another file's size."""
    from dvtool.iceberg.manifest_writers import v3_field

    blob_size = v3_field(data_file, "content_size_in_bytes") if is_dv(data_file) else None
    return int(blob_size if blob_size is not None else data_file.file_size_in_bytes)


@dataclass(frozen=True)
class ManifestCounts:
    """Manifests this snapshot wrote, carried over unchanged, and rewrote."""

    created: int
    kept: int
    replaced: int


class SummaryBuilder:
    """Collects the files a snapshot adds and removes; `build` makes its summary."""

    def __init__(self, metadata: TableMetadata) -> None:
        self._metadata = metadata
        self._specs = metadata.specs()
        self._schema = metadata.schema()
        self.metrics = UpdateMetrics()
        self.partitions: dict[str, UpdateMetrics] = {}
        self._partitioned = False

    def added(self, data_file: DataFile) -> None:
        self._count(data_file, True)

    def removed(self, data_file: DataFile) -> None:
        self._count(data_file, False)

    def _count(self, data_file: DataFile, added: bool) -> None:
        self.metrics.count(data_file, added)
        spec = self._specs.get(getattr(data_file, "_spec_id", None) or 0)
        path = ""
        if spec is not None and spec.fields:
            path = spec.partition_to_path(data_file.partition, self._schema)
            self._partitioned = True
        self.partitions.setdefault(path, UpdateMetrics()).count(data_file, added)

    def build(
        self,
        extra: Mapping[str, str],
        manifests: ManifestCounts,
        parent_summary: Mapping[str, str] | None,
    ) -> dict[str, str]:
        """The summary properties (without `operation`): `extra` first, as Java puts the
        custom properties first, then the counts, then the totals from `parent_summary`
        (None: the first snapshot, whose totals start at 0)."""
        summary = dict(extra)
        summary["manifests-created"] = str(manifests.created)
        summary["manifests-kept"] = str(manifests.kept)
        summary["manifests-replaced"] = str(manifests.replaced)
        summary.update(self.metrics.properties())
        summary["changed-partition-count"] = str(len(self.partitions))
        summary.update(self._partition_summaries())
        summary.update(totals(summary, parent_summary))
        return summary

    def _partition_summaries(self) -> dict[str, str]:
        limit = int(self._metadata.properties.get(PARTITION_SUMMARY_LIMIT, "0"))
        if not self._partitioned or len(self.partitions) > limit:
            return {}
        result = {"partition-summaries-included": "true"}
        for path, metrics in self.partitions.items():
            if path:
                result[f"partitions.{path}"] = ",".join(
                    f"{k}={v}" for k, v in metrics.properties().items()
                )
        return result


def totals(summary: Mapping[str, str], parent: Mapping[str, str] | None) -> dict[str, str]:
    """The `total-*` properties: the parent's total plus added minus removed, each only
    when the parent has it (and it stays a non-negative number), as Java's `updateTotal`."""
    base: Mapping[str, str] = parent if parent is not None else {t: "0" for t, _, _ in TOTALS}
    result: dict[str, str] = {}
    for total, added, removed in TOTALS:
        try:
            value = int(base[total])
            value += int(summary.get(added, "0")) if value >= 0 else 0
            value -= int(summary.get(removed, "0")) if value >= 0 else 0
        except (KeyError, ValueError):
            continue
        if value >= 0:
            result[total] = str(value)
    return result
