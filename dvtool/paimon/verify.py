"""`inspect --verify` for Paimon tables: read every file a snapshot names, report what is wrong.

`verify_snapshot(table, snapshot, progress)` reads the snapshot's manifests leniently
(`read_snapshot_files(strict=False)`), checks that their entries add up, then reads every
live file in parallel (`map_io`): one stat and the row count of each data file (a Parquet or
ORC footer, an Avro file's block headers: `data_file_rows`);
each deletion file whole (they are small: one per bucket, rolled at
`deletion-vector.index-file.target-size`, 2 MiB by default), decoding every DV it holds.
Every problem is a `PaimonProblem(kind, message, data_file, deletion_file)`; no error
reading a file escapes as a traceback.

Problem kinds:

- `manifest-list-unreadable`, `manifest-unreadable`, `index-manifest-unreadable`: a
  metadata file that cannot be read (the files it lists are not checked).
- `manifest-delete-unmatched`: a DELETE entry of a file no earlier entry added;
  `file-duplicate`: an ADD of a file already live (Paimon's commit refuses both);
  `index-delete-unmatched`: the same for the index manifest.
- `data-file-missing`, `data-file-unreadable`, `data-file-size` (bytes differ from the
  manifest's `_FILE_SIZE`), `data-file-row-count` (the rows a Parquet or ORC footer or
  the Avro blocks count differ from `_ROW_COUNT`; other file formats are checked for size
  only).
- `deletion-file-missing`, `deletion-file-unreadable`, `deletion-file-size` (against the
  index manifest's `_FILE_SIZE`), `deletion-file-version` (the first byte is not 1),
  `deletion-file-row-count` (`_ROW_COUNT` is not the number of DVs listed).
- per DV, read where the index manifest points (`dvtool.deletion_vectors.paimon`):
  `dv-range` (outside the file), `dv-length` (the size prefix disagrees with the index
  manifest's length, which counts payload bytes for 32-bit DVs and record bytes for 64-bit
  ones), `dv-magic` (neither 1581511376 big-endian nor 1681511377 little-endian),
  `dv-checksum` (CRC-32), `dv-bitmap` (the Roaring bitmap does not decode, or a 32-bit one
  holds a position above 2**31 - 1), `dv-cardinality` (the bitmap's cardinality is not the
  index manifest's `_CARDINALITY`), `dv-row-index` (a position at or beyond the data file's
  `_ROW_COUNT`);
- `dv-dangling`: a DV of a data file that is not live in its bucket; `dv-duplicate`: a
  second DV of one data file.
- `hash-index-missing`, `hash-index-unreadable`, `hash-index-size` (bytes differ from the
  index manifest's `_FILE_SIZE`, or are not 4 per `_ROW_COUNT`): a dynamic-bucket table's
  hash index (`HASH`), looked up but not read. Readers do not need it; Paimon's next write
  to that partition does (its bucket assigner loads the keys' hashes), and fails without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dvtool.deletion_vectors.paimon import check_index_file_version, decode_paimon_dv
from dvtool.errors import (
    DeletionVectorError,
    DVChecksumError,
    DVEncodingError,
    DVMagicError,
    DVRangeError,
    DVSizeMismatchError,
    DvtoolError,
    DVVersionError,
    FileMissingError,
    exception_text,
)
from dvtool.io_pool import map_io
from dvtool.paimon.data_file_rows import data_file_rows, file_format_of
from dvtool.paimon.protocol.manifests import HASH_INDEX
from dvtool.paimon.snapshot_files import DECODE_ERRORS, SnapshotFiles, read_snapshot_files

if TYPE_CHECKING:
    from dvtool.paimon.protocol.snapshots import Snapshot
    from dvtool.paimon.protocol.table_files import LiveDataFile, LiveIndexFile
    from dvtool.paimon.tables import PaimonTable

Progress = Callable[[int], None]

PROBLEM_KINDS = (
    "manifest-list-unreadable",
    "manifest-unreadable",
    "index-manifest-unreadable",
    "manifest-delete-unmatched",
    "file-duplicate",
    "index-delete-unmatched",
    "data-file-missing",
    "data-file-unreadable",
    "data-file-size",
    "data-file-row-count",
    "deletion-file-missing",
    "deletion-file-unreadable",
    "deletion-file-size",
    "deletion-file-version",
    "deletion-file-row-count",
    "dv-range",
    "dv-length",
    "dv-magic",
    "dv-checksum",
    "dv-bitmap",
    "dv-cardinality",
    "dv-row-index",
    "dv-dangling",
    "dv-duplicate",
    "hash-index-missing",
    "hash-index-unreadable",
    "hash-index-size",
)
"""Every kind a `PaimonProblem` may have, as the module docstring describes them."""

READ_ERRORS: tuple[type[BaseException], ...] = (
    *DECODE_ERRORS,
    OSError,
    pa.ArrowException,
    DvtoolError,
)
"""What reading a missing or damaged file raises: each becomes a problem, never a traceback."""
COUNT_ERRORS: tuple[type[BaseException], ...] = (*READ_ERRORS, ValueError)
"""What counting a data file's rows raises besides (an Avro file's framing that does not hold)."""

_DV_ERROR_KINDS: tuple[tuple[type[DeletionVectorError], str], ...] = (
    (DVRangeError, "dv-range"),
    (DVSizeMismatchError, "dv-length"),
    (DVMagicError, "dv-magic"),
    (DVChecksumError, "dv-checksum"),
    (DVEncodingError, "dv-bitmap"),
)


@dataclass(frozen=True)
class PaimonProblem:
    """One thing `--verify` found wrong: its kind, what and where, and the files it
    concerns as the manifests name them (relative to the table unless external)."""

    kind: str
    message: str
    data_file: str | None = None
    deletion_file: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PaimonVerifyReport:
    """What `--verify` read and the problems it found."""

    files_checked: int
    deletion_files_checked: int
    dvs_checked: int
    problems: list[PaimonProblem]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "files_checked": self.files_checked,
            "deletion_files_checked": self.deletion_files_checked,
            "dvs_checked": self.dvs_checked,
            "problems": [p.to_json() for p in self.problems],
        }


def verify_snapshot(
    table: PaimonTable, snapshot: Snapshot | None, progress: Progress | None = None
) -> PaimonVerifyReport:
    """Check every file `snapshot` names (None: a table without commits, nothing to check);
    `progress(n)` is called as n more data or deletion files are checked."""
    if snapshot is None:
        return PaimonVerifyReport(0, 0, 0, [])
    read = read_snapshot_files(table, snapshot, strict=False)
    problems = _metadata_problems(read)
    files = read.files
    data_problems = map_io(lambda f: _advanced(progress, _check_data_file(table, f)), files.data)
    deletion_files = files.deletion_files()
    rows = {(f.partition.path, f.bucket, f.meta.file_name): f for f in files.data}
    dv_results = map_io(
        lambda f: _advanced(progress, _check_deletion_file(table, f, rows)), deletion_files
    )
    for found in data_problems:
        problems += found
    for found in dv_results:
        problems += found
    hashes = [f for f in files.index_files if f.meta.index_type == HASH_INDEX]
    for found in map_io(lambda f: _check_hash_index(table, f), hashes):
        problems += found
    dvs = sum(len(f.meta.dv_ranges) for f in deletion_files)
    return PaimonVerifyReport(len(files.data), len(deletion_files), dvs, problems)


def _advanced(progress: Progress | None, found: list[PaimonProblem]) -> list[PaimonProblem]:
    if progress:
        progress(1)
    return found


def _metadata_problems(read: SnapshotFiles) -> list[PaimonProblem]:
    """Unreadable metadata files, entries that do not add up, DVs of no live file."""
    problems = [
        PaimonProblem(f"{u.kind}-unreadable", f"cannot read {u.location}: {u.reason}")
        for u in read.unreadable
    ]
    problems += [
        PaimonProblem(
            "manifest-delete-unmatched",
            f"a manifest deletes {e.file.file_name} (bucket {e.bucket}, level {e.file.level}), "
            "which no earlier entry added",
            data_file=e.file.file_name,
        )
        for e in read.unmatched_deletes
    ]
    problems += [
        PaimonProblem(
            "file-duplicate",
            f"a manifest adds {e.file.file_name} (bucket {e.bucket}, level {e.file.level}) "
            "again while it is live",
            data_file=e.file.file_name,
        )
        for e in read.duplicate_adds
    ]
    problems += [
        PaimonProblem(
            "index-delete-unmatched",
            f"the index manifest deletes {e.index_file.file_name}, which it never added",
            deletion_file=e.index_file.file_name,
        )
        for e in read.unmatched_index_deletes
    ]
    for kind, pairs, why in (
        ("dv-dangling", read.files.dangling_dvs, "which is not live in that bucket"),
        ("dv-duplicate", read.files.duplicate_dvs, "which already has a DV"),
    ):
        problems += [
            PaimonProblem(
                kind,
                f"{index.path} holds a DV of {dv.data_file} (bucket {index.bucket}), {why}",
                data_file=dv.data_file,
                deletion_file=index.path,
            )
            for index, dv in pairs
        ]
    return problems


def _check_data_file(table: PaimonTable, f: LiveDataFile) -> list[PaimonProblem]:
    """The data file exists with its manifest size, and a Parquet footer its row count."""
    location = table.location_of(f.path)

    def problem(kind: str, message: str) -> PaimonProblem:
        return PaimonProblem(f"data-file-{kind}", message, data_file=f.path)

    try:
        info = table.storage.info(location)
    except READ_ERRORS as e:
        return [problem("unreadable", f"cannot look up data file {f.path}: {_why(e)}")]
    if info is None:
        return [problem("missing", f"data file {f.path} does not exist")]
    found = []
    if info.size != f.meta.file_size:
        found.append(
            problem(
                "size",
                f"data file {f.path} has {info.size} bytes; the manifest says {f.meta.file_size}",
            )
        )
    found += _footer_rows(table, location, f, problem)
    return found


def _footer_rows(
    table: PaimonTable,
    location: str,
    f: LiveDataFile,
    problem: Callable[[str, str], PaimonProblem],
) -> list[PaimonProblem]:
    """The rows the data file's own metadata counts (Parquet, ORC, Avro) against the
    manifest's `_ROW_COUNT`."""
    kind = file_format_of(f.meta.file_name)
    try:
        rows = data_file_rows(table.storage, location, f.meta.file_name)
    except COUNT_ERRORS as e:
        return [problem("unreadable", f"cannot count the rows of {kind} file {f.path}: {_why(e)}")]
    if rows is None or rows == f.meta.row_count:
        return []
    return [
        problem(
            "row-count",
            f"data file {f.path} holds {rows} rows; the manifest says {f.meta.row_count}",
        )
    ]


def _check_deletion_file(
    table: PaimonTable, index: LiveIndexFile, live: dict[tuple[str, int, str], LiveDataFile]
) -> list[PaimonProblem]:
    """Read one deletion file whole and check it and every DV it holds."""
    path = index.path

    def problem(kind: str, message: str, data_file: str | None = None) -> PaimonProblem:
        return PaimonProblem(kind, message, data_file=data_file, deletion_file=path)

    try:
        data = table.storage.read(table.location_of(path))
    except FileMissingError:
        return [problem("deletion-file-missing", f"deletion file {path} does not exist")]
    except READ_ERRORS as e:
        return [problem("deletion-file-unreadable", f"cannot read {path}: {_why(e)}")]
    found = _deletion_file_header(index, data, problem)
    if any(p.kind == "deletion-file-version" for p in found):
        return found
    for dv in index.meta.dv_ranges:
        target = live.get((index.partition.path, index.bucket, dv.data_file))
        found += _check_dv(data, dv, target, problem)
    return found


def _deletion_file_header(
    index: LiveIndexFile, data: bytes, problem: Callable[..., PaimonProblem]
) -> list[PaimonProblem]:
    found = []
    meta = index.meta
    if len(data) != meta.file_size:
        found.append(
            problem(
                "deletion-file-size",
                f"deletion file {index.path} has {len(data)} bytes; "
                f"the index manifest says {meta.file_size}",
            )
        )
    if meta.row_count != len(meta.dv_ranges):
        found.append(
            problem(
                "deletion-file-row-count",
                f"the index manifest gives deletion file {index.path} {meta.row_count} rows "
                f"but lists {len(meta.dv_ranges)} DVs",
            )
        )
    try:
        check_index_file_version(data)
    except (DVVersionError, DVRangeError) as e:
        found.append(problem("deletion-file-version", f"deletion file {index.path}: {e.message}"))
    return found


def _check_dv(
    data: bytes, dv: Any, target: LiveDataFile | None, problem: Callable[..., PaimonProblem]
) -> list[PaimonProblem]:
    """Decode one DV and hold it to the index manifest and its data file."""
    where = f"the DV of {dv.data_file} at offset {dv.offset}"
    try:
        rows = decode_paimon_dv(data, dv.offset, dv.length).rows
    except DeletionVectorError as e:
        kind = next((k for cls, k in _DV_ERROR_KINDS if isinstance(e, cls)), "dv-bitmap")
        return [problem(kind, f"{where}: {e.message}", dv.data_file)]
    found = []
    if dv.cardinality is not None and len(rows) != dv.cardinality:
        found.append(
            problem(
                "dv-cardinality",
                f"{where} deletes {len(rows)} rows; the index manifest says {dv.cardinality}",
                dv.data_file,
            )
        )
    if target is not None and rows and rows.max() >= target.meta.row_count:
        found.append(
            problem(
                "dv-row-index",
                f"{where} deletes row {rows.max()}, but the data file has "
                f"{target.meta.row_count} rows",
                dv.data_file,
            )
        )
    return found


def _check_hash_index(table: PaimonTable, index: LiveIndexFile) -> list[PaimonProblem]:
    """The hash index exists with the index manifest's size, 4 bytes per row (one stat)."""
    path, meta = index.path, index.meta
    try:
        info = table.storage.info(table.location_of(path))
    except READ_ERRORS as e:
        return [PaimonProblem("hash-index-unreadable", f"cannot look up {path}: {_why(e)}")]
    if info is None:
        return [PaimonProblem("hash-index-missing", f"hash index {path} does not exist")]
    if info.size != meta.file_size or meta.file_size != 4 * meta.row_count:
        message = (
            f"hash index {path} has {info.size} bytes; the index manifest says "
            f"{meta.file_size} for {meta.row_count} key hashes of 4 bytes"
        )
        return [PaimonProblem("hash-index-size", message)]
    return []


def _why(error: BaseException) -> str:
    """An exception as the tail of a problem message."""
    if isinstance(error, DvtoolError):
        return error.message
    return f"{type(error).__name__}: {exception_text(error)}"
