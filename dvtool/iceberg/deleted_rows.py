"""How many rows of each live data file its deletes remove, exactly.

The manifests' counts alone do not say it: a position delete file's `record_count` counts
its rows for every data file it names, including files no longer live, and positions two
delete files both hold count once. So:

- a data file with a deletion vector: the DV's `record_count`, its cardinality (spec.md:
  for a DV the number of deleted rows; `--verify` checks it against the bitmap);
- a data file with position deletes: the distinct positions below its `record_count` the
  applying delete files hold for it, read from their `(file_path, pos)` columns, one record
  batch at a time, each delete file once whatever number of data files it covers;
- equality deletes (`equality_deletes`) are applied only on request: they need the data
  files' key columns.

Positions are kept as Roaring bitmaps per data file with deletes (compact: what a DV of the
same rows would hold), never as a table of all deletes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyroaring import BitMap64

from dvtool.errors import DataFileError
from dvtool.iceberg.data_file_io import read_errors
from dvtool.iceberg.delete_index import AppliedDeletes, DataFileEntry, DeleteFileEntry

if TYPE_CHECKING:
    from pyiceberg.io import FileIO

FILE_PATH = "file_path"
POS = "pos"
_BATCH_ROWS = 64 * 1024

Applied = Sequence[tuple[DataFileEntry, AppliedDeletes]]


def open_parquet(io: FileIO, location: str) -> Any:
    """A `pyarrow.parquet.ParquetFile` of `location`, read through `io`."""
    import pyarrow.parquet as pq

    with read_errors(location):
        return pq.ParquetFile(io.new_input(location).open(seekable=True))


def position_bitmaps(applied: Applied, io: FileIO) -> dict[str, BitMap64]:
    """The positions the position delete files delete, per data file they apply to (the
    delete files read on the IO threads, each once)."""
    wanted: dict[str, set[str]] = {}
    for data, deletes in applied:
        for delete in deletes.position:
            wanted.setdefault(delete.path, set()).add(data.path)
    from dvtool.io_pool import map_io

    def read(item: tuple[str, set[str]]) -> dict[str, BitMap64]:
        found: dict[str, BitMap64] = {}
        for data_path, positions in read_positions(io, *item):
            found.setdefault(data_path, BitMap64()).update(positions)
        return found

    bitmaps: dict[str, BitMap64] = {}
    for found in map_io(read, list(wanted.items())):
        for data_path, positions in found.items():
            bitmaps.setdefault(data_path, BitMap64()).update(positions)
    return bitmaps


def read_positions(
    io: FileIO, delete_path: str, data_paths: set[str]
) -> Iterator[tuple[str, list[int]]]:
    """`(data file, positions)` of the rows of a position delete file that name one of
    `data_paths`, a record batch at a time."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parquet = open_parquet(io, delete_path)
    names = pa.array(sorted(data_paths), pa.string())
    with read_errors(delete_path):
        for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, columns=[FILE_PATH, POS]):
            paths = batch.column(0).cast(pa.string())
            mine = pc.is_in(paths, value_set=names)
            if not pc.any(mine).as_py():
                continue
            kept = pa.Table.from_batches([batch]).filter(mine)
            encoded = kept.column(0).cast(pa.string()).combine_chunks().dictionary_encode()
            positions = kept.column(1).combine_chunks()
            for index, name in enumerate(encoded.dictionary.to_pylist()):
                chosen = pc.equal(encoded.indices, pa.scalar(index, encoded.indices.type))
                yield name, positions.filter(chosen).to_pylist()


def count_below(bitmap: BitMap64, record_count: int) -> int:
    """The positions of `bitmap` that name a row of a file of `record_count` rows."""
    if record_count <= 0:
        return 0
    return int(bitmap.rank(record_count - 1))


def exact_position_deletes(applied: Applied, io: FileIO) -> dict[str, int]:
    """Rows deleted by DVs and position deletes, per data file with any (exact)."""
    bitmaps = position_bitmaps(applied, io)
    counts: dict[str, int] = {}
    for data, deletes in applied:
        if deletes.deletion_vector is not None:
            counts[data.path] = min(deletes.deletion_vector.record_count, data.record_count)
        elif data.path in bitmaps:
            counts[data.path] = count_below(bitmaps[data.path], data.record_count)
    return counts


def dv_bitmap(io: FileIO, dv: DeleteFileEntry) -> BitMap64:
    """The positions a deletion vector deletes, read with one ranged read of its blob."""
    from dvtool.deletion_vectors.codec import ENTRY_OVERHEAD, decode_dv_entry

    if dv.content_offset is None or dv.content_size_in_bytes is None:
        raise DataFileError(f"the deletion vector in {dv.path} has no content offset or size")
    with read_errors(dv.path), io.new_input(dv.path).open(seekable=True) as stream:
        stream.seek(dv.content_offset)
        blob = stream.read(dv.content_size_in_bytes)
    return decode_dv_entry(blob, len(blob) - ENTRY_OVERHEAD)


def deleted_bitmaps(
    applied: Applied, io: FileIO, with_equality: Callable[[DataFileEntry], bool]
) -> Iterable[tuple[DataFileEntry, AppliedDeletes, BitMap64]]:
    """For the data files `with_equality` picks: the positions their DV or position deletes
    delete (each file's deletes as one bitmap), to be joined by equality matches."""
    picked = [(d, a) for d, a in applied if with_equality(d)]
    positions = position_bitmaps(picked, io)
    for data, deletes in picked:
        if deletes.deletion_vector is not None:
            yield data, deletes, dv_bitmap(io, deletes.deletion_vector)
        else:
            yield data, deletes, positions.get(data.path, BitMap64())
