"""The code Spark executors run needs only pyarrow and numpy besides dvtool's own modules.

Executors of a stock cluster have pyarrow, numpy and pandas, not pyroaring, sqlglot, rich,
click or fsspec. A child Python whose import system refuses those packages (and pyspark:
executors call these functions with plain Arrow batches) imports the executor module and
runs both task functions on real data: the scan's `collect_matches` and the rewrite's
`write_bins`, with their inputs built on the driver exactly as the Spark engine builds them
(the job pickled, the bins as Arrow IPC). The results are checked here against pyroaring
and against the table's files read with pyarrow. No Spark is started: the executors'
dependencies are what this checks; tests/engines/test_spark_stock.py runs a real cluster.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake
from pyroaring import BitMap64

from dvtool.commands.delete.command import DeleteRequest, run_delete
from dvtool.deletion_vectors.codec import bitmap_rows
from dvtool.delta.log.reader import open_log
from dvtool.delta.protocol.schema import parse_schema
from dvtool.engines.arrow import ArrowEngine
from dvtool.engines.base import RewriteBin, RewriteInput
from dvtool.engines.spark.tasks import (
    FILE_COLUMN,
    ROW_COLUMN,
    WriteJob,
    bins_table,
    layout_options,
    written_files,
)
from dvtool.errors import UsageError
from tests.engines.spark_cluster import table_scan

REPO = Path(__file__).resolve().parents[2]
BLOCKED = (
    "pyroaring",
    "pyiceberg",
    "sqlglot",
    "rich",
    "click",
    "fsspec",
    "s3fs",
    "pyspark",
    "dvtool.cli",
)

# Runs in the child: block the packages, then call the task functions on the inputs.
CHILD = textwrap.dedent(
    """
    import importlib.abc, pickle, sys
    import pyarrow as pa

    BLOCKED = {blocked!r}

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ImportError("executors have no " + name)
            return None

    sys.meta_path.insert(0, Refuse())
    from dvtool.engines.spark import tasks

    work = sys.argv[1]
    with open(work + "/scan.pickle", "rb") as f:
        deleted, batch = pickle.load(f)
    matches = list(tasks.collect_matches(deleted, [batch]))
    with open(work + "/job.pickle", "rb") as f:
        job = pickle.load(f)
    bins = pa.ipc.open_file(work + "/bins.arrow").read_all().to_batches()
    written = list(tasks.write_bins(job, bins))
    with open(work + "/out.pickle", "wb") as f:
        pickle.dump((matches, written), f)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    print("loaded:", loaded)
    """
)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """Two files of 1,000 rows in one partition, DVs on both (made by dvtool's arrow engine)."""
    root = tmp_path / "t"
    for part in range(2):
        ids = list(range(part * 1000, part * 1000 + 1000))
        data = pa.table({"id": ids, "p": ["a"] * 1000, "s": [f"row {i}" for i in ids]})
        write_deltalake(
            str(root),
            data,
            partition_by=["p"],
            mode="append",
            configuration={"delta.enableDeletionVectors": "true"},
        )
    run_delete(open_log(str(root)), DeleteRequest("id % 7 = 3"), engine=ArrowEngine())
    return root


def _run_child(work: Path) -> str:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(blocked=set(BLOCKED)), str(work)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_executor_tasks_run_without_driver_only_packages(table: Path, tmp_path: Path) -> None:
    layout, files, configuration = table_scan(table)
    assert all(f.deleted for f in files)
    work = tmp_path / "work"
    work.mkdir()
    # The scan's input: (file index, row index) pairs of rows a predicate matched, with the
    # files' current DVs as the engine ships them (pyroaring's serialization).
    rows = np.arange(0, 1000, 5, dtype=np.int64)
    batch = pa.record_batch(
        {FILE_COLUMN: pa.array([0] * len(rows) + [1] * 3, pa.int32()), ROW_COLUMN: [*rows, 1, 2, 3]}
    )
    deleted = {i: f.deleted.serialize() for i, f in enumerate(files) if f.deleted is not None}
    (work / "scan.pickle").write_bytes(pickle.dumps((deleted, batch)))
    # The rewrite's input: one purge bin per file, and one bin of both files.
    inputs = [
        RewriteInput(f.path, f.location, bitmap_rows(f.deleted) if f.deleted else None)
        for f in files
    ]
    bins = [RewriteBin((i,), "p=a", {"p": "a"}) for i in inputs]
    bins.append(RewriteBin(tuple(inputs), "p=a", {"p": "a"}))
    job = WriteJob(
        root=layout.storage.root,
        options=dict(layout.storage.options),
        schema=layout.schema,
        partition_columns=tuple(layout.partition_columns),
        column_mapping_mode=layout.column_mapping_mode,
        configuration=configuration,
        layout_options=layout_options(layout),
    )
    (work / "job.pickle").write_bytes(pickle.dumps(job))
    with pa.ipc.new_file(str(work / "bins.arrow"), bins_table(bins).schema) as out:
        out.write_table(bins_table(bins))

    stdout = _run_child(work)
    assert "loaded: []" in stdout
    matches, written_rows = pickle.loads((work / "out.pickle").read_bytes())

    (found,) = matches
    got = {
        index: BitMap64.deserialize(blob)
        for index, blob in zip(
            found.column(0).to_pylist(), found.column(1).to_pylist(), strict=True
        )
    }
    assert files[0].deleted is not None and files[1].deleted is not None
    assert got[0] == BitMap64(int(r) for r in rows) - files[0].deleted
    assert got[1] == BitMap64([1, 2, 3]) - files[1].deleted

    results = written_files(
        layout.storage,
        len(bins),
        [tuple(r.values()) for b in written_rows for r in b.to_pylist()],
    )
    kept = [
        [r for i, r in enumerate(pq.read_table(f.location).to_pylist()) if i not in f.deleted]
        for f in files
        if f.deleted is not None
    ]
    expected = [kept[0], kept[1], kept[0] + kept[1]]
    for result, want in zip(results, expected, strict=True):
        assert result is not None
        got_rows = pq.read_table(result.location).select(["id", "s"]).to_pylist()
        assert got_rows == [{"id": r["id"], "s": r["s"]} for r in want]
        assert result.num_records == len(want)


def test_options_executors_cannot_take_are_refused_on_the_driver() -> None:
    with pytest.raises(UsageError, match="cache_type"):
        WriteJob(
            root="s3://bucket/t",
            options={"key": "k", "cache_type": "none"},
            schema=parse_schema('{"type": "struct", "fields": []}'),
            partition_columns=(),
            column_mapping_mode="none",
            configuration={},
            layout_options={},
        )
