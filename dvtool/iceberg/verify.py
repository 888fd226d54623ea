"""`inspect --verify` for Iceberg tables: read every file a snapshot names, report what is wrong.

`verify_snapshot(metadata, snapshot, io, progress)` reads the snapshot's manifests (through
pyiceberg, `dvtool.iceberg.snapshot_files`), checks what the manifests say against each
other and the schema, then reads every live file in parallel (`map_io`), each in bounded
memory: a HEAD and the Parquet footer of each data file, each Puffin file once for all its
DVs (`verify_dvs`), position and equality delete files in batches (`verify_deletes`).
Every problem is an `IcebergProblem(kind, message, data_file, delete_file)`; no error
reading a file escapes as a traceback.

Problem kinds (spec.md and puffin-spec.md say what is required):

- `manifest-list-unreadable`, `manifest-unreadable`: the snapshot's manifest list or one of
  its manifests cannot be read (the files it lists are not checked).
- `file-duplicate`: a path listed live more than once (spec: "results are undefined").
- `data-file-missing`, `data-file-unreadable`, `data-file-size` (bytes differ from
  `file_size_in_bytes`), `data-file-record-count` (Parquet footer rows differ from
  `record_count`).
- `delete-file-missing`, `delete-file-unreadable`, `delete-file-size`,
  `delete-file-record-count`: the same for position and equality delete files and the
  Puffin files of DVs (a missing Puffin file is reported for each of its DVs).
- `puffin-unreadable`: a Puffin file without its `PFA1` magics or with a footer that does
  not parse (a truncated file).
- `dv-not-in-puffin`: a DV stored as a bare `deletion-vector-v1` blob with no Puffin
  container, as DuckDB's Iceberg extension wrote them before duckdb-iceberg#1095.
- `dv-manifest-fields`: a DV entry without `referenced_data_file`, `content_offset` or
  `content_size_in_bytes`.
- `dv-blob-offset`: no blob of the Puffin footer starts at the manifest's `content_offset`;
  `dv-blob-length`: the footer's blob length is not `content_size_in_bytes`;
  `dv-blob-type`: the blob is not an uncompressed `deletion-vector-v1`;
  `dv-referenced-file`: its `referenced-data-file` property is not the manifest's.
- `dv-range` (the blob lies outside the file), `dv-length` (its length prefix),
  `dv-checksum` (CRC-32), `dv-magic` (not `D1 D3 39 64`), `dv-bitmap` (the Roaring bitmap
  does not decode): the blob's framing, read where the manifest points.
- `dv-cardinality`: the bitmap's cardinality is not the blob's `cardinality` property or the
  manifest's `record_count`; `dv-row-index`: a position at or beyond the data file's
  `record_count`.
- `dv-duplicate`: more than one DV for a data file (the spec allows at most one per
  snapshot); `dv-dangling`: a DV whose `referenced_data_file` is not live (the spec requires
  removing a DV with its data file).
- `position-delete-unsorted`, `position-delete-referenced-file` (rows of another file than
  the entry's `referenced_data_file`), `position-delete-row-index` (a position at or beyond
  the live data file's `record_count`). Rows naming no live data file are not a problem
  (see `verify_deletes`; `inspect` counts dangling deletes).
- `equality-ids-missing`: an equality delete file without `equality_ids`;
  `equality-field-unknown`: an equality id in neither the snapshot's schema nor an older
  one (a column dropped since is valid: the spec says its deletes still apply);
  `equality-delete-columns`: the file has no column for one of its equality ids.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from dvtool.iceberg.delete_index import DataFileEntry, DeleteContent, DeleteFileEntry
from dvtool.iceberg.snapshot_files import data_entry, delete_entry, manifest_entries
from dvtool.iceberg.verify_deletes import (
    PARQUET,
    check_equality_delete_file,
    check_position_delete_file,
)
from dvtool.iceberg.verify_dvs import check_puffin_file
from dvtool.iceberg.verify_files import (
    READ_ERRORS,
    FileRef,
    IcebergProblem,
    describe,
    parquet_file,
    stat,
)
from dvtool.io_pool import map_io

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot

__all__ = [
    "PROBLEM_KINDS",
    "IcebergProblem",
    "IcebergVerifyReport",
    "verify_snapshot",
    "verify_total",
]

PROBLEM_KINDS = (
    "manifest-list-unreadable",
    "manifest-unreadable",
    "file-duplicate",
    "data-file-missing",
    "data-file-unreadable",
    "data-file-size",
    "data-file-record-count",
    "delete-file-missing",
    "delete-file-unreadable",
    "delete-file-size",
    "delete-file-record-count",
    "puffin-unreadable",
    "dv-not-in-puffin",
    "dv-manifest-fields",
    "dv-blob-offset",
    "dv-blob-length",
    "dv-blob-type",
    "dv-referenced-file",
    "dv-range",
    "dv-length",
    "dv-checksum",
    "dv-magic",
    "dv-bitmap",
    "dv-cardinality",
    "dv-row-index",
    "dv-duplicate",
    "dv-dangling",
    "position-delete-unsorted",
    "position-delete-referenced-file",
    "position-delete-row-index",
    "equality-ids-missing",
    "equality-field-unknown",
    "equality-delete-columns",
)
"""Every kind an `IcebergProblem` may have, as the module docstring describes them."""

Progress = Callable[[int], None]
Task = tuple[int, Callable[[], list[IcebergProblem]]]
"""IO-bound work: the manifest entries it checks, and the check."""


@dataclass(frozen=True)
class IcebergVerifyReport:
    """What `--verify` read and the problems it found: `files_checked` live data files,
    `delete_files_checked` position and equality delete files, `dvs_checked` DVs."""

    files_checked: int
    delete_files_checked: int
    dvs_checked: int
    problems: list[IcebergProblem]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "files_checked": self.files_checked,
            "delete_files_checked": self.delete_files_checked,
            "dvs_checked": self.dvs_checked,
            "problems": [p.to_json() for p in self.problems],
        }


@dataclass
class _Listing:
    """The live entries of a snapshot with their file formats, and the manifests that
    could not be read."""

    data: list[tuple[DataFileEntry, str]] = field(default_factory=list)
    deletes: list[tuple[DeleteFileEntry, str]] = field(default_factory=list)
    problems: list[IcebergProblem] = field(default_factory=list)

    def of(self, content: DeleteContent) -> list[tuple[DeleteFileEntry, str]]:
        return [(e, f) for e, f in self.deletes if e.content is content]


def verify_total(snapshot: Snapshot | None) -> int | None:
    """How many files `verify_snapshot` will advance `progress` by, from the snapshot's
    summary (`total-data-files` + `total-delete-files`); None when the summary lacks them."""
    if snapshot is None:
        return 0
    summary = snapshot.summary
    data = summary.get("total-data-files") if summary else None
    deletes = summary.get("total-delete-files") if summary else None
    if data is None or deletes is None or not f"{data}{deletes}".isdigit():
        return None
    return int(data) + int(deletes)


def verify_snapshot(
    metadata: TableMetadata,
    snapshot: Snapshot | None,
    io: FileIO,
    progress: Progress | None = None,
) -> IcebergVerifyReport:
    """Check every file `snapshot` names (None: a table without snapshots, nothing to
    check); `progress(n)` is called as n more data or delete files (DVs one each) are
    checked."""
    if snapshot is None:
        return IcebergVerifyReport(0, 0, 0, [])
    listing = _list(metadata, snapshot, io)
    problems = listing.problems + _duplicates(listing) + _dv_scope(listing)
    problems += _equality_ids(metadata, snapshot, listing)
    tasks = _tasks(io, listing)

    def run(task: Task) -> list[IcebergProblem]:
        found = task[1]()
        if progress:
            progress(task[0])
        return found

    problems += [p for found in map_io(run, tasks) for p in found]
    dvs = len(listing.of(DeleteContent.DELETION_VECTOR))
    return IcebergVerifyReport(len(listing.data), len(listing.deletes) - dvs, dvs, problems)


def _list(metadata: TableMetadata, snapshot: Snapshot, io: FileIO) -> _Listing:
    listing = _Listing()
    # The v3 entry schema reads v2 manifests too (its new fields are optional), and v2
    # manifests may hold `referenced_data_file` (field 143, optional since v2), which
    # pyiceberg's v2 schema drops.
    read_version = 3 if metadata.format_version >= 2 else metadata.format_version
    try:
        manifests = snapshot.manifests(io)
    except READ_ERRORS as e:
        message = f"the manifest list {snapshot.manifest_list} cannot be read: {describe(e)}"
        listing.problems.append(IcebergProblem("manifest-list-unreadable", message))
        return listing

    def read(manifest: Any) -> _Listing:
        found = _Listing()
        try:
            for entry in manifest_entries(manifest, io, read_version):
                file_format = str(entry.data_file.file_format.name).upper()
                if int(entry.data_file.content) == 0:
                    found.data.append((data_entry(entry), file_format))
                else:
                    found.deletes.append((delete_entry(entry), file_format))
        except READ_ERRORS as e:
            message = f"the manifest {manifest.manifest_path} cannot be read: {describe(e)}"
            return _Listing(problems=[IcebergProblem("manifest-unreadable", message)])
        return found

    for found in map_io(read, manifests):
        listing.data += found.data
        listing.deletes += found.deletes
        listing.problems += found.problems
    return listing


def _duplicates(listing: _Listing) -> list[IcebergProblem]:
    """Paths listed live more than once (DVs by path and offset: a Puffin file holds many)."""
    dv = DeleteContent.DELETION_VECTOR
    data = Counter(e.path for e, _ in listing.data)
    files = Counter(e.path for e, _ in listing.deletes if e.content is not dv)
    dvs = Counter((e.path, e.content_offset) for e, _ in listing.of(dv))
    problems = []
    for path, n in data.items():
        if n > 1:
            message = f"data file {path} is listed live {n} times in the snapshot's manifests"
            problems.append(IcebergProblem("file-duplicate", message, path, None))
    for path, n in files.items():
        if n > 1:
            message = f"delete file {path} is listed live {n} times in the snapshot's manifests"
            problems.append(IcebergProblem("file-duplicate", message, None, path))
    for (path, offset), n in dvs.items():
        if n > 1:
            message = f"the deletion vector at offset {offset} of {path} is listed live {n} times"
            problems.append(IcebergProblem("file-duplicate", message, None, path))
    return problems


def _dv_scope(listing: _Listing) -> list[IcebergProblem]:
    """At most one DV per data file, and only for live data files."""
    live = {e.path for e, _ in listing.data}
    by_file: dict[str, list[DeleteFileEntry]] = defaultdict(list)
    problems = []
    for dv, _ in listing.of(DeleteContent.DELETION_VECTOR):
        if dv.referenced_data_file is None:
            continue  # dv-manifest-fields, from the Puffin check
        by_file[dv.referenced_data_file].append(dv)
        if dv.referenced_data_file not in live:
            message = (
                f"the deletion vector at offset {dv.content_offset} of {dv.path} references "
                f"{dv.referenced_data_file}, which is not a live data file of the snapshot "
                "(the spec requires removing a DV with its data file)"
            )
            problems.append(
                IcebergProblem("dv-dangling", message, dv.referenced_data_file, dv.path)
            )
    for data_file, dvs in by_file.items():
        if len(dvs) > 1:
            where = ", ".join(
                f"{d.path} at offset {d.content_offset} (sequence number {d.data_sequence_number})"
                for d in dvs
            )
            message = (
                f"data file {data_file} has {len(dvs)} deletion vectors, the spec allows one "
                f"per snapshot: {where}"
            )
            newest = max(dvs, key=lambda d: d.data_sequence_number)
            problems.append(IcebergProblem("dv-duplicate", message, data_file, newest.path))
    return problems


def _equality_ids(
    metadata: TableMetadata, snapshot: Snapshot, listing: _Listing
) -> list[IcebergProblem]:
    """Each equality delete file's ids name fields of the snapshot's schema or an older
    one (the spec applies deletes on a column dropped since)."""
    current = snapshot.schema_id if snapshot.schema_id is not None else metadata.current_schema_id
    known = {
        f.field_id
        for schema in metadata.schemas
        if schema.schema_id <= current
        for f in _fields(schema)
    }
    problems = []
    for entry, _ in listing.of(DeleteContent.EQUALITY):
        if not entry.equality_ids:
            message = f"equality delete file {entry.path} has no equality_ids in its manifest entry"
            problems.append(IcebergProblem("equality-ids-missing", message, None, entry.path))
        unknown = [i for i in entry.equality_ids if i not in known]
        if unknown:
            message = (
                f"equality delete file {entry.path} has equality_ids {list(entry.equality_ids)}: "
                f"field id {', '.join(map(str, unknown))} is in neither the snapshot's schema "
                f"(id {current}) nor an older one"
            )
            problems.append(IcebergProblem("equality-field-unknown", message, None, entry.path))
    return problems


def _fields(schema: Any) -> list[Any]:
    from pyiceberg.schema import index_by_id

    return list(index_by_id(schema).values())


def _tasks(io: FileIO, listing: _Listing) -> list[Task]:
    """One unit of IO-bound work per data file, delete file and Puffin file, with the
    number of manifest entries it checks."""
    records = {e.path: e.record_count for e, _ in listing.data}
    tasks: list[Task] = [(1, partial(check_data_file, io, e, f)) for e, f in listing.data]
    tasks += [
        (1, partial(check_position_delete_file, io, e, f, records))
        for e, f in listing.of(DeleteContent.POSITION)
    ]
    tasks += [
        (1, partial(check_equality_delete_file, io, e, f))
        for e, f in listing.of(DeleteContent.EQUALITY)
    ]
    puffins: dict[str, list[DeleteFileEntry]] = defaultdict(list)
    for dv, _ in listing.of(DeleteContent.DELETION_VECTOR):
        puffins[dv.path].append(dv)
    tasks += [
        (len(dvs), partial(check_puffin_file, io, path, dvs, records))
        for path, dvs in puffins.items()
    ]
    return tasks


def check_data_file(io: FileIO, entry: DataFileEntry, file_format: str) -> list[IcebergProblem]:
    """A data file exists with its manifest size, and (Parquet) its footer reads and holds
    `record_count` rows."""
    ref = FileRef("data-file", entry.path, entry.file_size_in_bytes, entry.path, None)
    input_file, problems = stat(io, ref)
    if input_file is None or file_format != PARQUET:
        return problems
    try:
        with parquet_file(input_file) as parquet:
            rows = parquet.metadata.num_rows
    except READ_ERRORS as e:
        return [*problems, ref.problem("unreadable", f"{ref.what}: {describe(e)}")]
    if rows != entry.record_count:
        message = (
            f"{ref.what} holds {rows} rows (its Parquet footer); its manifest entry's "
            f"record_count says {entry.record_count}"
        )
        problems.append(ref.problem("record-count", message))
    return problems
