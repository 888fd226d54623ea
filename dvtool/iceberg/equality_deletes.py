"""Apply equality deletes to data files: which rows of a data file they delete.

An equality delete file deletes the rows of the data files it applies to (`delete_index`:
strictly lower data sequence number, same partition or a global delete) whose values in its
`equality_ids` columns equal one of its rows; a null equals a null (spec.md "Equality
Delete Files"). Columns are found by field id in both files (renamed columns match), a
column missing from an older data file reads as null, and the delete values are cast to the
data file's column type (promoted types: int to long, float to double).

Delete files of one set of `equality_ids` are read once into a key set and kept for every
data file they apply to; a data file's key columns are read a record batch at a time. Only
top-level columns can be equality fields here (Iceberg's writers use primitive top-level
columns); a nested one is reported.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyroaring import BitMap64

from dvtool.errors import UsageError
from dvtool.iceberg.data_file_io import read_errors
from dvtool.iceberg.delete_index import AppliedDeletes, DataFileEntry, DeleteFileEntry
from dvtool.iceberg.deleted_rows import open_parquet

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.io import FileIO

_FIELD_ID = b"PARQUET:field_id"
_BATCH_ROWS = 64 * 1024


def _columns_by_field_id(schema: pa.Schema) -> dict[int, str]:
    out: dict[int, str] = {}
    for f in schema:
        raw = (f.metadata or {}).get(_FIELD_ID)
        if raw is not None:
            out[int(raw)] = f.name
    return out


def _key_batches(io: FileIO, location: str, field_ids: Sequence[int]) -> Iterator[list[pa.Array]]:
    """The columns `field_ids` of a Parquet file, a record batch at a time (all nulls for a
    column the file lacks)."""
    import pyarrow as pa

    parquet = open_parquet(io, location)
    by_id = _columns_by_field_id(parquet.schema_arrow)
    present = [by_id[i] for i in field_ids if i in by_id]
    with read_errors(location):
        for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, columns=present or None):
            arrays = []
            for field_id in field_ids:
                if field_id in by_id:
                    arrays.append(batch.column(batch.schema.get_field_index(by_id[field_id])))
                else:
                    arrays.append(pa.nulls(batch.num_rows))
            yield arrays


@dataclass
class EqualityKeys:
    """The rows of equality delete files of one set of field ids: an array for one field
    (matched with `pyarrow.compute.is_in`), tuples for several."""

    values: list[pa.Array] = field(default_factory=list)
    tuples: set[tuple[Any, ...]] = field(default_factory=set)


@dataclass
class EqualityApplier:
    """Applies equality deletes, keeping each group of delete files' keys once read."""

    io: FileIO
    _keys: dict[tuple[tuple[str, ...], tuple[int, ...]], EqualityKeys] = field(default_factory=dict)

    def deleted(self, data: DataFileEntry, deletes: AppliedDeletes, rows: BitMap64) -> BitMap64:
        """`rows` (the positions already deleted) with the rows the equality deletes match."""
        groups: dict[tuple[int, ...], list[DeleteFileEntry]] = {}
        for delete in deletes.equality:
            _check_ids(delete)
            groups.setdefault(delete.equality_ids, []).append(delete)
        for field_ids, files in groups.items():
            self._match(data, field_ids, files, rows)
        return rows

    def _match(
        self,
        data: DataFileEntry,
        field_ids: tuple[int, ...],
        files: list[DeleteFileEntry],
        rows: BitMap64,
    ) -> None:
        import numpy as np

        keys = self._keys_of(tuple(sorted(f.path for f in files)), field_ids)
        start = 0
        for arrays in _key_batches(self.io, data.path, field_ids):
            if len(field_ids) == 1:
                hit = _is_in(arrays[0], keys.values)
                found = np.flatnonzero(hit.to_numpy(zero_copy_only=False))
            else:
                tuples = zip(*(a.to_pylist() for a in arrays), strict=True)
                hits = [n for n, key in enumerate(tuples) if key in keys.tuples]
                found = np.array(hits, np.int64)
            rows.update((found + start).tolist())
            start += len(arrays[0])

    def _keys_of(self, paths: tuple[str, ...], field_ids: tuple[int, ...]) -> EqualityKeys:
        cached = self._keys.get((paths, field_ids))
        if cached is not None:
            return cached
        keys = EqualityKeys()
        for path in paths:
            for arrays in _key_batches(self.io, path, field_ids):
                if len(field_ids) == 1:
                    keys.values.append(arrays[0])
                else:
                    keys.tuples.update(zip(*(a.to_pylist() for a in arrays), strict=True))
        self._keys[(paths, field_ids)] = keys
        return keys


def _is_in(column: pa.Array, values: list[pa.Array]) -> pa.Array:
    """Which values of `column` are among `values` (a null matches a null), the delete
    values cast to the column's type (a column the data file lacks is all nulls)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_null(column.type):
        any_null = any(v.null_count for v in values)
        return pa.array([any_null] * len(column), pa.bool_())
    value_set = pa.concat_arrays([v.cast(column.type) for v in values]) if values else None
    if value_set is None:
        return pa.array([False] * len(column), pa.bool_())
    return pc.is_in(column, value_set=value_set, skip_nulls=False)


def _check_ids(delete: DeleteFileEntry) -> None:
    if not delete.equality_ids:
        raise UsageError(
            f"equality delete file {delete.path} names no equality field ids",
            hint="`dvtool inspect TABLE --verify` reports the table's damage.",
        )
