"""ArrowEngine.find_matches against the rows pyarrow reads from the raw files.

Each predicate comes with a Python evaluation written here (Spark semantics: a row matches
iff the predicate is TRUE, NULL never matches). Files are written with small row groups so
the engine's row-group pruning is exercised, and `iter_file_batches` is wrapped to see which
row groups it actually reads.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyroaring import BitMap64

import dvtool.engines.arrow_scan as arrow_scan
from dvtool.delta.protocol.schema import parse_schema
from dvtool.engines.arrow import ArrowEngine
from dvtool.engines.base import ScanFile, TableLayout
from dvtool.predicate import Predicate
from dvtool.storage.table_storage import Storage

UTC = dt.timezone.utc
Row = dict[str, Any]

DELTA_FIELDS: list[tuple[str, Any]] = [
    ("id", "long"),
    ("n", "integer"),
    ("s", "string"),
    ("d", "date"),
    ("ts", "timestamp"),
    ("amount", "decimal(10,2)"),
    (
        "st",
        {
            "type": "struct",
            "fields": [
                {"name": "x", "type": "long", "nullable": True, "metadata": {}},
                {"name": "y", "type": "string", "nullable": True, "metadata": {}},
            ],
        },
    ),
]
ARROW_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("n", pa.int32()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("amount", pa.decimal128(10, 2)),
        ("st", pa.struct([("x", pa.int64()), ("y", pa.string())])),
    ]
)


def delta_schema(fields: Sequence[tuple[str, Any]], mapping: dict[str, str] | None = None) -> str:
    out = []
    for i, (name, kind) in enumerate(fields):
        metadata: dict[str, Any] = {}
        if mapping:
            metadata = {
                "delta.columnMapping.id": i + 1,
                "delta.columnMapping.physicalName": mapping[name],
            }
        out.append({"name": name, "type": kind, "nullable": True, "metadata": metadata})
    return json.dumps({"type": "struct", "fields": out})


def make_rows(n: int, seed: int, *, sorted_ids: bool = True) -> list[Row]:
    rng = random.Random(seed)
    ids = list(range(n))
    if not sorted_ids:
        rng.shuffle(ids)
    return [
        {
            "id": i,
            "n": None if rng.random() < 0.2 else rng.randint(0, 9),
            "s": None if rng.random() < 0.2 else rng.choice(["ant", "bee", "cat", "apple", ""]),
            "d": dt.date(2024, 1, 1) + dt.timedelta(days=i // 10),
            "ts": dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(hours=i, microseconds=i % 3),
            "amount": None if rng.random() < 0.1 else Decimal(rng.randint(-500, 500)).scaleb(-2),
            "st": None if rng.random() < 0.1 else {"x": i % 13, "y": rng.choice(["u", None])},
        }
        for i in ids
    ]


def write(path: Path, rows: Sequence[Row], schema: pa.Schema = ARROW_SCHEMA, rg: int = 10) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows), schema), path, row_group_size=rg)
    assert pq.read_metadata(path).num_row_groups == -(-len(rows) // rg) or len(rows) == 0
    return path


def layout(
    root: Path, schema: str, partitions: tuple[str, ...] = (), mode: str = "none"
) -> TableLayout:
    return TableLayout(Storage.for_table(str(root)), parse_schema(schema), partitions, mode)


def scan_file(
    table: TableLayout,
    relative: str,
    partition_values: dict[str, str | None] | None = None,
    deleted: BitMap64 | None = None,
) -> ScanFile:
    location = table.storage.resolve(relative)
    rows = pq.read_metadata(location).num_rows
    return ScanFile(relative, location, partition_values or {}, rows, deleted)


def find(
    table: TableLayout,
    files: Sequence[ScanFile],
    sql: str,
    progress: Callable[[int], None] | None = None,
) -> list[set[int]]:
    predicate = Predicate.parse(
        sql, table.schema, table.partition_columns, table.column_mapping_mode
    )
    return [set(m) for m in ArrowEngine(threads=2).find_matches(table, files, predicate, progress)]


def raw_matches(path: Path, fn: Callable[[Row], Any], extra: Row | None = None) -> set[int]:
    """Row indexes of the raw file where the Python predicate is TRUE."""
    rows = pq.read_table(path).to_pylist()
    return {i for i, r in enumerate(rows) if fn({**r, **(extra or {})}) is True}


def _get(row: Row, path: str) -> Any:
    value: Any = row
    for part in path.split("."):
        value = None if value is None else value.get(part)
    return value


def _cmp(path: str, op: Callable[[Any], bool]) -> Callable[[Row], Any]:
    def f(row: Row) -> Any:
        value = _get(row, path)
        return None if value is None else op(value)

    return f


def _and(*fs: Callable[[Row], Any]) -> Callable[[Row], Any]:
    def f(row: Row) -> Any:
        values = [g(row) for g in fs]
        if any(v is False for v in values):
            return False
        return None if any(v is None for v in values) else True

    return f


def _or(*fs: Callable[[Row], Any]) -> Callable[[Row], Any]:
    def f(row: Row) -> Any:
        values = [g(row) for g in fs]
        if any(v is True for v in values):
            return True
        return None if any(v is None for v in values) else False

    return f


def _not(g: Callable[[Row], Any]) -> Callable[[Row], Any]:
    def f(row: Row) -> Any:
        value = g(row)
        return None if value is None else not value

    return f


T0 = dt.datetime(2024, 1, 1, tzinfo=UTC)
CASES: list[tuple[str, Callable[[Row], Any]]] = [
    ("id BETWEEN 25 AND 34", _cmp("id", lambda v: 25 <= v <= 34)),
    ("id >= 50", _cmp("id", lambda v: v >= 50)),
    ("id = 1000", _cmp("id", lambda v: v == 1000)),
    (
        "n = 3 OR s LIKE 'a%'",
        _or(_cmp("n", lambda v: v == 3), _cmp("s", lambda v: v.startswith("a"))),
    ),
    ("NOT (n > 4)", _not(_cmp("n", lambda v: v > 4))),
    ("n IN (1, 2, NULL)", _and(_cmp("n", lambda v: v in (1, 2) or None))),
    ("s IS NULL AND id < 60", _and(lambda r: r["s"] is None, _cmp("id", lambda v: v < 60))),
    ("d = DATE'2024-01-04'", _cmp("d", lambda v: v == dt.date(2024, 1, 4))),
    (
        "ts > TIMESTAMP'2024-01-03 01:00:00.000001'",
        _cmp("ts", lambda v: v > T0 + dt.timedelta(days=2, hours=1, microseconds=1)),
    ),
    (
        "amount < -1.5 OR amount IS NULL",
        lambda r: True if r["amount"] is None else r["amount"] < Decimal("-1.5"),
    ),
    (
        "st.x = 4 AND st.y IS NOT NULL",
        _and(_cmp("st.x", lambda v: v == 4), lambda r: _get(r, "st.y") is not None),
    ),
    ("st IS NULL", lambda r: r["st"] is None),
    (
        "id % 7 = 0 AND NOT (s = 'bee')",
        _and(_cmp("id", lambda v: v % 7 == 0), _not(_cmp("s", lambda v: v == "bee"))),
    ),
]


@pytest.fixture
def two_files(tmp_path: Path) -> tuple[TableLayout, list[Path]]:
    root = tmp_path / "t"
    sorted_file = write(root / "a.parquet", make_rows(100, 1))
    shuffled = write(root / "b.parquet", make_rows(95, 2, sorted_ids=False), rg=7)
    return layout(root, delta_schema(DELTA_FIELDS)), [sorted_file, shuffled]


@pytest.mark.parametrize(("sql", "fn"), CASES, ids=[c[0] for c in CASES])
def test_matches_are_the_rows_python_finds(
    two_files: tuple[TableLayout, list[Path]], sql: str, fn: Callable[[Row], Any]
) -> None:
    table, paths = two_files
    files = [scan_file(table, p.name) for p in paths]
    calls: list[int] = []
    got = find(table, files, sql, progress=calls.append)
    assert got == [raw_matches(p, fn) for p in paths]
    assert calls == [1, 1]


class _Reads:
    """Records the row groups `iter_file_batches` is asked for, per file."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, list[int] | None, list[str] | None]] = []
        real = arrow_scan.iter_file_batches

        def spy(
            storage: Storage, location: str, columns: list[str] | None = None, **kw: Any
        ) -> Any:
            self.calls.append((location.rsplit("/", 1)[-1], kw.get("row_groups"), columns))
            return real(storage, location, columns=columns, **kw)

        monkeypatch.setattr(arrow_scan, "iter_file_batches", spy)

    def groups(self) -> list[int]:
        return sorted(g for _, groups, _ in self.calls for g in (groups or []))


def test_row_group_pruning_reads_only_undecided_groups(
    two_files: tuple[TableLayout, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    table, [sorted_file, _] = two_files
    file = scan_file(table, sorted_file.name)
    reads = _Reads(monkeypatch)
    # 25..34 straddles row groups 2 and 3 (10 rows each): only those two are read.
    assert find(table, [file], "id BETWEEN 25 AND 34") == [set(range(25, 35))]
    assert reads.groups() == [2, 3]
    assert all(columns == ["id"] for _, _, columns in reads.calls)
    # Whole row groups from statistics alone: nothing read.
    reads.calls.clear()
    assert find(table, [file], "id >= 50") == [set(range(50, 100))]
    assert find(table, [file], "id = 1000 OR id < 0") == [set()]
    assert reads.calls == []
    # 45..54: group 4 read, group 5 all from stats, the rest skipped.
    assert find(table, [file], "id >= 45 AND id < 60") == [set(range(45, 60))]
    assert reads.groups() == [4]
    # A date predicate (d = id // 10 days) prunes the same way.
    reads.calls.clear()
    assert find(table, [file], "d = DATE'2024-01-04'") == [set(range(30, 40))]
    assert reads.calls == []


def test_rows_of_the_existing_dv_are_never_returned(
    two_files: tuple[TableLayout, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    table, paths = two_files
    deleted = [BitMap64([0, 5, 25, 26, 50, 51, 99]), BitMap64(range(0, 95, 3))]
    files = [scan_file(table, p.name, deleted=d) for p, d in zip(paths, deleted, strict=True)]
    for sql, fn in CASES:
        got = find(table, files, sql)
        want = [raw_matches(p, fn) - set(d) for p, d in zip(paths, deleted, strict=True)]
        assert got == want, sql
    # Also for whole row groups taken from statistics (group 5 = ids 50..59).
    reads = _Reads(monkeypatch)
    assert find(table, files[:1], "id >= 50 AND id < 60") == [set(range(52, 60))]
    assert reads.calls == []


def test_columns_missing_from_an_older_file_read_as_null(tmp_path: Path) -> None:
    root = tmp_path / "t"
    old_schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    old = write(
        root / "old.parquet",
        [{"id": i, "s": "a" if i % 2 else None} for i in range(30)],
        old_schema,
    )
    new_schema = old_schema.append(pa.field("extra", pa.string()))
    new_rows = [{"id": 100 + i, "s": "b", "extra": None if i % 3 == 0 else "x"} for i in range(30)]
    new = write(root / "new.parquet", new_rows, new_schema)
    fields = [("id", "long"), ("s", "string"), ("extra", "string")]
    table = layout(root, delta_schema(fields))
    files = [scan_file(table, "old.parquet"), scan_file(table, "new.parquet")]
    assert find(table, files, "extra IS NULL") == [
        set(range(30)),
        {i for i in range(30) if i % 3 == 0},
    ]
    assert find(table, files, "extra = 'x'") == [set(), {i for i in range(30) if i % 3}]
    assert find(table, files, "extra IS NULL AND s IS NOT NULL") == [
        {i for i in range(30) if i % 2},
        {i for i in range(30) if i % 3 == 0},
    ]
    assert find(table, files, "NOT (extra = 'x') OR id = 3") == [{3}, set()]
    assert raw_matches(old, lambda r: r.get("extra") is None) == set(range(30))
    assert len(raw_matches(new, lambda r: r["extra"] is None)) == 10


def test_partition_values_are_columns(tmp_path: Path) -> None:
    root = tmp_path / "t"
    schema = pa.schema([("id", pa.int64())])
    write(root / "part=a" / "f.parquet", [{"id": i} for i in range(20)], schema)
    write(root / "part=b" / "f.parquet", [{"id": i} for i in range(20)], schema)
    write(
        root / "part=__HIVE_DEFAULT_PARTITION__" / "f.parquet",
        [{"id": i} for i in range(20)],
        schema,
    )
    fields = [("id", "long"), ("part", "string"), ("day", "date")]
    table = layout(root, delta_schema(fields), partitions=("part", "day"))
    files = [
        scan_file(table, "part=a/f.parquet", {"part": "a", "day": "2024-01-02"}),
        scan_file(table, "part=b/f.parquet", {"part": "b", "day": "2024-01-03"}),
        scan_file(table, "part=__HIVE_DEFAULT_PARTITION__/f.parquet", {"part": None, "day": None}),
    ]
    assert find(table, files, "part = 'a' AND id < 5") == [set(range(5)), set(), set()]
    assert find(table, files, "part IS NULL OR (id = 7 AND day > DATE'2024-01-02')") == [
        set(),
        {7},
        set(range(20)),
    ]
    assert find(table, files, "id + length(part) = 3") == [{2}, {2}, set()]


def test_column_mapping_reads_physical_names(tmp_path: Path) -> None:
    root = tmp_path / "t"
    mapping = {"id": "col-aaa", "s": "col-bbb", "st": "col-ccc"}
    physical = pa.schema(
        [
            ("col-aaa", pa.int64()),
            ("col-bbb", pa.string()),
            ("col-ccc", pa.struct([("x", pa.int64())])),
        ]
    )
    rows = [
        {"col-aaa": i, "col-bbb": "s" if i % 4 else None, "col-ccc": {"x": i % 5}}
        for i in range(40)
    ]
    path = write(root / "f.parquet", rows, physical)
    st_type = {
        "type": "struct",
        "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": {}}],
    }
    table = layout(
        root, delta_schema([("id", "long"), ("s", "string"), ("st", st_type)], mapping), mode="name"
    )
    got = find(table, [scan_file(table, "f.parquet")], "id >= 30 OR (s IS NULL AND st.x = 0)")
    want = raw_matches(
        path, lambda r: r["col-aaa"] >= 30 or (r["col-bbb"] is None and r["col-ccc"]["x"] == 0)
    )
    assert got == [want] and want


def test_row_groups_larger_than_a_batch_keep_their_row_indexes(tmp_path: Path) -> None:
    root = tmp_path / "t"
    n = 200_000
    schema = pa.schema([("id", pa.int64()), ("k", pa.int64())])
    table_data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "k": pa.array([i * 7919 % 100_003 for i in range(n)], pa.int64()),
        }
    )
    path = root / "big.parquet"
    root.mkdir(parents=True)
    pq.write_table(table_data, path, row_group_size=150_000)
    table = layout(root, delta_schema([("id", "long"), ("k", "long")]))
    got = find(table, [scan_file(table, "big.parquet")], "k < 40 OR id IN (65535, 65536, 150000)")
    ks = table_data.column("k").to_pylist()
    want = {i for i in range(n) if ks[i] < 40} | {65535, 65536, 150_000}
    assert got == [want]
    assert schema.names == table_data.schema.names


def test_integer_overflow_is_a_predicate_error(tmp_path: Path) -> None:
    """ANSI Spark fails a statement on integer overflow; dvtool reports it as a user error."""
    import deltalake

    from dvtool.commands.delete.command import DeleteRequest, run_delete
    from dvtool.delta.log.reader import open_log
    from dvtool.errors import PredicateError

    deltalake.write_deltalake(str(tmp_path), pa.table({"x": pa.array([2**62, 1], pa.int64())}))
    with pytest.raises(PredicateError, match="cannot be evaluated"):
        run_delete(open_log(str(tmp_path)), DeleteRequest("x * 4 > 0", mode="cow"))


def test_scan_opens_each_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Footer statistics and row groups come from one open: one request per file, not two."""
    import deltalake

    from dvtool.commands.delete.command import DeleteRequest, run_delete
    from dvtool.delta.log.reader import open_log
    from dvtool.storage.table_storage import Storage

    for k in range(3):
        data = pa.table({"id": pa.array(range(k * 10, k * 10 + 10), pa.int64())})
        deltalake.write_deltalake(str(tmp_path), data, mode="append")
    opened: list[str] = []
    original = Storage.open_parquet

    def counting(self: Storage, location: str) -> object:
        opened.append(location)
        return original(self, location)

    monkeypatch.setattr(Storage, "open_parquet", counting)
    result = run_delete(open_log(str(tmp_path)), DeleteRequest("id % 3 = 0", dry_run=True))
    assert result.files_scanned == 3
    assert sorted(opened) == sorted(set(opened)) and len(opened) == 3
    assert result.metrics["numDeletedRows"] == sum(1 for i in range(30) if i % 3 == 0)
