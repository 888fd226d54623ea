"""A data file split over several new files (`RewriteSource.start`/`stop`, `SourcePlan`'s
row range): what compaction writes when a file is above the maximum size.

The oracle is the whole file rewritten into one new file (itself checked against pyiceberg's
reads in test_data_file_rewrite.py): the new files of consecutive ranges hold its rows in
order, each once, with the v3 row lineage the whole rewrite gives them; a range's row
groups outside it are not read; a range survives the pickling an executor gets.
"""

from __future__ import annotations

import itertools
import pickle
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadataV3
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType
from pyroaring import BitMap64

import dvtool.iceberg.rewrite_executor as executor
from dvtool.iceberg.data_file_rewrite import RewriteSource, rewrite_data_files
from dvtool.iceberg.rewrite_job import plan_rewrites
from tests.iceberg.rewrite_files import data_file, field, sql_catalog

ROWS = 50
DROP = [0, 3, 6, 7, 20, 21, 22, 49]


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return sql_catalog(tmp_path)


def _source_file(folder: Path) -> Path:
    """50 rows (ids 0..49) in row groups of 7 rows."""
    path = folder / "big.parquet"
    schema = pa.schema([field("id", pa.int64(), 1), field("s", pa.string(), 2)])
    rows = pa.table({"id": range(ROWS), "s": [f"s{i}" for i in range(ROWS)]}, schema=schema)
    pq.write_table(rows, path, row_group_size=7)
    return path


def _v3(catalog: SqlCatalog) -> TableMetadataV3:
    table = catalog.create_table(
        "ns.t", Schema(NestedField(1, "id", LongType()), NestedField(2, "s", StringType()))
    )
    fields = table.metadata.model_dump(by_alias=False)
    fields.update(format_version=3, next_row_id=10_000)
    return TableMetadataV3(**fields)


def _write(
    catalog: SqlCatalog, metadata: TableMetadataV3, sources: list[RewriteSource], out: Path
) -> DataFile | None:
    table = catalog.load_table("ns.t")
    return rewrite_data_files(table.io, metadata, sources, str(out), spec_id=0, partition=Record())


@pytest.mark.parametrize("cuts", [(0, 10, 24, 25, 50), (0, 1, 49, 50), (0, 7, 14, 50)])
def test_consecutive_ranges_hold_the_whole_rewrite(
    catalog: SqlCatalog, tmp_path: Path, cuts: tuple[int, ...]
) -> None:
    path = _source_file(tmp_path)
    metadata = _v3(catalog)

    def source(start: int = 0, stop: int | None = None) -> RewriteSource:
        return RewriteSource(data_file(path, ROWS), BitMap64(DROP), 4, 100, start, stop)

    whole = _write(catalog, metadata, [source()], tmp_path / "whole.parquet")
    assert whole is not None
    parts = []
    for n, (start, stop) in enumerate(itertools.pairwise(cuts)):
        part = source(start, stop)
        written = _write(catalog, metadata, [part], tmp_path / f"part{n}.parquet")
        expected = sum(1 for p in range(start, stop) if p not in DROP)
        assert part.remaining_rows == expected
        if expected == 0:
            assert written is None
            continue
        assert written is not None and written.record_count == expected
        parts.append(pq.read_table(tmp_path / f"part{n}.parquet"))
    got = pa.concat_tables(parts).to_pylist()
    assert got == pq.read_table(tmp_path / "whole.parquet").to_pylist()
    assert [r["_row_id"] for r in got] == [100 + p for p in range(ROWS) if p not in DROP]


def test_row_groups_outside_the_range_are_not_read(
    catalog: SqlCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _source_file(tmp_path)
    metadata = _v3(catalog)
    read: list[int] = []
    original = executor._row_group

    def counted(parquet: Any, index: int, rows: int, columns: list[str]) -> Any:
        read.append(index)
        return original(parquet, index, rows, columns)

    monkeypatch.setattr(executor, "_row_group", counted)
    source = RewriteSource(data_file(path, ROWS), BitMap64(), 4, 100, 15, 30)
    _write(catalog, metadata, [source], tmp_path / "part.parquet")
    assert read == [2, 3, 4]  # rows 14..20, 21..27, 28..34
    assert pq.read_table(tmp_path / "part.parquet")["id"].to_pylist() == list(range(15, 30))


def test_a_range_survives_the_pickling_of_a_plan(catalog: SqlCatalog, tmp_path: Path) -> None:
    path = _source_file(tmp_path)
    metadata = _v3(catalog)
    io = catalog.load_table("ns.t").io
    source = RewriteSource(data_file(path, ROWS), BitMap64([20]), 4, 100, 10, 40)
    _, planned = plan_rewrites(io, metadata, [(str(tmp_path / "o.parquet"), 0, Record(), [source])])
    shipped = pickle.loads(pickle.dumps(planned[0].plan))
    assert (shipped.sources[0].start, shipped.sources[0].stop) == (10, 40)
    assert shipped == planned[0].plan
