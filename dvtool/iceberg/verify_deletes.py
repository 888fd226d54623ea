"""`--verify` for position and equality delete files (Parquet), read in bounded batches.

Position delete files (spec.md "Position Delete Files") hold `file_path` (field id
2147483546) and `pos` (2147483545) rows that "must be sorted by `file_path` then `pos`";
a reader that merges them with a data file's rows relies on it. The check streams the two
columns and reports the first row out of order (paths compare as UTF-8 bytes, which is
Java's `String` order for every path without characters beyond U+FFFF); a file whose
manifest entry names a `referenced_data_file` must hold rows of that file only; a position
at or beyond a live data file's `record_count` deletes a row that does not exist.

Rows naming a data file that is not live in the snapshot are not problems: the spec lets
position delete files outlive the data files they named (Iceberg's
`rewrite_position_delete_files` and `rewrite_data_files`' `remove-dangling-deletes` drop
them later; `inspect` counts them as dangling deletes). A DV is different: the spec
requires removing it with its data file, so a DV of no live file is a verify problem.

Equality delete files must hold a column for each of their `equality_ids` (spec.md
"Equality Delete Files"); the check finds them by Parquet field id and reads them through
to be sure they decode. Other formats (Avro, ORC) get the existence and size checks only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dvtool.iceberg.delete_index import DeleteFileEntry
from dvtool.iceberg.verify_files import (
    READ_ERRORS,
    FileRef,
    IcebergProblem,
    describe,
    parquet_file,
    stat,
)

if TYPE_CHECKING:
    import pyarrow.parquet as pq
    from pyiceberg.io import FileIO

FILE_PATH_FIELD_ID = 2147483546
POS_FIELD_ID = 2147483545
BATCH_ROWS = 65_536
PARQUET = "PARQUET"


def field_ids(schema: pa.Schema) -> dict[int, str]:
    """Parquet field id -> the top-level column that holds it (nested fields included)."""
    found: dict[int, str] = {}

    def walk(field: pa.Field, top: str) -> None:
        raw = (field.metadata or {}).get(b"PARQUET:field_id")
        if raw is not None:
            found[int(raw)] = top
        for child in _children(field.type):
            walk(child, top)

    for field in schema:
        walk(field, field.name)
    return found


def _children(dtype: pa.DataType) -> Iterable[pa.Field]:
    if pa.types.is_struct(dtype):
        return [dtype.field(i) for i in range(dtype.num_fields)]
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return [dtype.value_field]
    if pa.types.is_map(dtype):
        return [dtype.key_field, dtype.item_field]
    return []


def _ref(entry: DeleteFileEntry) -> FileRef:
    return FileRef(
        "delete-file", entry.path, entry.file_size_in_bytes, entry.referenced_data_file, entry.path
    )


def check_position_delete_file(
    io: FileIO, entry: DeleteFileEntry, file_format: str, records: Mapping[str, int]
) -> list[IcebergProblem]:
    """Existence, size, row count, order and positions of one position delete file;
    `records` maps each live data file to its `record_count`."""
    ref = _ref(entry)
    input_file, problems = stat(io, ref)
    if input_file is None or file_format != PARQUET:
        return problems
    try:
        with parquet_file(input_file) as parquet:
            problems += _record_count(parquet, entry)
            problems += _positions(parquet, entry, records)
    except READ_ERRORS as e:
        problems.append(ref.problem("unreadable", f"{ref.what}: {describe(e)}"))
    return problems


def _record_count(parquet: pq.ParquetFile, entry: DeleteFileEntry) -> list[IcebergProblem]:
    rows = parquet.metadata.num_rows
    if rows == entry.record_count:
        return []
    message = (
        f"delete file {entry.path} holds {rows} rows; its manifest entry's record_count "
        f"says {entry.record_count}"
    )
    return [_ref(entry).problem("record-count", message)]


def _columns(parquet: pq.ParquetFile, ids: Iterable[int]) -> dict[int, str]:
    by_id = field_ids(parquet.schema_arrow)
    return {i: by_id[i] for i in ids if i in by_id}


class _PositionScan:
    """What streaming a position delete file found: the first row out of order, rows of
    other files than the referenced one, and the largest position per data file."""

    def __init__(self) -> None:
        self.last: tuple[str, int] | None = None
        self.unsorted: tuple[int, tuple[str, int], tuple[str, int]] | None = None
        self.foreign: str | None = None
        self.max_pos: dict[str, int] = {}
        self.rows = 0

    def add(self, paths: pa.Array, positions: pa.Array, referenced: str | None) -> None:
        if len(paths) == 0:
            return
        if self.unsorted is None:
            self._order(paths, positions)
        if referenced is not None and self.foreign is None:
            others = pc.filter(paths, pc.not_equal(paths, referenced))
            if len(others):
                self.foreign = others[0].as_py()
        grouped = pa.table({"p": paths, "pos": positions}).group_by("p").aggregate([("pos", "max")])
        for path, top in zip(*grouped.to_pydict().values(), strict=True):
            self.max_pos[path] = max(top, self.max_pos.get(path, -1))
        self.last = (paths[-1].as_py(), positions[-1].as_py())
        self.rows += len(paths)

    def _order(self, paths: pa.Array, positions: pa.Array) -> None:
        """Record the first pair of adjacent rows out of (file_path, pos) order."""
        if self.last is not None:
            paths = pa.concat_arrays([pa.array([self.last[0]], paths.type), paths])
            positions = pa.concat_arrays([pa.array([self.last[1]], positions.type), positions])
            offset = self.rows - 1
        else:
            offset = self.rows
        before_p, after_p = paths[:-1], paths[1:]
        before_n, after_n = positions[:-1], positions[1:]
        ordered = pc.or_(
            pc.less(before_p, after_p),
            pc.and_(pc.equal(before_p, after_p), pc.less_equal(before_n, after_n)),
        )
        flags = np.asarray(ordered.fill_null(False))
        if flags.all():
            return
        i = int(np.argmin(flags))
        self.unsorted = (
            offset + i + 1,
            (before_p[i].as_py(), before_n[i].as_py()),
            (after_p[i].as_py(), after_n[i].as_py()),
        )


def _positions(
    parquet: pq.ParquetFile, entry: DeleteFileEntry, records: Mapping[str, int]
) -> list[IcebergProblem]:
    columns = _columns(parquet, (FILE_PATH_FIELD_ID, POS_FIELD_ID))
    names = [columns.get(FILE_PATH_FIELD_ID, "file_path"), columns.get(POS_FIELD_ID, "pos")]
    if not set(names) <= set(parquet.schema_arrow.names):
        message = (
            f"position delete file {entry.path} has no file_path and pos columns "
            f"(field ids {FILE_PATH_FIELD_ID}, {POS_FIELD_ID}); its columns: "
            f"{parquet.schema_arrow.names}"
        )
        return [_ref(entry).problem("unreadable", message)]
    scan = _PositionScan()
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=names):
        paths = batch.column(0).cast(pa.string())
        scan.add(paths, batch.column(1).cast(pa.int64()), entry.referenced_data_file)
    return _scan_problems(scan, entry, records)


def _scan_problems(
    scan: _PositionScan, entry: DeleteFileEntry, records: Mapping[str, int]
) -> list[IcebergProblem]:
    problems = []
    if scan.unsorted is not None:
        row, before, after = scan.unsorted
        message = (
            f"position delete file {entry.path} is not sorted by (file_path, pos) as the spec "
            f"requires: row {row} (from 0) {after} follows {before}"
        )
        problems.append(IcebergProblem("position-delete-unsorted", message, after[0], entry.path))
    if scan.foreign is not None:
        message = (
            f"position delete file {entry.path} names {scan.foreign}, but its manifest entry's "
            f"referenced_data_file is {entry.referenced_data_file}"
        )
        problems.append(
            IcebergProblem("position-delete-referenced-file", message, scan.foreign, entry.path)
        )
    for path, top in sorted(scan.max_pos.items()):
        count = records.get(path)
        if count is not None and top >= count:
            message = (
                f"position delete file {entry.path} deletes position {top} of {path}, beyond "
                f"its {count} rows (the data file's manifest record_count)"
            )
            problems.append(IcebergProblem("position-delete-row-index", message, path, entry.path))
    return problems


def check_equality_delete_file(
    io: FileIO, entry: DeleteFileEntry, file_format: str
) -> list[IcebergProblem]:
    """Existence, size, row count and the equality columns of one equality delete file."""
    ref = _ref(entry)
    input_file, problems = stat(io, ref)
    if input_file is None or file_format != PARQUET:
        return problems
    try:
        with parquet_file(input_file) as parquet:
            problems += _record_count(parquet, entry)
            problems += _equality_columns(parquet, entry)
    except READ_ERRORS as e:
        problems.append(ref.problem("unreadable", f"{ref.what}: {describe(e)}"))
    return problems


def _equality_columns(parquet: pq.ParquetFile, entry: DeleteFileEntry) -> list[IcebergProblem]:
    columns = _columns(parquet, entry.equality_ids)
    missing = [i for i in entry.equality_ids if i not in columns]
    if missing:
        message = (
            f"equality delete file {entry.path} has no column with field id "
            f"{', '.join(map(str, missing))} of its equality_ids {list(entry.equality_ids)}"
        )
        return [IcebergProblem("equality-delete-columns", message, None, entry.path)]
    for _ in parquet.iter_batches(batch_size=BATCH_ROWS, columns=sorted(set(columns.values()))):
        pass
    return []
