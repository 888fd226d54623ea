"""Random tables of every type: the statistics taken from the writer's parquet footer are,
byte for byte, the statistics computed from the data.

Each example draws a table (0 to 40 rows) of integers of every width, signed and unsigned,
floats with NaN, -0.0, 0.0 and infinities, decimals of several precisions and scales,
strings (long, non-ASCII, supplementary-plane, U+10FFFF runs at the 32-character cut),
binaries, booleans, dates, timestamps in every unit with and without a zone, structs nested
in structs (children holding values under null parents), arrays, maps, all-null and
null-typed columns, a dictionary column and a dotted column name; then batches of a random
size, row groups of a random size and a random `delta.dataSkippingNumIndexedCols` or
`delta.dataSkippingStatsColumns`. `write_data_file` writes it through the real writing path
(footer statistics, `StatsCollector.use_footer`); the oracle is a `StatsCollector` that
computes everything from the same batches (checked against plain python and delta-rs in
tests/delta/protocol/test_stats_collect.py). The file is never read back: no value is over pyarrow's
4 KiB statistics limit (tests/data_files/test_footer_stats.py covers those).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dvtool.data_files import write_data_file, writing
from dvtool.delta.protocol.stats_collect import StatsCollector, stats_json
from dvtool.storage.table_storage import Storage

MAX_CHAR = "\U0010ffff"
MIN_DAY, MAX_DAY = -719_162, 2_932_896  # 0001-01-01 .. 9999-12-31
MIN_MS, MAX_MS = MIN_DAY * 86_400_000, (MAX_DAY + 1) * 86_400_000 - 1

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=70)
TRICKY_TEXT = st.sampled_from(
    [
        "",
        "a" * 32,
        "a" * 33,
        "z" * 31 + MAX_CHAR * 3 + "a",
        "z" * 32 + MAX_CHAR * 40,
        "\U0001f600" * 20,
        "é" * 40,
        "\x7f" * 35,
        "\x00",
        "\ufffe" * 33,
    ]
)
STRINGS = TEXT | TRICKY_TEXT


def _decimal(precision: int, scale: int) -> st.SearchStrategy[Decimal]:
    bound = 10**precision - 1
    return st.integers(-bound, bound).map(lambda u: Decimal(f"{u}E-{scale}"))  # exact


def _floats(width: int) -> st.SearchStrategy[float]:
    special = st.sampled_from([0.0, -0.0, float("nan"), float("inf"), float("-inf")])
    return st.floats(width=width) | special


def _ints(bits: int, signed: bool) -> st.SearchStrategy[int]:
    if signed:
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return st.integers(0, 2**bits - 1)


def _extremes(values: st.SearchStrategy[Any], *extremes: Any) -> st.SearchStrategy[Any]:
    return values | st.sampled_from(extremes)


# (name, arrow type, value strategy): flat columns; None values are added to every strategy.
FLAT: list[tuple[str, pa.DataType, st.SearchStrategy[Any]]] = [
    ("i8", pa.int8(), _ints(8, True)),
    ("i16", pa.int16(), _ints(16, True)),
    ("i32", pa.int32(), _extremes(_ints(32, True), -(2**31), 2**31 - 1)),
    ("i64", pa.int64(), _extremes(_ints(64, True), -(2**63), 2**63 - 1, 0)),
    ("u8", pa.uint8(), _ints(8, False)),
    ("u16", pa.uint16(), _ints(16, False)),
    ("u32", pa.uint32(), _extremes(_ints(32, False), 2**31, 2**32 - 1)),
    ("u64", pa.uint64(), _extremes(_ints(64, False), 2**63, 2**64 - 1)),
    ("f32", pa.float32(), _floats(32)),
    ("f64", pa.float64(), _floats(64)),
    ("dec5_2", pa.decimal128(5, 2), _decimal(5, 2)),
    ("dec18_0", pa.decimal128(18, 0), _decimal(18, 0)),
    ("dec19_4", pa.decimal128(19, 4), _decimal(19, 4)),
    ("dec38_10", pa.decimal128(38, 10), _decimal(38, 10)),
    ("dec38_0", pa.decimal128(38, 0), _extremes(_decimal(38, 0), Decimal(10**38 - 1))),
    ("dec4_4", pa.decimal128(4, 4), _decimal(4, 4)),
    ("s", pa.string(), STRINGS),
    ("ls", pa.large_string(), STRINGS),
    ("bin", pa.binary(), st.binary(max_size=40)),
    ("lbin", pa.large_binary(), st.binary(max_size=8)),
    ("flag", pa.bool_(), st.booleans()),
    ("day", pa.date32(), st.integers(MIN_DAY, MAX_DAY)),
    ("day64", pa.date64(), st.integers(MIN_DAY, MAX_DAY).map(lambda d: d * 86_400_000)),
    ("ts_us", pa.timestamp("us", "UTC"), st.integers(MIN_MS * 1000, MAX_MS * 1000)),
    ("ts_ntz", pa.timestamp("us"), _extremes(st.integers(-(10**13), 10**13), -1, 0, 999)),
    ("ts_ns", pa.timestamp("ns", "UTC"), st.integers(-(2**63) + 1, 2**63 - 1)),
    ("ts_ms", pa.timestamp("ms"), st.integers(MIN_MS, MAX_MS)),
    ("ts_s", pa.timestamp("s", "America/New_York"), st.integers(MIN_MS // 1000, MAX_MS // 1000)),
    ("a.b", pa.int64(), st.integers(-5, 5)),
    ("col-5f1e-physical", pa.string(), st.sampled_from(["p", "q", "é"])),
]

INNER = pa.struct([("x", pa.int64()), ("d", pa.decimal128(9, 3)), ("u", pa.string())])
POINT = pa.struct(
    [
        ("a", pa.int32()),
        ("s", pa.string()),
        ("t", pa.timestamp("us", "UTC")),
        ("f", pa.float64()),
        ("b", pa.bool_()),
        ("inner", INNER),
    ]
)
LIST = pa.list_(pa.int64())
MAP = pa.map_(pa.string(), pa.int64())
DICT = pa.dictionary(pa.int32(), pa.string())


def _column(draw: st.DrawFn, values: st.SearchStrategy[Any], n: int) -> list[Any]:
    return draw(st.lists(st.none() | values, min_size=n, max_size=n))


def _struct(draw: st.DrawFn, t: pa.StructType, n: int) -> pa.StructArray:
    """A struct array whose children may hold values under null parents (parquet writes no
    value there; Delta counts the child as null)."""
    children = []
    for f in t:
        if pa.types.is_struct(f.type):
            children.append(_struct(draw, f.type, n))
        else:
            strategy = dict((name, s) for name, _, s in FLAT)
            source = {"a": "i32", "s": "s", "t": "ts_us", "f": "f64", "b": "flag", "x": "i64"}
            source.update({"d": "dec18_0", "u": "s"})
            values = _column(draw, strategy[source[f.name]], n)
            if f.name == "d":
                values = [None if v is None else Decimal(f"{int(v) % 10**9}E-3") for v in values]
            children.append(pa.array(values, f.type))
    mask = pa.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), pa.bool_())
    return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(0, 40))
    arrays: dict[str, pa.Array] = {}
    for name, t, values in FLAT:
        arrays[name] = pa.array(_column(draw, values, n), t)
    arrays["point"] = _struct(draw, POINT, n)
    lists = st.lists(st.none() | st.integers(-3, 3), max_size=3)
    arrays["ints"] = pa.array(_column(draw, lists, n), LIST)
    pairs = st.lists(st.tuples(st.sampled_from("kl"), st.integers(0, 9)), max_size=2)
    arrays["tags"] = pa.array(_column(draw, pairs, n), MAP)
    arrays["cat"] = pa.array(_column(draw, st.sampled_from(["x", "y", "é"]), n), pa.string())
    arrays["cat"] = arrays["cat"].dictionary_encode().cast(DICT)
    arrays["all_null_int"] = pa.nulls(n, pa.int64())
    arrays["all_null_str"] = pa.nulls(n, pa.string())
    arrays["all_null_struct"] = pa.nulls(n, INNER)
    arrays["nothing"] = pa.nulls(n)
    return pa.Table.from_arrays(list(arrays.values()), schema=SCHEMA)


SCHEMA = pa.schema(
    [
        *((name, t) for name, t, _ in FLAT),
        ("point", POINT),
        ("ints", LIST),
        ("tags", MAP),
        ("cat", DICT),
        ("all_null_int", pa.int64()),
        ("all_null_str", pa.string()),
        ("all_null_struct", INNER),
        ("nothing", pa.null()),
    ]
)


INDEXED = (
    st.sampled_from([-1, 0, 1, 32])
    | st.integers(0, 60)
    | st.lists(
        st.sampled_from(["s", "point", "point.inner.d", "point.t", "a.b", "ts_ns", "dec38_0"]),
        unique=True,
    ).map(lambda names: [tuple(n.split(".")) if n != "a.b" else ("a.b",) for n in names])
)


def _computed(table: pa.Table, batches: list[pa.RecordBatch], indexed: Any) -> str:
    collector = StatsCollector(table.schema, indexed)
    for batch in batches:
        collector.update(batch)
    return stats_json(collector.result())


@pytest.fixture
def no_read_back(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> None:
        raise AssertionError("the file was read back: the footer lacked statistics")

    monkeypatch.setattr(writing, "read_back_statistics", refuse)


@pytest.mark.usefixtures("no_read_back")
@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    table=tables(),
    batch_rows=st.integers(1, 20),
    row_group_size=st.integers(1, 50),
    indexed=INDEXED,
)
def test_footer_statistics_are_the_computed_ones(
    tmp_path_factory: pytest.TempPathFactory,
    table: pa.Table,
    batch_rows: int,
    row_group_size: int,
    indexed: Any,
) -> None:
    batches = table.to_batches(max_chunksize=batch_rows)
    storage = Storage.for_table(str(tmp_path_factory.mktemp("random")))
    out = write_data_file(
        storage,
        partition_dir="",
        batches=batches,
        schema=table.schema,
        stats=StatsCollector(table.schema, indexed),
        row_group_size=row_group_size,
    )
    assert out.num_records == table.num_rows
    assert out.stats_json == _computed(table, batches, indexed)


def test_the_random_tables_use_the_footer() -> None:
    """The premise of the property test: most leaves of its tables get their statistics
    from the footer (only floats' and date64's min/max, and the nested, null-typed and
    dictionary columns, are computed)."""
    footer = StatsCollector(SCHEMA, -1).use_footer()
    assert {".".join(c.path) for c in footer if c.bounds} >= {
        "i8", "u64", "dec38_10", "s", "ls", "day", "ts_us", "ts_ns", "ts_s", "point.a",
        "point.inner.d", "point.inner.u", "point.t", "all_null_int", "all_null_struct.x",
    }  # fmt: skip
    assert {".".join(c.path) for c in footer if not c.bounds} == {
        "f32", "f64", "bin", "lbin", "flag", "day64", "point.f", "point.b",
    }  # fmt: skip
    assert not {".".join(c.path) for c in footer} & {"ints", "tags", "cat", "nothing"}
