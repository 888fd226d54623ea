"""The arrow engine's rewrites: which rows a purge keeps and a change-data file holds.

Files have row groups larger and smaller than a read batch (65,536 rows), so DV rows fall
on batch and row-group boundaries; some DVs delete whole batches, none or every row, or
name rows past the end of the file (ignored, as before). The oracle is plain python over the
rows pyarrow reads from the input file; the output files are read back with polars.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyroaring import BitMap64

from dvtool.deletion_vectors.codec import bitmap_rows
from dvtool.delta.protocol.schema import parse_schema
from dvtool.engines import rewrite
from dvtool.engines.base import RewriteBin, RewriteInput, TableLayout
from dvtool.engines.rewrite import write_bin, write_change_data
from dvtool.storage.table_storage import Storage

ROWS = 150_000
BATCH = 65_536
FIELDS = [("id", "long"), ("s", "string")]


def _table(root: Path) -> TableLayout:
    fields = [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in FIELDS]
    schema = parse_schema(json.dumps({"type": "struct", "fields": fields}))
    return TableLayout(Storage.for_table(str(root)), schema, (), "none")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One input file: ids 0..ROWS-1 in row groups of 100,000 and 50,000 rows."""
    root = tmp_path_factory.mktemp("rewrite")
    data = pa.table(
        {
            "id": pa.array(range(ROWS), pa.int64()),
            "s": pa.array([None if i % 11 == 0 else f"row {i}" for i in range(ROWS)]),
        }
    )
    pq.write_table(data, root / "in.parquet", row_group_size=100_000)
    return root


def _drops() -> dict[str, BitMap64 | None]:
    rng = random.Random(7)
    whole_batch = BitMap64()
    whole_batch.add_range(BATCH, 2 * BATCH)
    everything = BitMap64()
    everything.add_range(0, ROWS)
    return {
        "none": None,
        "empty": BitMap64(),
        "random-10%": BitMap64(i for i in range(ROWS) if rng.random() < 0.1),
        "boundaries": BitMap64([0, BATCH - 1, BATCH, 99_999, 100_000, 2 * BATCH, ROWS - 1]),
        "whole-batch": whole_batch,
        "past-the-end": BitMap64([5, ROWS, ROWS + 1, 2**40]),
        "every-row": everything,
    }


DROPS = _drops()


@pytest.mark.parametrize("name", list(DROPS))
def test_purge_keeps_exactly_the_rows_outside_the_dv(source: Path, name: str) -> None:
    drop = DROPS[name]
    table = _table(source)
    location = table.storage.resolve("in.parquet")
    rows = None if drop is None else bitmap_rows(drop)
    rewrite = RewriteBin((RewriteInput("in.parquet", location, rows),), "out", {})
    written = write_bin(table, {}, rewrite)
    gone = set(drop or ())
    want = [i for i in range(ROWS) if i not in gone]
    if not want:
        assert written is None
        return
    assert written is not None
    got = pl.read_parquet(written.location)
    assert got["id"].to_list() == want
    assert got["s"].to_list() == [None if i % 11 == 0 else f"row {i}" for i in want]
    assert json.loads(written.stats_json)["numRecords"] == len(want)


@pytest.mark.parametrize("name", ["random-10%", "boundaries", "whole-batch", "past-the-end"])
def test_change_data_holds_exactly_the_deleted_rows(source: Path, name: str) -> None:
    rows = DROPS[name]
    assert rows is not None
    table = _table(source)
    add = {"path": "in.parquet", "partitionValues": {}}
    action, location = write_change_data(table, add, bitmap_rows(rows))
    want = sorted(i for i in rows if i < ROWS)
    got = pl.read_parquet(location)
    assert got["id"].to_list() == want
    assert set(got["_change_type"].to_list()) == {"delete"}
    assert action["cdc"]["size"] == Path(location).stat().st_size


@pytest.mark.parametrize("first_keeps_rows", [True, False])
def test_each_input_is_opened_once_and_the_first_ones_codec_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_keeps_rows: bool
) -> None:
    """The codec of the new file is the first input's, read from the footer opened for its
    rows (not from a second open), even when the DV deletes all of the first input's rows."""
    data = pa.table({"id": pa.array(range(10), pa.int64()), "s": [f"r{i}" for i in range(10)]})
    pq.write_table(data, tmp_path / "a.parquet", compression="zstd")
    pq.write_table(data, tmp_path / "b.parquet", compression="gzip")
    table = _table(tmp_path)
    all_rows = bitmap_rows(BitMap64(range(10)))
    inputs = tuple(
        RewriteInput(name, table.storage.resolve(name), drop)
        for name, drop in (
            ("a.parquet", None if first_keeps_rows else all_rows),
            ("b.parquet", None),
        )
    )
    opened: list[str] = []
    real_open = rewrite.open_parquet_file

    def counting_open(storage: Storage, location: str) -> Any:
        opened.append(location.rpartition("/")[2])
        return real_open(storage, location)

    monkeypatch.setattr(rewrite, "open_parquet_file", counting_open)
    written = write_bin(table, {}, RewriteBin(inputs, "out", {}))
    assert written is not None
    assert opened == ["a.parquet", "b.parquet"]
    out = pq.ParquetFile(written.location).metadata
    assert out.row_group(0).column(0).compression == "ZSTD"
    assert out.num_rows == (20 if first_keeps_rows else 10)
