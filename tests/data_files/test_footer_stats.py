"""Statistics of written files: those taken from the parquet footer equal the computed ones.

`write_data_file` lets the writer's footer metadata give the null counts of plain leaves and
the min/max of integers, strings, date32, timestamps and decimal128, at the top level and in
structs (`StatsCollector.use_footer`), instead of computing them batch by batch. The oracle
is the computed path: a `StatsCollector` that sees every row of the same data (itself
checked against plain python and delta-rs in tests/delta/protocol/test_stats_collect.py); random
tables of every type are in tests/data_files/test_footer_stats_properties.py.
The `stats` JSON must be byte-for-byte the same, for every type, with nulls, NaNs, signed
zeros, long and supplementary-plane strings, strings over pyarrow's 4 KiB statistics limit
(no footer min/max: read back), timestamps with microseconds before and after 1970, one or
many row groups, on local disk and memory:// storage.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dvtool.data_files import WrittenFile, footer_stats, write_data_file, writing
from dvtool.delta.protocol.arrow_types import FIELD_ID_METADATA_KEY
from dvtool.delta.protocol.stats_collect import StatsCollector, stats_json
from dvtool.storage.table_storage import Storage

UTC = timezone.utc
MAX_CHAR = "\U0010ffff"
ROWS = 60


@pytest.fixture(params=["local", "memory"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    if request.param == "local":
        yield Storage.for_table(str(tmp_path / "table"))
    else:
        root = f"memory://dvtool-footer-{uuid.uuid4().hex}"
        yield Storage.for_table(root)
        with contextlib.suppress(FileNotFoundError):
            fsspec.filesystem("memory").rm(root.removeprefix("memory://"), recursive=True)


def _values(n: int, make: Any, null_every: int = 5) -> list[Any]:
    return [None if i % null_every == 3 else make(i) for i in range(n)]


def _string(i: int) -> str:
    # Long values (over 32 characters), supplementary characters and U+10FFFF runs, so the
    # truncated max and its tie-breaker are exercised.
    choices = [
        f"v{i:03d}",
        "é" * 40 + str(i),
        "z" * 31 + MAX_CHAR * 3 + "a",
        "\U0001f600" * 20,
        "",
        "zz" + "x" * 50,
    ]
    return choices[i % len(choices)]


def every_type_table(n: int = ROWS, *, huge_string_at: int | None = None) -> pa.Table:
    """One column per type dvtool writes, with nulls; `huge_string_at` puts a string over
    4 KiB (no footer statistics for its column chunk) in that row."""
    strings = _values(n, _string)
    if huge_string_at is not None:
        strings[huge_string_at] = "\U0010fffe" * 2000  # 8000 bytes, the max
    micros = [
        -86_400_000_001,
        -1,
        0,
        1,
        1_700_000_000_123_456,
        1_700_000_000_123_999,
        253_402_300_799_999_999,
    ]
    point = pa.struct([("a", pa.int32()), ("s", pa.string()), ("t", pa.timestamp("us", "UTC"))])
    columns: dict[str, pa.Array] = {
        "i8": pa.array(_values(n, lambda i: [-128, 127, 0][i % 3]), pa.int8()),
        "i16": pa.array(_values(n, lambda i: i * 1000 - 30_000), pa.int16()),
        "i32": pa.array(_values(n, lambda i: (i - 30) * 70_000_000), pa.int32()),
        "i64": pa.array(_values(n, lambda i: [-(2**63), 2**63 - 1, i][i % 3]), pa.int64()),
        "f32": pa.array(_values(n, lambda i: [1.5, -0.0, 0.0, 3.4e38][i % 4]), pa.float32()),
        "f64": pa.array(
            _values(n, lambda i: [float("nan"), -0.0, 2.5, -1e300][i % 4]), pa.float64()
        ),
        "f64_inf": pa.array(_values(n, lambda i: [float("inf"), 1.0][i % 2]), pa.float64()),
        "dec": pa.array(_values(n, lambda i: Decimal(f"{i - 30}.{i:02d}")), pa.decimal128(10, 2)),
        "dec38": pa.array(_values(n, lambda i: Decimal(i * 10**20 - 10**25)), pa.decimal128(38, 0)),
        "s": pa.array(strings, pa.string()),
        "ls": pa.array(_values(n, lambda i: _string(i + 1)), pa.large_string()),
        "bin": pa.array(_values(n, lambda i: bytes([i % 256]) * 3), pa.binary()),
        "flag": pa.array(_values(n, lambda i: i % 2 == 0), pa.bool_()),
        "day": pa.array(_values(n, lambda i: (i - 30) * 400), pa.date32()),
        "day64": pa.array(_values(n, lambda i: (i - 30) * 86_400_000), pa.date64()),
        "ts_us": pa.array(_values(n, lambda i: micros[i % len(micros)]), pa.timestamp("us", "UTC")),
        "ts_ntz": pa.array(_values(n, lambda i: micros[(i + 2) % len(micros)]), pa.timestamp("us")),
        "ts_s": pa.array(_values(n, lambda i: (i - 30) * 1_000_003), pa.timestamp("s", "UTC")),
        "ts_ms": pa.array(_values(n, lambda i: (i - 30) * 1_000_003), pa.timestamp("ms")),
        "ts_ns": pa.array(
            _values(n, lambda i: (i - 30) * 1_000_000_123_457), pa.timestamp("ns", "UTC")
        ),
        "point": pa.array(
            _values(
                n,
                lambda i: {
                    "a": i,
                    "s": _string(i),
                    "t": datetime(2024, 1, 1, 0, 0, i % 60, 123_456, tzinfo=UTC),
                },
                null_every=7,
            ),
            point,
        ),
        "ints": pa.array(_values(n, lambda i: [i, -i]), pa.list_(pa.int64())),
        "tags": pa.array(_values(n, lambda i: [("k", i)]), pa.map_(pa.string(), pa.int64())),
        "all_null_int": pa.nulls(n, pa.int64()),
        "all_null_str": pa.nulls(n, pa.string()),
        "a.b": pa.array(_values(n, lambda i: 5 - i), pa.int64()),  # dotted: read back
        "col-5f1e-physical": pa.array(_values(n, lambda i: f"p{i % 9}"), pa.string()),
    }
    fields = [
        pa.field(name, array.type, metadata={FIELD_ID_METADATA_KEY: str(k + 1).encode()})
        for k, (name, array) in enumerate(columns.items())
    ]
    return pa.Table.from_arrays(list(columns.values()), schema=pa.schema(fields))


BATCH_ROWS = 17


def computed(table: pa.Table, indexed: Any = -1) -> str:
    """The oracle: statistics computed from every row of the data, in the batches the writer
    gets (which of -0.0 and 0.0 a float min keeps depends on the batches)."""
    collector = StatsCollector(table.schema, indexed)
    for batch in table.to_batches(max_chunksize=BATCH_ROWS):
        collector.update(batch)
    return stats_json(collector.result())


def write(storage: Storage, table: pa.Table, indexed: Any = -1, **options: Any) -> WrittenFile:
    return write_data_file(
        storage,
        partition_dir="",
        batches=table.to_batches(max_chunksize=BATCH_ROWS),
        schema=table.schema,
        stats=StatsCollector(table.schema, indexed),
        **options,
    )


def written(storage: Storage, table: pa.Table, indexed: Any = -1, **options: Any) -> str:
    return write(storage, table, indexed, **options).stats_json


@pytest.mark.parametrize("row_group_size", [1_000_000, 25, 7])
def test_footer_stats_equal_computed_for_every_type(storage: Storage, row_group_size: int) -> None:
    table = every_type_table()
    assert written(storage, table, row_group_size=row_group_size) == computed(table)


@pytest.mark.parametrize("huge_string_at", [2, 58])
def test_strings_without_footer_statistics_are_read_back(
    storage: Storage, huge_string_at: int
) -> None:
    table = every_type_table(huge_string_at=huge_string_at)
    out = write(storage, table, row_group_size=20)
    assert out.stats_json == computed(table)
    # The premise: of three row groups, only the one with the huge string has no min/max.
    with storage.open_parquet(out.location) as source:
        meta = pq.ParquetFile(source).metadata
    column = meta.schema.names.index("s")
    has_min_max = [
        meta.row_group(rg).column(column).statistics.has_min_max
        for rg in range(meta.num_row_groups)
    ]
    assert has_min_max == [k != huge_string_at // 20 for k in range(3)]


@pytest.mark.parametrize(
    "indexed",
    [0, 3, 12, 32, ["s", "ts_us", "point.t", "a.b"], ["point"], []],
    ids=repr,
)
def test_footer_stats_follow_the_indexed_columns(
    storage: Storage, indexed: int | list[str]
) -> None:
    table = every_type_table()
    assert written(storage, table, indexed, row_group_size=25) == computed(table, indexed)


FROM_FOOTER_WITH_BOUNDS = [
    "i8", "i16", "i32", "i64", "dec", "dec38", "s", "ls", "day", "ts_us", "ts_ntz", "ts_s",
    "ts_ms", "ts_ns", "point.a", "point.s", "point.t", "all_null_int", "all_null_str", "a.b",
    "col-5f1e-physical",
]  # fmt: skip
FROM_FOOTER_NULLS_ONLY = ["f32", "f64", "f64_inf", "bin", "flag", "day64"]


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)


def test_footer_statistics_are_used_for_exact_types_only(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The footer path is really taken (else the tests above compare the computed path with
    itself), for exactly the leaves whose footer statistics are exact, and the file is not
    read back."""
    table = every_type_table()
    footer = StatsCollector(table.schema, -1).use_footer()
    assert sorted(_dotted(c.path) for c in footer if c.bounds) == sorted(FROM_FOOTER_WITH_BOUNDS)
    assert sorted(_dotted(c.path) for c in footer if not c.bounds) == sorted(FROM_FOOTER_NULLS_ONLY)
    from_footer: list[str] = []
    add_footer = StatsCollector.add_footer

    def spy(self: StatsCollector, path: tuple[str, ...], *args: Any) -> bool:
        taken = add_footer(self, path, *args)
        if taken:
            from_footer.append(_dotted(path))
        return taken

    def no_read_back(*args: Any) -> None:
        raise AssertionError("read back although the footer has every statistic")

    monkeypatch.setattr(StatsCollector, "add_footer", spy)
    monkeypatch.setattr(writing, "read_back_statistics", no_read_back)
    for row_group_size in (1_000_000, 7):
        from_footer.clear()
        assert written(storage, table, row_group_size=row_group_size) == computed(table)
        assert sorted(from_footer) == sorted(FROM_FOOTER_WITH_BOUNDS + FROM_FOOTER_NULLS_ONLY)


def test_collector_alone_still_computes_everything() -> None:
    """Without a writer's footer, `update` keeps computing every statistic."""
    table = pa.table({"i": [3, 1, None], "s": ["b", "a", None]})
    collector = StatsCollector(table.schema)
    collector.update(table)
    stats = collector.result()
    assert stats["minValues"] == {"i": 1, "s": "a"}
    assert stats["maxValues"] == {"i": 3, "s": "b"}
    assert stats["nullCount"] == {"i": 1, "s": 1}


def _footer_collector() -> StatsCollector:
    schema = pa.schema(
        [
            ("i", pa.int64()),
            ("t", pa.timestamp("us")),
            ("d", pa.date32()),
            ("dec", pa.decimal128(5, 2)),
            ("f", pa.float64()),
        ]
    )
    collector = StatsCollector(schema)
    assert [c.path for c in collector.use_footer()] == [("i",), ("t",), ("d",), ("dec",), ("f",)]
    return collector


@pytest.mark.parametrize(
    ("path", "groups", "unit"),
    [
        (("i",), [(3, 0, "1", "2")], ""),
        (("i",), [(3, 0, True, False)], ""),
        (("i",), [(3, 0, 1.0, 2.0)], ""),
        (("i",), [(3, 0, 5, 2)], ""),  # min above max
        (("i",), [(3, None, 1, 2)], ""),  # no null count
        (("i",), [(3, 4, 1, 2)], ""),  # more nulls than rows
        (("i",), [(3, 0, 1, 2), (3, 1, None, None)], ""),  # values, no min/max
        (("t",), [(3, 0, 1, 2)], ""),  # no unit
        (("t",), [(3, 0, datetime(2024, 1, 1), datetime(2024, 1, 2))], "us"),
        (("d",), [(3, 0, datetime(2024, 1, 1), datetime(2024, 1, 2))], ""),
        (("dec",), [(3, 0, Decimal("1.5"), Decimal("2.50"))], ""),  # another scale
        (("dec",), [(3, 0, 1, 2)], ""),
        (("f",), [(3, None, None, None)], ""),
    ],
    ids=repr,
)
def test_add_footer_refuses_what_is_not_exact(
    path: tuple[str, ...], groups: list[Any], unit: str
) -> None:
    collector = _footer_collector()
    assert not collector.add_footer(path, groups, unit)
    # Nothing was taken: the leaf is still expected, then read back from the data.
    with pytest.raises(RuntimeError, match="footer statistics not given"):
        collector.result()


def test_add_footer_sums_and_merges_row_groups() -> None:
    collector = _footer_collector()
    collector.update(pa.table({"f": [1.5, None, float("nan")]}).to_batches()[0])
    assert collector.add_footer(("i",), [(2, 0, -5, 3), (2, 2, None, None), (3, 1, 0, 9)])
    assert collector.add_footer(("t",), [(4, 1, -1, 1_500)], "us")
    assert collector.add_footer(("d",), [(3, 0, date(2024, 1, 2), date(2024, 1, 3))])
    assert collector.add_footer(("dec",), [(3, 0, Decimal("-1.50"), Decimal("2.00"))])
    assert collector.add_footer(("f",), [(3, 1, None, None)])  # null count only
    stats = collector.result()
    assert stats["nullCount"] == {"i": 3, "t": 1, "d": 0, "dec": 0, "f": 1}
    assert stats["minValues"] == {
        "i": -5,
        "t": "1969-12-31T23:59:59.999",
        "d": "2024-01-02",
        "dec": Decimal("-1.50"),
        "f": 1.5,
    }
    assert stats["maxValues"]["i"] == 9
    assert "f" not in stats["maxValues"]  # a NaN: computed from the data, as before
    with pytest.raises(RuntimeError, match="given already"):
        collector.add_footer(("i",), [])
    with pytest.raises(KeyError):
        collector.add_footer(("missing",), [])


def test_update_from_file_computes_what_the_footer_lacks() -> None:
    collector = _footer_collector()
    data = pa.table(
        {
            "i": [4, None, -2],
            "t": pa.array([1_999, None, None], pa.timestamp("ms")),  # the file's own unit
            "d": pa.array([3, 1, None], pa.date32()),
            "dec": pa.array([Decimal("1.25"), None, None], pa.decimal128(5, 2)),
            "f": [1.0, 2.0, None],
        }
    )
    for name in ("i", "t", "d", "dec", "f"):
        collector.update_from_file(data.to_batches(max_chunksize=2), [(name,)])
    collector.num_records = 3
    stats = collector.result()
    assert stats["nullCount"] == {"i": 1, "t": 2, "d": 1, "dec": 2, "f": 1}
    assert stats["minValues"] == {
        "i": -2,
        "t": "1970-01-01T00:00:01.999",
        "d": "1970-01-02",
        "dec": Decimal("1.25"),
    }


def test_use_footer_comes_before_the_rows() -> None:
    collector = StatsCollector(pa.schema([("i", pa.int64())]))
    collector.update(pa.table({"i": [1]}))
    with pytest.raises(RuntimeError, match="before the first rows"):
        collector.use_footer()


@pytest.mark.parametrize("what", ["string", "binary"])
def test_values_over_the_statistics_limit_in_nested_leaves_are_read_back(
    storage: Storage, what: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    huge: Any = "\u00e9" * 3000 if what == "string" else b"x" * 5000
    kind = pa.string() if what == "string" else pa.binary()
    inner = pa.struct([("v", kind), ("n", pa.int32())])
    values = [
        {
            "v": huge
            if i == 5
            else None
            if i % 4 == 1
            else (f"v{i}" if what == "string" else bytes([i])),
            "n": i,
        }
        for i in range(12)
    ]
    table = pa.table(
        {
            "s": pa.array([v if i != 3 else None for i, v in enumerate(values)], inner),
            "top": pa.array([huge if i == 8 else None for i in range(12)], kind),
        }
    )
    read_back: list[list[tuple[str, ...]]] = []
    real = writing.read_back_statistics

    def spy(parquet: Any, stats: StatsCollector, paths: list[tuple[str, ...]]) -> None:
        read_back.append(list(paths))
        real(parquet, stats, paths)

    monkeypatch.setattr(writing, "read_back_statistics", spy)
    assert written(storage, table, row_group_size=4) == computed(table)
    # Strings over 4 KiB have no footer min/max in their row groups; binaries need none.
    assert read_back == ([[("s", "v"), ("top",)]] if what == "string" else [])


ROW = st.fixed_dictionaries(
    {
        "i": st.none() | st.integers(-(2**63), 2**63 - 1),
        "s": st.none() | st.text(st.characters(blacklist_categories=("Cs",)), max_size=70),
        "t": st.none() | st.integers(-(2**62), 2**62),
        "d": st.none() | st.integers(-700_000, 2_900_000),
    }
)
RANDOM_SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("s", pa.string()),
        ("t", pa.timestamp("ns", "UTC")),
        ("d", pa.date32()),
    ]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(ROW, max_size=40), row_group_size=st.integers(1, 50))
def test_footer_stats_equal_computed_on_random_rows(
    tmp_path_factory: pytest.TempPathFactory, rows: list[dict[str, Any]], row_group_size: int
) -> None:
    table = pa.Table.from_pylist(rows, schema=RANDOM_SCHEMA)
    storage = Storage.for_table(str(tmp_path_factory.mktemp("random")))
    assert written(storage, table, row_group_size=row_group_size) == computed(table)


def test_leaves_after_arrays_maps_and_extensions_are_found_by_position(storage: Storage) -> None:
    """Parquet leaves are matched to arrow leaves by position: columns written as several
    leaves (arrays of structs, maps of structs, extension types) come before the leaves
    whose statistics the footer gives, under names with dots."""
    pair = pa.struct([("a", pa.int64()), ("b", pa.string())])
    dotted = pa.struct([("x.y", pa.string()), ("deep", pa.struct([("t", pa.int16())]))])
    n = 30
    columns: dict[str, pa.Array] = {
        "pairs": pa.array(_values(n, lambda i: [{"a": i, "b": "x"}, None]), pa.list_(pair)),
        "by_key": pa.array(
            _values(n, lambda i: [(f"k{i}", {"a": -i, "b": None})]), pa.map_(pa.string(), pair)
        ),
        "fixed": pa.array(_values(n, lambda i: [i, i + 1]), pa.list_(pa.int32(), 2)),
        "x.y": pa.array(_values(n, lambda i: i * 3 - 40), pa.int64()),
        "s": pa.array(
            _values(n, lambda i: {"x.y": f"s{i}", "deep": {"t": i}}, null_every=4), dotted
        ),
    }
    if hasattr(pa, "uuid"):
        columns["id"] = pa.ExtensionArray.from_storage(
            pa.uuid(), pa.array(_values(n, lambda i: bytes([i]) * 16), pa.binary(16))
        )
    columns["last"] = pa.array(_values(n, lambda i: date(2024, 1, 1 + i % 28)), pa.date32())
    table = pa.table(columns)
    collector = StatsCollector(table.schema, -1)
    footer = [".".join(c.path) for c in collector.use_footer()]
    assert footer == ["x.y", "s.x.y", "s.deep.t", "last"]
    with storage.open_parquet(write(storage, table).location) as source:
        meta = pq.ParquetFile(source).metadata
    layout = footer_stats._leaf_layout(meta.schema, table.schema)
    # Every non-repeated leaf but the extension column's (taken as nested: not in footer).
    assert {".".join(path): meta.schema.column(i).path for path, (i, _) in layout.items()} == {
        name: name for name in footer
    }
    assert layout[("last",)] == (meta.num_columns - 1, "")
    assert written(storage, table, row_group_size=7) == computed(table)
