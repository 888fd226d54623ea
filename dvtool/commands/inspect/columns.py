"""The column-wise evaluation of `inspect`'s summary totals, and row counts from footers.

`dvtool.commands.inspect.summary` defines the totals; this evaluates them over the snapshot's
file table with pyarrow compute, fast for hundreds of thousands of files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.arrays import arrow_values
from dvtool.commands.inspect.summary import RATIO_BUCKETS, DVStorage, FileTotals, FooterCounts
from dvtool.io_pool import map_io

if TYPE_CHECKING:
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.delta.log.snapshot import Snapshot


def totals_from_table(snapshot: Snapshot, footers: FooterCounts | None) -> FileTotals:
    """The totals of the snapshot's file table, column-wise."""
    files = snapshot.files
    dvs = files.column("deletionVector")
    records = _records(snapshot, footers)
    deleted = snapshot.dv_cardinality
    ratio = pc.divide(pc.cast(deleted, pa.float64()), pc.cast(records, pa.float64()))
    ratio = pc.filter(ratio, pc.and_(pc.is_valid(dvs), pc.greater(records, _int64(0))))
    scaled = pc.multiply(ratio, _scalar(float(RATIO_BUCKETS), pa.float64()))
    bucket = pc.min_element_wise(pc.cast(pc.floor(scaled), pa.int64()), _int64(RATIO_BUCKETS - 1))
    counts = {row["values"]: row["counts"] for row in pc.value_counts(bucket).to_pylist()}
    return FileTotals(
        num_files=files.num_rows,
        size_bytes=_sum(files.column("size")),
        physical_rows=_sum(records),
        deleted_rows=_sum(deleted),
        files_with_dvs=_count(pc.is_valid(dvs)),
        files_without_stats=_count(pc.is_null(files.column("numRecords"))),
        dv_storage=_dv_storage(dvs),
        ratio_buckets=tuple(counts.get(b, 0) for b in range(RATIO_BUCKETS)),
    )


def _dv_storage(dvs: pa.ChunkedArray) -> DVStorage:
    kinds = pc.struct_field(dvs, "storageType")
    on_disk = pc.equal(kinds, _scalar("u", pa.string()))
    paths = pc.struct_field(dvs, "pathOrInlineDv").filter(pc.fill_null(on_disk, arrow_values.FALSE))
    return DVStorage(
        dv_files=len(pc.unique(paths)),
        on_disk_dvs=_count(on_disk),
        inline_dvs=_count(pc.equal(kinds, _scalar("i", pa.string()))),
        absolute_path_dvs=_count(pc.equal(kinds, _scalar("p", pa.string()))),
        dv_bytes=_sum(pc.struct_field(dvs, "sizeInBytes")),
    )


# -- row counts from footers -----------------------------------------------------------------


def count_missing_rows(snapshot: Snapshot, log: DeltaLog) -> FooterCounts:
    """Read the footer of every live file without `numRecords`, so row counts are exact.

    Only on request (`--count-rows`): by default counts come from the log alone, and
    `files_without_stats` says how many files they leave out.
    """
    from dvtool.data_files import footer_row_count

    missing = pc.indices_nonzero(pc.is_null(snapshot.files.column("numRecords"))).to_pylist()
    paths = snapshot.files.column("path")
    storage = log.storage

    def count(i: int) -> tuple[int, int]:
        return i, footer_row_count(storage, storage.resolve(paths[i].as_py()))

    return FooterCounts(dict(map_io(count, missing)))


def _records(snapshot: Snapshot, footers: FooterCounts | None) -> pa.Array:
    """Each live file's row count: numRecords, else its footer's count if read, else 0."""
    records = arrow_values.combined(snapshot.files.column("numRecords"))
    if not footers or not footers.counts:
        return pc.fill_null(records, _int64(0))
    values = records.to_pylist()
    for i, n in footers.counts.items():
        values[i] = n
    return pc.fill_null(arrow_values.array(values, pa.int64()), _int64(0))


# -- column helpers --------------------------------------------------------------------------


def _sum(values: pa.Array | pa.ChunkedArray) -> int:
    return int(pc.sum(values).as_py() or 0)


def _count(mask: pa.Array | pa.ChunkedArray) -> int:
    return int(pc.sum(pc.fill_null(mask, arrow_values.FALSE)).as_py() or 0)


def _scalar(value: Any, typ: pa.DataType) -> pa.Scalar:
    return arrow_values.scalar(value, typ)


def _int64(value: int) -> pa.Scalar:
    return _scalar(value, pa.int64())
