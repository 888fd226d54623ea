"""Exact deleted rows per data file (dvtool/iceberg/deleted_rows.py) and equality deletes
applied (dvtool/iceberg/equality_deletes.py), on Parquet files written here with the field
ids Iceberg's writers give them, read through pyiceberg's own FileIO.

The cases the manifests' counts get wrong: a position delete file naming several data files
(one of them no longer live), the same position in two delete files, positions at or past
the end of the file; equality deletes on two columns with nulls (a null matches a null), a
column the older data file lacks (read as null), a renamed column (matched by field id) and
a promoted type. The oracle is the rows themselves, filtered in Python.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyroaring import BitMap64

from dvtool.iceberg.delete_index import (
    AppliedDeletes,
    DataFileEntry,
    DeleteContent,
    DeleteFileEntry,
)
from dvtool.iceberg.deleted_rows import exact_position_deletes
from dvtool.iceberg.equality_deletes import EqualityApplier

IO = PyArrowFileIO()


def _field(name: str, type_: pa.DataType, field_id: int) -> pa.Field:
    return pa.field(name, type_, metadata={b"PARQUET:field_id": str(field_id).encode()})


def _write(path: Path, columns: dict[str, tuple[pa.DataType, int, list[Any]]]) -> str:
    schema = pa.schema([_field(n, t, i) for n, (t, i, _) in columns.items()])
    pq.write_table(pa.table({n: v for n, (_, _, v) in columns.items()}, schema=schema), path)
    return str(path)


def _data(path: str, rows: int) -> DataFileEntry:
    return DataFileEntry(path, 0, (), 1, rows)


def _delete(
    path: str, content: DeleteContent, count: int, ids: tuple[int, ...] = ()
) -> DeleteFileEntry:
    return DeleteFileEntry(path, content, 0, (), 2, count, equality_ids=ids)


def test_position_deletes_count_distinct_positions_of_each_file(tmp_path: Path) -> None:
    a, b, gone = (str(tmp_path / f"{n}.parquet") for n in "abg")
    first = [(a, 0), (a, 3), (b, 1), (gone, 0), (a, 9)]  # 9 is past a's 5 rows
    second = [(a, 3), (a, 4), (b, 1), (b, 2)]  # a:3 and b:1 twice
    files = []
    for n, rows in enumerate((first, second)):
        files.append(
            _write(
                tmp_path / f"pos-{n}.parquet",
                {
                    "file_path": (pa.string(), 2147483546, [p for p, _ in rows]),
                    "pos": (pa.int64(), 2147483545, [i for _, i in rows]),
                },
            )
        )
    deletes = tuple(_delete(f, DeleteContent.POSITION, 5) for f in files)
    applied = [
        (_data(a, 5), AppliedDeletes(position=deletes)),
        (_data(b, 3), AppliedDeletes(position=deletes)),
    ]
    counts = exact_position_deletes(applied, IO)
    every = first + second
    expected = {
        path: len({i for p, i in every if p == path and i < rows})
        for path, rows in ((a, 5), (b, 3))
    }
    assert counts == expected
    assert sum(d.record_count for d in deletes) > sum(counts.values())  # what counts would say


def test_equality_deletes_by_field_id_with_nulls_and_missing_columns(tmp_path: Path) -> None:
    old = _write(  # written before column 3 was added: it reads as null
        tmp_path / "old.parquet",
        {"k": (pa.int32(), 1, [1, 2, 3, None, 5])},
    )
    new = _write(  # column 1 renamed to key since, and promoted to long
        tmp_path / "new.parquet",
        {
            "key": (pa.int64(), 1, [1, 2, None, 4, 5, 6]),
            "tag": (pa.string(), 3, ["x", None, None, "y", "z", None]),
        },
    )
    keys = [(1, "x"), (2, None), (None, None), (3, None), (6, "q")]
    eq = _write(
        tmp_path / "eq.parquet",
        {
            "k": (pa.int64(), 1, [k for k, _ in keys]),
            "tag": (pa.string(), 3, [t for _, t in keys]),
        },
    )
    one = _write(tmp_path / "eq1.parquet", {"key": (pa.int64(), 1, [5, None])})
    deletes = AppliedDeletes(
        equality=(
            _delete(eq, DeleteContent.EQUALITY, len(keys), (1, 3)),
            _delete(one, DeleteContent.EQUALITY, 2, (1,)),
        )
    )
    applier = EqualityApplier(IO)
    for path, rows in (
        (old, [(1, None), (2, None), (3, None), (None, None), (5, None)]),
        (
            new,
            [(1, "x"), (2, None), (None, None), (4, "y"), (5, "z"), (6, None)],
        ),
    ):
        already = BitMap64([0]) if path == new else BitMap64()
        got = applier.deleted(_data(path, len(rows)), deletes, already)
        matched = {n for n, row in enumerate(rows) if row in keys or row[0] in (5, None)}
        assert set(got) == matched | set(already), path
