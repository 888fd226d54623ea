"""The arrow scan over many small files: files filtered together find exactly the rows each
file finds alone, checked against the rows pyarrow reads from the raw files."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyroaring import BitMap64

import dvtool.engines.arrow_scan as arrow_scan
from dvtool.engines.arrow_scan import FILTER_ROWS, PLAN_ROWS, scan_groups
from dvtool.engines.base import ScanFile
from dvtool.errors import PredicateError
from dvtool.predicate import Predicate
from tests.engines.test_arrow import delta_schema, find, layout, raw_matches, scan_file, write

FIELDS = [("id", "long"), ("key", "long"), ("s", "string"), ("part", "string")]


def _small_files(root: Path, count: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """`count` files of 0-300 rows; some write `key` as int32 (as other writers do for a
    long column) and some lack `s`, so their batches conform to the table's types."""
    rng = random.Random(seed)
    out = []
    next_id = 0
    for i in range(count):
        n = rng.choice([0, 1, rng.randint(2, 300)])
        key_type = pa.int32() if i % 5 == 0 else pa.int64()
        fields = [("id", pa.int64()), ("key", key_type)] + (
            [] if i % 7 == 0 else [("s", pa.string())]
        )
        rows = []
        for j in range(n):
            row: dict[str, Any] = {
                "id": next_id + j,
                "key": None if rng.random() < 0.1 else rng.randint(-50, 50),
            }
            if i % 7:
                row["s"] = rng.choice(["a", "b", None])
            rows.append(row)
        next_id += n
        part = rng.choice(["x", "y", None])
        relative = f"part={part or '__HIVE_DEFAULT_PARTITION__'}/f{i}.parquet"
        write(root / relative, rows, pa.schema(fields), rg=rng.choice([7, 50, 1000]))
        out.append((relative, {"part": part}))
    return out


def _deleted(rng: random.Random, rows: int) -> BitMap64 | None:
    if rows == 0 or rng.random() < 0.5:
        return None
    return BitMap64(rng.sample(range(rows), rng.randint(1, rows)))


def _and(a: Any, b: Any) -> Any:
    return False if a is False or b is False else None if a is None or b is None else True


def _or(a: Any, b: Any) -> Any:
    return True if a is True or b is True else None if a is None or b is None else False


def _eq(value: Any, literal: Any) -> Any:
    return None if value is None else value == literal


SQL = [
    # Spark's % keeps the dividend's sign (-4 % 7 = -4), unlike Python's: math.fmod.
    ("key % 7 = 3", lambda r: None if r["key"] is None else math.fmod(r["key"], 7) == 3),
    (
        "key > 10 AND (s = 'a' OR part = 'x')",
        lambda r: _and(
            None if r["key"] is None else r["key"] > 10,
            _or(_eq(r.get("s"), "a"), _eq(r["part"], "x")),
        ),
    ),
    ("part IS NULL OR id % 11 = 0", lambda r: r["part"] is None or r["id"] % 11 == 0),
]


@pytest.mark.parametrize(("sql", "fn"), SQL, ids=[s for s, _ in SQL])
def test_small_files_filtered_together_find_each_files_rows(
    tmp_path: Path, sql: str, fn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    made = _small_files(root, 120, seed=len(sql))
    table = layout(root, delta_schema(FIELDS), partitions=("part",))
    rng = random.Random(7)
    files: list[ScanFile] = []
    for relative, values in made:
        plain = scan_file(table, relative, values)
        deleted = _deleted(rng, plain.num_records or 0)
        files.append(ScanFile(plain.path, plain.location, values, plain.num_records, deleted))
    plans: list[int] = []
    real_filter = Predicate.filter

    def counting(self: Predicate, data: pa.Table) -> pa.Table:
        plans.append(data.num_rows)
        return real_filter(self, data)

    monkeypatch.setattr(Predicate, "filter", counting)
    got = find(table, files, sql)
    want = []
    for (relative, values), file in zip(made, files, strict=True):
        rows = raw_matches(root / relative, fn, values)
        want.append(rows - set(file.deleted or ()))
    assert got == want
    assert sum(map(len, want)) > 0
    read_files = sum(1 for f in files if f.num_records)
    assert len(plans) < read_files / 3, "small files should share filter plans"
    assert max(plans) <= 2 * PLAN_ROWS


def test_a_failing_file_among_many_is_named(tmp_path: Path) -> None:
    root = tmp_path / "t"
    schema = pa.schema([("x", pa.int64())])
    names = []
    for i in range(40):
        value = 2**62 if i == 23 else i
        write(root / f"f{i}.parquet", [{"x": value}, {"x": 1}], schema)
        names.append(f"f{i}.parquet")
    table = layout(root, delta_schema([("x", "long")]))
    files = [scan_file(table, name) for name in names]
    with pytest.raises(PredicateError, match=r"cannot be evaluated on .*/f23\.parquet"):
        find(table, files, "x * 4 > 0")


@given(
    st.lists(st.one_of(st.none(), st.integers(0, 3 * PLAN_ROWS)), max_size=60),
    st.integers(1, 8),
)
def test_scan_groups_cover_the_files_in_order(sizes: list[int | None], threads: int) -> None:
    files = [ScanFile(f"f{i}", f"/f{i}", {}, n, None) for i, n in enumerate(sizes)]
    groups = scan_groups(files, threads)
    assert [f for g in groups for f in g] == files
    assert all(groups)
    total = sum(n if n is not None else FILTER_ROWS for n in sizes)
    if total >= 4 * threads * PLAN_ROWS:  # enough rows: groups hold about PLAN_ROWS
        for group in groups[:-1]:
            assert sum(f.num_records or FILTER_ROWS for f in group) >= PLAN_ROWS
    if len(files) >= 4 * threads and all(n == 1 for n in sizes):  # threads stay busy
        assert len(groups) >= 4 * threads


def test_row_group_statistics_are_not_checked_again_for_one_group_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file the planner checked by its add's complete statistics, in one row group, is
    read without its footer statistics; a file of several row groups still uses them."""
    root = tmp_path / "t"
    schema = pa.schema([("x", pa.int64())])
    write(root / "one.parquet", [{"x": i} for i in range(30)], schema, rg=100)
    write(root / "three.parquet", [{"x": i} for i in range(30)], schema, rg=10)
    table = layout(root, delta_schema([("x", "long")]))
    asked: list[str] = []
    real = arrow_scan.row_group_stats

    def spy(storage: Any, location: str, parquet: Any = None, columns: Any = None) -> Any:
        asked.append(location.rsplit("/", 1)[-1])
        return real(storage, location, parquet, columns)

    monkeypatch.setattr(arrow_scan, "row_group_stats", spy)
    files = []
    for name in ("one.parquet", "three.parquet"):
        plain = scan_file(table, name)
        files.append(ScanFile(name, plain.location, {}, plain.num_records, None, True))
    # x < 12 decides the last row group of three.parquet (NONE) only by its statistics.
    assert find(table, files, "x < 12 AND x % 5 = 1") == [{1, 6, 11}, {1, 6, 11}]
    assert asked == ["three.parquet"]


def _footer(table: pa.Table, row_group_size: int) -> pq.FileMetaData:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=row_group_size)
    return pq.read_metadata(pa.BufferReader(sink.getvalue()))


def test_small_fixed_width_row_groups_are_read_whole() -> None:
    """`read_rows`: a row group of fixed-width predicate columns that fits
    WHOLE_ROW_GROUP_BYTES is one read; strings, lists and large row groups go in batches of
    FILTER_ROWS (their memory is not bounded by the row count)."""
    from dvtool.engines.arrow_scan import WHOLE_ROW_GROUP_BYTES, read_rows

    rows = 3 * FILTER_ROWS
    ints = pa.array(range(rows), pa.int64())
    table = pa.table(
        {
            "i": ints,
            "s": pa.array(["x"] * rows),
            "l": pa.array([[1]] * rows, pa.list_(pa.int32())),
            "st": pa.StructArray.from_arrays([ints], names=["a"]),
        }
    )
    footer = _footer(table, rows)
    assert read_rows(footer, ["i"], [0]) == rows
    assert read_rows(footer, ["st"], [0]) == rows  # a struct of fixed-width leaves
    assert read_rows(footer, ["i", "s"], [0]) == FILTER_ROWS
    assert read_rows(footer, ["l"], [0]) == FILTER_ROWS
    assert read_rows(_footer(table, FILTER_ROWS // 2), ["i"], [0, 1]) == FILTER_ROWS
    huge = WHOLE_ROW_GROUP_BYTES // 17 + 1  # rows whose int column passes the budget
    assert read_rows(_footer(pa.table({"i": pa.array(range(huge))}), huge), ["i"], [0]) == (
        FILTER_ROWS
    )
