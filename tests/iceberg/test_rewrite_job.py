"""Iceberg rewrites as plain data (`dvtool.iceberg.rewrite_job`): what Spark's executors run.

A job pickled and unpickled (as an executor gets it) writes the very file the job writes in
this process: the same rows, row lineage, size and metrics. A path table's FileIO comes back
over pyarrow's filesystems (executors have no fsspec), a catalog's FileIO as its own class
with its properties; a memory:// table is refused when the job is pickled, on the driver.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFile
from pyiceberg.typedef import Record
from pyroaring import BitMap64

from dvtool.errors import StorageError
from dvtool.iceberg.data_file_rewrite import RewriteSource
from dvtool.iceberg.metadata_json import to_json
from dvtool.iceberg.rewrite_job import RewriteJob, data_file_of, rewrite_task
from dvtool.iceberg.tables import IcebergTable
from dvtool.storage.arrow_storage import ArrowStorage
from tests.iceberg.commit_tables import new_path_table, new_sql_table
from tests.iceberg.rewrite_files import data_file, field

METRICS = (
    "record_count",
    "file_size_in_bytes",
    "column_sizes",
    "value_counts",
    "null_value_counts",
    "nan_value_counts",
    "lower_bounds",
    "upper_bounds",
    "spec_id",
    "partition",
)


def _source(folder: Path, version: int) -> RewriteSource:
    """Ten rows (ids 0..9, field ids 1 and 2) of which rows 1 and 5 go."""
    path = folder / "in.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([field("id", pa.int64(), 1), field("name", pa.string(), 2)])
    pq.write_table(pa.table({"id": range(10), "name": [f"n{i}" for i in range(10)]}, schema), path)
    first_row_id = 100 if version >= 3 else None
    return RewriteSource(data_file(path, 10), BitMap64([1, 5]), 4, first_row_id)


def _both(table: IcebergTable, source: RewriteSource, folder: Path) -> list[DataFile]:
    """The data file the job writes here, and the one its pickled copy writes."""
    job = RewriteJob(table.io, table.metadata)
    shipped = pickle.loads(pickle.dumps(job))
    assert to_json(shipped.metadata) == to_json(table.metadata)
    out = []
    for name, runner in (("here", job), ("shipped", shipped)):
        task = rewrite_task(str(folder / f"{name}.parquet"), 0, Record(), [source])
        fields = pickle.loads(pickle.dumps(runner(pickle.loads(pickle.dumps(task)))))
        out.append(data_file_of(fields))
    return out


@pytest.mark.parametrize("version", [2, 3])
def test_a_shipped_path_table_job_writes_the_same_file(tmp_path: Path, version: int) -> None:
    table = new_path_table(str(tmp_path / "t"), version)
    shipped = pickle.loads(pickle.dumps(RewriteJob(table.io, table.metadata)))
    assert isinstance(shipped.io.storage, ArrowStorage)
    here, there = _both(table, _source(tmp_path / "t" / "data", version), tmp_path / "t" / "data")
    rows = [pq.read_table(f.file_path).to_pylist() for f in (here, there)]
    assert rows[0] == rows[1]
    assert [r["id"] for r in rows[0]] == [0, 2, 3, 4, 6, 7, 8, 9]
    if version >= 3:
        assert [r["_row_id"] for r in rows[0]] == [100, 102, 103, 104, 106, 107, 108, 109]
        assert {r["_last_updated_sequence_number"] for r in rows[0]} == {4}
    for name in METRICS:
        assert getattr(here, name) == getattr(there, name), name


def test_a_catalog_job_reopens_its_file_io_class(tmp_path: Path) -> None:
    table = new_sql_table(tmp_path / "c", 2)
    shipped = pickle.loads(pickle.dumps(RewriteJob(table.io, table.metadata)))
    assert type(shipped.io) is type(table.io)
    folder = Path(table.location.removeprefix("file://")) / "data"
    here, there = _both(table, _source(folder, 2), folder)
    for name in METRICS:
        assert getattr(here, name) == getattr(there, name), name


def test_a_memory_table_is_refused_on_the_driver() -> None:
    table = new_path_table("memory://rewrite-job/t", 2)
    with pytest.raises(StorageError, match="memory://"):
        pickle.dumps(RewriteJob(table.io, table.metadata))
