"""A rewrite never changes a value (issue 22): extreme values through purge, compaction,
copy-on-write delete and downgrade, on the arrow engine and on Spark.

Each example is a table of 2-3 files written by pyarrow, each file with its own physical
encoding of the same table columns: timestamps as INT96 (`use_deprecated_int96_timestamps`,
Spark's legacy encoding), INT64 milliseconds, microseconds or nanoseconds (also inside a
struct, a list and a map); decimals of precision 9 and 18 as INT32/INT64 or as
FIXED_LEN_BYTE_ARRAY, precision 38 always the latter; strings as string, large_string,
string_view or dictionary; dates from 0001-01-01 to 9999-12-31. Every rewrite path runs on
a fresh copy of the table and must leave exactly the rows the original files hold (read
with pyarrow, INT96 as microseconds: `tests.oracles.raw_rows`) minus the deleted ones, each
value unchanged, in new files whose statistics are those of the values written.

A value the table's type cannot hold exactly (nanoseconds below a microsecond) is refused
with an error naming the file and the column, on both engines.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Context, Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dvtool.commands.delete.command import DeleteRequest, run_delete
from dvtool.commands.downgrade.command import run_downgrade
from dvtool.commands.optimize.command import run_optimize
from dvtool.commands.optimize.plan import OptimizeRequest
from dvtool.delta.log.reader import open_log
from dvtool.engines.arrow import ArrowEngine
from dvtool.engines.base import Engine
from dvtool.errors import DvtoolError, UnrepresentableValueError
from tests.oracles import canon, raw_rows, replay_json
from tests.writers import (
    DeltaLog,
    compact_json,
    delta_field,
    metadata_action,
    protocol,
    spark_int96_table,
)

UTC = dt.timezone.utc
MIN_US = -62_135_596_800_000_000  # 0001-01-01 00:00:00
MAX_US = 253_402_300_799_999_999  # 9999-12-31 23:59:59.999999
NS_MIN_US = -(2**63) // 1000 + 1  # the int64 nanosecond range, in whole microseconds
NS_MAX_US = (2**63 - 1) // 1000
MIN_DAY, MAX_DAY = -719_162, 2_932_896  # 0001-01-01, 9999-12-31 as days since the epoch
TS_ENCODINGS = ("int96", "ms", "us", "ns")
STRING_TYPES = {
    "string": pa.string(),
    "large_string": pa.large_string(),
    "string_view": pa.string_view(),
    "dictionary": pa.dictionary(pa.int32(), pa.string()),
}
DECIMALS = {"small": (9, 2), "mid": (18, 6), "wide": (38, 18)}
FIELDS = [
    delta_field("id", "long"),
    delta_field("ts", "timestamp"),
    delta_field("ntz", "timestamp_ntz"),
    delta_field("day", "date"),
    *(delta_field(name, f"decimal({p},{s})") for name, (p, s) in DECIMALS.items()),
    delta_field("s", "string"),
    delta_field(
        "span",
        {
            "type": "struct",
            "fields": [delta_field("at", "timestamp"), delta_field("n", "decimal(18,6)")],
        },
    ),
    delta_field("stamps", {"type": "array", "elementType": "timestamp", "containsNull": True}),
    delta_field(
        "named",
        {"type": "map", "keyType": "string", "valueType": "timestamp", "valueContainsNull": True},
    ),
]
_EXACT = Context(prec=60)  # 38 digits never rounded
FEATURES = ["deletionVectors", "timestampNtz"]


@dataclass(frozen=True)
class FileSpec:
    """One data file: its physical encodings and its rows (timestamps as microseconds)."""

    ts: str  # one of TS_ENCODINGS
    decimal_as_integer: bool
    string_type: str
    rows: tuple[dict[str, Any], ...]


def _micros(encoding: str) -> st.SearchStrategy[int]:
    """Timestamps (microseconds) the encoding holds exactly, extremes favoured."""
    lo, hi = (NS_MIN_US, NS_MAX_US) if encoding == "ns" else (MIN_US, MAX_US)
    edges = st.sampled_from([lo, hi, 0, -1, 1, hi - 86_400_000_000 + 1])
    value = st.one_of(edges, st.integers(lo, hi))
    return value.map(lambda v: v - v % 1000) if encoding == "ms" else value


def _decimal(precision: int, scale: int) -> st.SearchStrategy[Decimal]:
    top = 10**precision - 1
    unscaled = st.one_of(st.sampled_from([top, -top, 0, 1, -1]), st.integers(-top, top))
    return unscaled.map(lambda u: Decimal(u).scaleb(-scale, _EXACT))


@st.composite
def _row(draw: st.DrawFn, encoding: str) -> dict[str, Any]:
    micros = _micros(encoding)
    maybe = lambda s: st.one_of(st.none(), s)  # noqa: E731
    return {
        "ts": draw(maybe(micros)),
        "ntz": draw(maybe(micros)),
        "day": draw(maybe(st.sampled_from([MIN_DAY, MAX_DAY, 0]) | st.integers(MIN_DAY, MAX_DAY))),
        **{name: draw(maybe(_decimal(p, s))) for name, (p, s) in DECIMALS.items()},
        "s": draw(maybe(st.text(max_size=6))),
        "span": draw(maybe(st.tuples(maybe(micros), maybe(_decimal(18, 6))))),
        "stamps": draw(maybe(st.lists(maybe(micros), max_size=3))),
        "named": draw(maybe(st.dictionaries(st.text(max_size=3), maybe(micros), max_size=2))),
    }


@st.composite
def file_specs(draw: st.DrawFn) -> list[FileSpec]:
    files = []
    for _ in range(draw(st.integers(2, 3))):
        encoding = draw(st.sampled_from(TS_ENCODINGS))
        rows = draw(st.lists(_row(encoding), min_size=2, max_size=5))
        files.append(
            FileSpec(
                encoding,
                draw(st.booleans()),
                draw(st.sampled_from(sorted(STRING_TYPES))),
                tuple(rows),
            )
        )
    return files


# -- writing the files and the table ------------------------------------------------------------


def _timestamps(values: Sequence[int | None], encoding: str, tz: str | None) -> pa.Array:
    """Microseconds as the encoding's arrow type (INT96 is written from microseconds)."""
    micros = pa.array(values, pa.int64())
    if encoding == "ms":
        return pa.array([None if v is None else v // 1000 for v in values], pa.timestamp("ms", tz))
    if encoding == "ns":
        return pa.array([None if v is None else v * 1000 for v in values], pa.timestamp("ns", tz))
    return micros.cast(pa.timestamp("us", tz))


def _file_table(spec: FileSpec, first_id: int) -> pa.Table:
    rows = spec.rows
    enc = spec.ts

    def column(name: str) -> list[Any]:
        return [r[name] for r in rows]

    spans = column("span")
    at = _timestamps([None if s is None else s[0] for s in spans], enc, "UTC")
    n = pa.array([None if s is None else s[1] for s in spans], pa.decimal128(18, 6))
    span = pa.StructArray.from_arrays(
        [at, n], names=["at", "n"], mask=pa.array([s is None for s in spans])
    )
    lists = column("stamps")
    flat = [v for values in lists if values is not None for v in values]
    offsets = [0]
    for values in lists:
        offsets.append(offsets[-1] + (len(values) if values is not None else 0))
    stamps = pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()),
        _timestamps(flat, enc, "UTC"),
        mask=pa.array([v is None for v in lists]),
    )
    maps = column("named")
    keys = [k for m in maps if m is not None for k in m]
    items = [v for m in maps if m is not None for v in m.values()]
    map_offsets = [0]
    for m in maps:
        map_offsets.append(map_offsets[-1] + (len(m) if m is not None else 0))
    named = pa.MapArray.from_arrays(
        pa.array(map_offsets, pa.int32()),
        pa.array(keys, pa.string()),
        _timestamps(items, enc, "UTC"),
        mask=pa.array([m is None for m in maps]),
    )
    strings = pa.array(column("s"), pa.string()).cast(STRING_TYPES[spec.string_type])
    return pa.table(
        {
            "id": pa.array(range(first_id, first_id + len(rows)), pa.int64()),
            "ts": _timestamps(column("ts"), enc, "UTC"),
            "ntz": _timestamps(column("ntz"), enc, None),
            "day": pa.array(column("day"), pa.int32()).cast(pa.date32()),
            **{
                name: pa.array(column(name), pa.decimal128(p, s))
                for name, (p, s) in DECIMALS.items()
            },
            "s": strings,
            "span": span,
            "stamps": stamps,
            "named": named,
        }
    )


def build_table(root: Path, specs: Sequence[FileSpec]) -> Path:
    """The table: commit 0 creates it (deletion vectors enabled), commit 1 adds the files
    with stats holding numRecords only (Delta readers need no more)."""
    log = DeltaLog(root)
    configuration = {"delta.enableDeletionVectors": "true"}
    log.commit(
        [
            protocol(FEATURES, FEATURES),
            metadata_action(FIELDS, configuration=configuration, created_time=log.now()),
        ]
    )
    adds, first_id = [], 0
    for spec in specs:
        data = _file_table(spec, first_id)
        first_id += data.num_rows
        name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        pq.write_table(
            data,
            root / name,
            use_deprecated_int96_timestamps=spec.ts == "int96",
            store_decimal_as_integer=spec.decimal_as_integer,
        )
        body = {
            "path": name,
            "partitionValues": {},
            "size": (root / name).stat().st_size,
            "modificationTime": log.now(),
            "dataChange": True,
            "stats": compact_json({"numRecords": data.num_rows}),
        }
        adds.append({"add": body})
    log.commit(adds)
    return root


# -- the rewrite paths --------------------------------------------------------------------------


def _purge(table: Path, engine: Engine) -> Callable[[int], bool]:
    run_delete(open_log(str(table)), DeleteRequest("id % 2 = 0", mode="dv"), engine=engine)
    run_optimize(open_log(str(table)), OptimizeRequest(purge=True), lambda _: engine)
    return lambda i: i % 2 == 0


def _compaction(table: Path, engine: Engine) -> Callable[[int], bool]:
    run_optimize(open_log(str(table)), OptimizeRequest(), lambda _: engine)
    return lambda i: False


def _copy_on_write(table: Path, engine: Engine) -> Callable[[int], bool]:
    run_delete(open_log(str(table)), DeleteRequest("id % 3 = 1", mode="cow"), engine=engine)
    return lambda i: i % 3 == 1


def _downgrade(table: Path, engine: Engine) -> Callable[[int], bool]:
    arrow = ArrowEngine()  # the DVs are made by the arrow engine; the purge is `engine`'s
    run_delete(open_log(str(table)), DeleteRequest("id % 2 = 1", mode="dv"), engine=arrow)
    run_downgrade(open_log(str(table)), engine_for=lambda _: engine)
    return lambda i: i % 2 == 1


PATHS = {
    "purge": _purge,
    "compaction": _compaction,
    "copy-on-write": _copy_on_write,
    "downgrade": _downgrade,
}


def _stat_text(value: Any) -> Any:
    """A value as Delta's JSON stats hold it: timestamps in milliseconds, floored."""
    if isinstance(value, dt.datetime):
        zone = "" if value.tzinfo is None else "Z"
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        return f"{value.year:04d}-{value:%m-%dT%H:%M:%S}.{value.microsecond // 1000:03d}{zone}"
    if isinstance(value, dt.date):
        return f"{value.year:04d}-{value:%m-%d}"
    return value


def _with_span(values: dict[str, Any]) -> dict[str, Any]:
    """`values` with the fields of its `span` struct as `span.at` and `span.n` too."""
    return {**values, **{f"span.{k}": v for k, v in (values.get("span") or {}).items()}}


def _check_stats(table: Path, add: dict[str, Any]) -> None:
    """The new file's min/max are those of the values it holds (read with pyarrow)."""
    stats = json.loads(add["stats"], parse_float=Decimal)
    data = pq.read_table(table / add["path"])
    assert stats["numRecords"] == data.num_rows
    rows = [_with_span(r) for r in data.to_pylist()]
    mins, maxs = _with_span(stats["minValues"]), _with_span(stats["maxValues"])
    for leaf in ("ts", "ntz", "day", "small", "mid", "wide", "span.at", "span.n"):
        values = [r[leaf] for r in rows if r.get(leaf) is not None]
        if not values:
            assert leaf not in mins
            continue
        assert mins[leaf] == _stat_text(min(values)), leaf
        assert maxs[leaf] == _stat_text(max(values)), leaf


def _canon(rows: Iterable[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """`canon` with timestamp_ntz values as text (canon would take them as local times,
    which overflows at 0001-01-01 east of UTC)."""
    return canon({**r, "ntz": None if r["ntz"] is None else r["ntz"].isoformat()} for r in rows)


def check_rewrite(specs: Sequence[FileSpec], path: str, engine: Engine) -> None:
    """`path` on a fresh table of `specs` keeps every value of the rows it keeps."""
    with tempfile.TemporaryDirectory(prefix="dvtool-values-") as work:
        table = build_table(Path(work) / "t", specs)
        original = raw_rows(table)
        before = {add["path"] for add in replay_json(table)[1].values()}
        deleted = PATHS[path](table, engine)
        expected = _canon(r for r in original if not deleted(r["id"]))
        assert _canon(raw_rows(table)) == expected
        new = [a for a in replay_json(table)[1].values() if a["path"] not in before]
        assert new, f"{path} rewrote no file"
        for add in new:
            _check_stats(table, add)


# -- the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(PATHS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=file_specs())
def test_arrow_rewrites_keep_every_value(path: str, specs: list[FileSpec]) -> None:
    check_rewrite(specs, path, ArrowEngine(threads=2))


def _extremes() -> list[FileSpec]:
    """Two files, INT96 and INT64 nanoseconds, of the extreme values (Spark's few examples)."""
    top = {"small": Decimal("9999999.99"), "mid": Decimal("999999999999.999999")}
    wide = Decimal("99999999999999999999.999999999999999999")
    rows = [
        {"ts": MAX_US, "ntz": MIN_US, "day": MAX_DAY, **top, "wide": wide, "s": "é",
         "span": (MIN_US, -top["mid"]), "stamps": [MAX_US, None], "named": {"to": MAX_US}},
        {"ts": MIN_US, "ntz": MAX_US, "day": MIN_DAY, "small": -top["small"], "mid": None,
         "wide": wide.copy_negate(), "s": None, "span": None, "stamps": None, "named": {"": None}},
        {"ts": None, "ntz": -1, "day": None, "small": None, "mid": top["mid"], "wide": None,
         "s": "", "span": (None, None), "stamps": [], "named": None},
    ]  # fmt: skip
    nanos = [
        {**rows[0], "ts": NS_MAX_US, "ntz": NS_MIN_US, "span": (NS_MIN_US, None),
         "stamps": [NS_MAX_US], "named": {"to": NS_MIN_US}},
        {**rows[1], "ts": NS_MIN_US, "ntz": NS_MAX_US},
    ]  # fmt: skip
    return [
        FileSpec("int96", True, "string_view", tuple(rows)),
        FileSpec("ns", False, "dictionary", tuple(nanos)),
    ]


@pytest.mark.parametrize("path", sorted(PATHS))
def test_spark_rewrites_keep_every_value(path: str, spark_engine: Engine) -> None:
    """The same on Spark (its tasks read with pyarrow; the delete scans with Spark's parquet
    reader): the extreme values, then a few drawn examples."""
    check_rewrite(_extremes(), path, spark_engine)

    @settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(specs=file_specs())
    def drawn(specs: list[FileSpec]) -> None:
        check_rewrite(specs, path, spark_engine)

    drawn()


def test_spark_on_the_spark_written_table(spark_engine: Engine, tmp_path: Path) -> None:
    """Real Spark's INT96 files (`tests.writers.spark_int96_table`) on the Spark engine:
    compaction keeps 9999-12-31 and 0001-01-01; `--where` on them, scanned by Spark's parquet
    reader, selects exactly ids 0 and 4, and the purge keeps every other value."""
    compacted = spark_int96_table(tmp_path / "compacted")
    shutil.copytree(compacted, tmp_path / "purged")
    purged = tmp_path / "purged"
    rows = raw_rows(compacted)
    assert max(r["valid_to"] for r in rows if r["valid_to"]).year == 9999

    run_optimize(open_log(str(compacted)), OptimizeRequest(), lambda _: spark_engine)
    assert len(replay_json(compacted)[1]) == 1
    assert canon(raw_rows(compacted)) == canon(rows)

    where = (
        "valid_to >= TIMESTAMP '9999-12-31 00:00:00' "
        "OR valid_from < TIMESTAMP '0001-01-01 00:00:00.000001'"
    )
    run_delete(open_log(str(purged)), DeleteRequest(where), engine=spark_engine)
    kept = canon(r for r in rows if r["id"] not in (0, 4))
    assert canon(raw_rows(purged)) == kept
    run_optimize(open_log(str(purged)), OptimizeRequest(purge=True), lambda _: spark_engine)
    assert all("deletionVector" not in a for a in replay_json(purged)[1].values())
    assert canon(raw_rows(purged)) == kept


def _nanosecond_table(root: Path) -> Path:
    """A table whose second file holds 1970-01-01 00:00:00.000001001 (INT64 nanoseconds)."""
    table = build_table(root, _extremes())
    adds = sorted(replay_json(table)[1].values(), key=lambda a: a["path"])
    for add in adds:
        path = table / add["path"]
        data = pq.read_table(path, coerce_int96_timestamp_unit="us")
        if data.schema.field("ts").type.unit == "ns":
            ts = pa.array([1001] + [0] * (data.num_rows - 1), pa.timestamp("ns", "UTC"))
            data = data.set_column(1, "ts", ts)
            pq.write_table(data, path)
            return table
    raise AssertionError("no nanosecond file")


# The Spark case asks for `spark_engine` by name: in its group by hand (tests/engines/conftest.py).
SPARK_ENGINE = pytest.mark.xdist_group("spark-engine")


@pytest.mark.parametrize("engine_name", ["arrow", pytest.param("spark", marks=SPARK_ENGINE)])
def test_a_value_the_table_cannot_hold_is_refused(
    engine_name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Nanoseconds below a microsecond are not floored into a timestamp column: the
    rewrite fails naming the file and the column, and commits nothing."""
    table = _nanosecond_table(tmp_path / "t")
    _fix_sizes(table)
    engine: Engine = (
        ArrowEngine() if engine_name == "arrow" else request.getfixturevalue("spark_engine")
    )
    versions = sorted((table / "_delta_log").glob("*.json"))
    with pytest.raises(DvtoolError) as info:
        run_optimize(open_log(str(table)), OptimizeRequest(), lambda _: engine)
    message = str(info.value)
    assert "column ts of " in message and ".parquet" in message, message
    assert "would lose data" in message, message
    if engine_name == "arrow":
        assert isinstance(info.value, UnrepresentableValueError)
        assert info.value.exit_code == 6
    assert sorted((table / "_delta_log").glob("*.json")) == versions


def test_a_scan_refuses_it_too(tmp_path: Path) -> None:
    """`--where` on that column fails the same way instead of comparing a floored value."""
    table = _nanosecond_table(tmp_path / "t")
    _fix_sizes(table)
    request = DeleteRequest("ts < TIMESTAMP '1970-01-01 00:00:00.000002'", mode="dv")
    with pytest.raises(UnrepresentableValueError, match=r"column ts of .*parquet"):
        run_delete(open_log(str(table)), request, engine=ArrowEngine())


def _fix_sizes(table: Path) -> None:
    """Rewrite commit 1 with the files' current sizes (a file was replaced in place)."""
    commit = table / "_delta_log" / f"{1:020d}.json"
    actions = [json.loads(line) for line in commit.read_text().splitlines()]
    for action in actions:
        add = action["add"]
        add["size"] = (table / add["path"]).stat().st_size
    commit.write_text("".join(compact_json(a) + "\n" for a in actions))
