"""Iceberg rewrites as plain data (`dvtool.iceberg.rewrite_job`): what Spark's executors run.

A job and its file plans pickled and unpickled (as an executor gets them) write the very file
the job writes in this process: the same rows, row lineage, size and metrics. A path table's
FileIO comes back over `ArrowStorage` (executors have no fsspec), a catalog's FileIO as the
pyarrow filesystems pyiceberg builds from its properties; a memory:// table is refused when
the job is pickled, on the driver. In a child Python that cannot import pyiceberg,
pyroaring or fsspec (a stock executor's), the shipped job writes the same file.
"""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.fsspec import FsspecFileIO
from pyiceberg.manifest import DataFile
from pyiceberg.typedef import Record
from pyroaring import BitMap64

from dvtool.errors import StorageError
from dvtool.iceberg.data_file_io import FileSystemIO, StoreIO
from dvtool.iceberg.data_file_rewrite import RewriteSource
from dvtool.iceberg.rewrite_job import PyicebergIO, plan_rewrites, portable_io, rewrite_job
from dvtool.iceberg.tables import IcebergTable
from tests.iceberg.commit_tables import new_path_table, new_sql_table
from tests.iceberg.rewrite_files import data_file, field

REPO = Path(__file__).resolve().parents[2]

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
    bins = [(str(folder / f"{name}.parquet"), 0, Record(), [source]) for name in NAMES]
    planner, planned = plan_rewrites(table.io, table.metadata, bins)
    job = rewrite_job(planner, [p.plan for p in planned])
    shipped = pickle.loads(pickle.dumps(job))
    assert shipped.spec == job.spec
    here = job(planned[0].plan)
    there = pickle.loads(pickle.dumps(shipped(pickle.loads(pickle.dumps(planned[1].plan)))))
    return [planner.data_file(p, new) for p, new in zip(planned, [here, there], strict=True)]


NAMES = ("here", "shipped")


@pytest.mark.parametrize("version", [2, 3])
def test_a_shipped_path_table_job_writes_the_same_file(tmp_path: Path, version: int) -> None:
    table = new_path_table(str(tmp_path / "t"), version)
    shipped = pickle.loads(pickle.dumps(_job(table)))
    assert isinstance(shipped.io, StoreIO)
    here, there = _both(table, _source(tmp_path / "t" / "data", version), tmp_path / "t" / "data")
    rows = [pq.read_table(f.file_path).to_pylist() for f in (here, there)]
    assert rows[0] == rows[1]
    assert [r["id"] for r in rows[0]] == [0, 2, 3, 4, 6, 7, 8, 9]
    if version >= 3:
        assert [r["_row_id"] for r in rows[0]] == [100, 102, 103, 104, 106, 107, 108, 109]
        assert {r["_last_updated_sequence_number"] for r in rows[0]} == {4}
    for name in METRICS:
        assert getattr(here, name) == getattr(there, name), name


def test_a_catalog_job_ships_pyarrow_filesystems(tmp_path: Path) -> None:
    table = new_sql_table(tmp_path / "c", 2)
    shipped = pickle.loads(pickle.dumps(_job(table)))
    assert isinstance(shipped.io, FileSystemIO)
    folder = Path(table.location.removeprefix("file://")) / "data"
    here, there = _both(table, _source(folder, 2), folder)
    for name in METRICS:
        assert getattr(here, name) == getattr(there, name), name


def test_a_memory_table_is_refused_on_the_driver() -> None:
    table = new_path_table("memory://rewrite-job/t", 2)
    with pytest.raises(StorageError, match="memory://"):
        pickle.dumps(_job(table))


def _job(table: IcebergTable) -> Any:
    """A job of the table with no file to write."""
    planner, _ = plan_rewrites(table.io, table.metadata, [])
    return rewrite_job(planner, [])


# Runs in a child Python: packages a stock executor lacks refused, then the shipped jobs run
# as Spark's executors run them (`run_writes_task`: the pickled job on each pickled plan).
CHILD = textwrap.dedent(
    """
    import importlib.abc, pickle, sys

    BLOCKED = {blocked!r}

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError("executors have no " + name)
            return None

    sys.meta_path.insert(0, Refuse())
    from dvtool.engines.spark.tasks import run_writes_task

    with open(sys.argv[1], "rb") as f:
        jobs = pickle.load(f)
    out = [list(run_writes_task(job, enumerate(plans))) for job, plans in jobs]
    with open(sys.argv[2], "wb") as f:
        pickle.dump(out, f)
    print("loaded:", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
    """
)
BLOCKED = ("pyiceberg", "pyroaring", "pydantic", "pydantic_core", "mmh3", "fsspec", "pyspark")


def test_shipped_jobs_run_without_pyiceberg_or_pyroaring(tmp_path: Path) -> None:
    """A path table (v3: row lineage) and a catalog table's jobs, pickled, run in a Python
    that refuses pyiceberg, pyroaring and fsspec, write the files written here: the same
    rows and the same metrics once the driver has made them `DataFile`s."""
    path_table = new_path_table(str(tmp_path / "t"), 3)
    catalog_table = new_sql_table(tmp_path / "c", 2)
    folders = [
        tmp_path / "t" / "data",
        Path(catalog_table.location.removeprefix("file://")) / "data",
    ]
    jobs, expected = [], []
    for table, folder, version in zip((path_table, catalog_table), folders, (3, 2), strict=True):
        source = _source(folder, version)
        bins = [(str(folder / f"{name}.parquet"), 0, Record(), [source]) for name in NAMES]
        planner, planned = plan_rewrites(table.io, table.metadata, bins)
        job = rewrite_job(planner, [p.plan for p in planned])
        here = planner.data_file(planned[0], job(planned[0].plan))
        jobs.append((pickle.dumps(job), [pickle.dumps(planned[1].plan)]))
        expected.append((planner, planned[1], here))
    work, results = tmp_path / "jobs.pickle", tmp_path / "out.pickle"
    work.write_bytes(pickle.dumps(jobs))
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(blocked=set(BLOCKED)), str(work), str(results)],
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "loaded: []" in done.stdout
    for (planner, planned, here), rows in zip(
        expected, pickle.loads(results.read_bytes()), strict=True
    ):
        ((index, result, error),) = rows
        assert error is None and index == 0
        there = planner.data_file(planned, pickle.loads(result))
        assert pq.read_table(there.file_path).equals(pq.read_table(here.file_path))
        for name in METRICS:
            assert getattr(here, name) == getattr(there, name), name


def test_metrics_from_the_shipped_footer_are_those_of_the_file(tmp_path: Path) -> None:
    """The footer a job returns gives the metrics the written file's own footer gives."""
    table = new_path_table(str(tmp_path / "t"), 3)
    source = _source(tmp_path / "t" / "data", 3)
    bins = [(str(tmp_path / "t" / "data" / "out.parquet"), 0, Record(), [source])]
    planner, (planned,) = plan_rewrites(table.io, table.metadata, bins)
    new = rewrite_job(planner, [planned.plan])(planned.plan)
    on_disk = pa.BufferOutputStream()
    pq.read_metadata(new.location).write_metadata_file(on_disk)
    from_disk = dataclasses.replace(new, footer=on_disk.getvalue().to_pybytes())
    shipped, read = (planner.data_file(planned, n) for n in (new, from_disk))
    for name in METRICS:
        assert getattr(shipped, name) == getattr(read, name), name


def test_a_file_io_pyarrow_cannot_open_travels_as_its_class() -> None:
    """A catalog FileIO with files pyarrow has no filesystem for (memory://, through
    fsspec) is pickled as its class and properties, which need pyiceberg to open."""
    io = FsspecFileIO({"k": "v"})
    portable = portable_io(io, ["memory://bucket/t/data/a.parquet"])
    assert isinstance(portable, PyicebergIO)
    again = pickle.loads(pickle.dumps(portable))
    assert type(again) is FsspecFileIO and again.properties == {"k": "v"}
