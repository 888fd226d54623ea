"""Acceptance tests of `dvtool delete`, checked against independent oracles.

Expected rows are always computed here, from the ORIGINAL data (or from what an independent
reader returned before the delete), by a Python reference evaluation of the predicate with
Spark's three-valued logic: a row is deleted iff the predicate is TRUE. Every predicate is
built once as a `P` that carries both its Spark SQL text (given to dvtool) and its Python
evaluation (the oracle), so the two cannot drift apart.

After each delete the rows are read by:
- polars `read_delta` (deletion vectors applied by delta-kernel-rs),
- deltalake's DataFusion `QueryBuilder` (deletion vectors applied by delta-rs),
- a raw reader written here: JSON commits replayed by (path, DV id), parquet files read with
  pyarrow, DVs decoded by pyroaring from the bytes the descriptors point to,
and dvtool's own logical row count (`inspect_summary.summarize`) is checked too.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import operator
import os
import random
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result
from deltalake import DeltaTable, QueryBuilder, WriterProperties, write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st

import dvtool.commands.delete.command as delete_module
import dvtool.data_files as data_files
import dvtool.engines.arrow_scan as arrow_scan
from dvtool.cli import cli
from dvtool.commands.delete.command import DeleteRequest, DeleteResult, run_delete
from dvtool.commands.enable import run_enable
from dvtool.commands.inspect.columns import count_missing_rows
from dvtool.commands.inspect.summary import summarize
from dvtool.delta.log.reader import open_log
from dvtool.delta.log.writer import LogWriter
from dvtool.errors import CommitOutcomeUnknownError, WriteRefusedError
from dvtool.storage.table_storage import Storage
from tests.oracles import (
    COMMIT,
    canon,
    commit_actions,
    commit_versions,
    copy_golden,
    dv_file,
    dv_key,
    raw_rows,
    read_dv,
    replay_json,
    tree_hashes,
)

UTC = dt.timezone.utc
CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.parquet$")

# -- predicates: Spark SQL text + Python three-valued reference evaluation --------------------

Row = dict[str, Any]


@dataclass(frozen=True)
class P:
    """An expression: its Spark SQL text and its value on a row (None is SQL NULL)."""

    sql: str
    fn: Callable[[Row], Any]

    def __repr__(self) -> str:
        return self.sql


def col(name: str) -> P:
    parts = name.split(".")

    def get(row: Row) -> Any:
        value = row[parts[0]]
        for part in parts[1:]:
            value = None if value is None else value[part]
        return value

    return P(name, get)


def sql_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and math.isnan(value):
        return "CAST('NaN' AS DOUBLE)"
    if isinstance(value, (int, Decimal, float)):
        return str(value)
    if isinstance(value, dt.datetime):
        fraction = f".{value.microsecond:06d}" if value.microsecond else ""
        return f"TIMESTAMP'{value.astimezone(UTC):%Y-%m-%d %H:%M:%S}{fraction}'"
    if isinstance(value, dt.date):
        return f"DATE'{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise TypeError(value)


def lit(value: Any) -> P:
    return P(sql_literal(value), lambda row: value)


OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _spark_order(value: Any) -> Any:
    """Spark orders doubles with NaN above everything and NaN = NaN; -0.0 = 0.0."""
    if isinstance(value, float):
        return (1, 0.0) if math.isnan(value) else (0, value + 0.0)
    return value


def cmp(op: str, a: P, b: P) -> P:
    def f(row: Row) -> Any:
        x, y = a.fn(row), b.fn(row)
        if x is None or y is None:
            return None
        return OPS[op](_spark_order(x), _spark_order(y))

    return P(f"({a.sql} {op} {b.sql})", f)


def and_(a: P, b: P) -> P:
    def f(row: Row) -> Any:
        x, y = a.fn(row), b.fn(row)
        if x is False or y is False:
            return False
        return None if x is None or y is None else True

    return P(f"({a.sql} AND {b.sql})", f)


def or_(a: P, b: P) -> P:
    def f(row: Row) -> Any:
        x, y = a.fn(row), b.fn(row)
        if x is True or y is True:
            return True
        return None if x is None or y is None else False

    return P(f"({a.sql} OR {b.sql})", f)


def not_(a: P) -> P:
    def f(row: Row) -> Any:
        x = a.fn(row)
        return None if x is None else not x

    return P(f"(NOT {a.sql})", f)


def in_(a: P, values: Sequence[Any]) -> P:
    def f(row: Row) -> Any:
        x = a.fn(row)
        if x is None:
            return None
        if any(v is not None and x == v for v in values):
            return True
        return None if any(v is None for v in values) else False

    return P(f"({a.sql} IN ({', '.join(sql_literal(v) for v in values)}))", f)


def between(a: P, low: Any, high: Any) -> P:
    f = and_(cmp(">=", a, lit(low)), cmp("<=", a, lit(high))).fn
    return P(f"({a.sql} BETWEEN {sql_literal(low)} AND {sql_literal(high)})", f)


def is_null(a: P) -> P:
    return P(f"({a.sql} IS NULL)", lambda row: a.fn(row) is None)


def is_not_null(a: P) -> P:
    return P(f"({a.sql} IS NOT NULL)", lambda row: a.fn(row) is not None)


def like_prefix(a: P, prefix: str) -> P:
    def f(row: Row) -> Any:
        x = a.fn(row)
        return None if x is None else x.startswith(prefix)

    return P(f"({a.sql} LIKE '{prefix}%')", f)


def mod(a: P, k: int) -> P:
    """Spark's `%`: the result has the sign of the dividend."""

    def f(row: Row) -> Any:
        x = a.fn(row)
        if x is None:
            return None
        return x % k if x >= 0 else -((-x) % k)

    return P(f"({a.sql} % {k})", f)


def survivors(rows: Iterable[Row], pred: P) -> list[Row]:
    """The rows a DELETE keeps: those where the predicate is FALSE or NULL."""
    return [r for r in rows if pred.fn(r) is not True]


# -- generated tables ------------------------------------------------------------------------

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("n", pa.int32()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("amount", pa.decimal128(10, 2)),
        ("f", pa.float64()),
        ("st", pa.struct([("x", pa.int64()), ("y", pa.string())])),
        ("part", pa.string()),
    ]
)
# Long strings share a 40-character prefix: writers truncate string statistics.
LONG_A, LONG_B = "x" * 40 + "a", "x" * 40 + "b"
WORDS = ["apple", "avocado", "banana", "berry", "cherry", "a", "", "Apple", "it's", LONG_A, LONG_B]
# Microseconds matter: Delta's timestamp statistics are truncated to milliseconds.
MICROS = [0, 1, 999, 1000, 1500, 999_999]
FLOATS = [math.nan, -0.0, 0.0, -1.5, 0.25, 1.5, 2.0]
DAY0 = dt.date(2024, 1, 1)
TS0 = dt.datetime(2024, 1, 1, tzinfo=UTC)


def make_rows(ids: Iterable[int], seed: int) -> list[Row]:
    rng = random.Random(seed)
    rows = []
    for i in ids:
        rows.append(
            {
                "id": i,
                "n": None if rng.random() < 0.15 else rng.randint(-5, 20),
                "s": None if rng.random() < 0.15 else rng.choice(WORDS),
                "d": DAY0 + dt.timedelta(days=rng.randint(0, 30)),
                "ts": TS0
                + dt.timedelta(
                    minutes=rng.randint(0, 60 * 24 * 10), microseconds=rng.choice(MICROS)
                ),
                "amount": None
                if rng.random() < 0.1
                else Decimal(rng.randint(-1000, 1000)).scaleb(-2),
                "f": None if rng.random() < 0.1 else rng.choice(FLOATS),
                "st": None
                if rng.random() < 0.1
                else {
                    "x": rng.randint(0, 9),
                    "y": None if rng.random() < 0.2 else rng.choice("uvw"),
                },
                "part": rng.choice(["p0", "p1", "p2", None]),
            }
        )
    return rows


def write_table(
    path: Path,
    rows: Sequence[Row],
    files: int,
    *,
    partitioned: bool = False,
    configuration: dict[str, str] | None = None,
    schema: pa.Schema = SCHEMA,
    writer: WriterProperties | None = None,
) -> Path:
    """The rows written by deltalake in `files` appends (one commit each)."""
    size = -(-len(rows) // files)
    for k in range(files):
        chunk = rows[k * size : (k + 1) * size]
        write_deltalake(
            str(path),
            pa.Table.from_pylist(list(chunk), schema),
            mode="append",
            partition_by=["part"] if partitioned else None,
            configuration=configuration if k == 0 else None,
            writer_properties=writer,
        )
    return path


def enabled_table(path: Path, rows: Sequence[Row], files: int, **kwargs: Any) -> Path:
    write_table(path, rows, files, **kwargs)
    assert run_enable(open_log(str(path))).changed
    return path


def delete(path: Path, where: str | P, mode: str = "auto", dry_run: bool = False) -> DeleteResult:
    sql = where.sql if isinstance(where, P) else where
    return run_delete(open_log(str(path)), DeleteRequest(sql, mode, dry_run))


# -- independent readers ---------------------------------------------------------------------


def polars_rows(path: Path) -> list[Row]:
    return pl.read_delta(str(path)).to_dicts()


def deltalake_rows(path: Path) -> list[Row]:
    result = QueryBuilder().register("t", DeltaTable(str(path))).execute("select * from t")
    return pa.table(result.read_all()).to_pylist()


def ids(rows: Iterable[Row]) -> list[int]:
    return sorted(r["id"] for r in rows)


def logical_rows(path: Path) -> int:
    """dvtool's own count (with footers read for files whose stats lack numRecords)."""
    log = open_log(str(path))
    snapshot = log.snapshot()
    return summarize(snapshot, count_missing_rows(snapshot, log)).logical_rows


def dv_files(path: Path) -> set[Path]:
    return set(path.rglob("deletion_vector_*.bin"))


def assert_reads(path: Path, expected: Sequence[Row], *, full: bool = False) -> None:
    """polars, deltalake and the raw reader return `expected`; dvtool counts it."""
    want_ids = ids(expected)
    got_polars = polars_rows(path)
    got_deltalake = deltalake_rows(path)
    assert ids(got_polars) == want_ids, "polars"
    assert ids(got_deltalake) == want_ids, "deltalake"
    assert ids(raw_rows(path)) == want_ids, "raw parquet + DVs"
    assert logical_rows(path) == len(expected), "dvtool logical rows"
    if full:
        columns = list(expected[0]) if expected else None
        assert canon(got_polars, columns) == canon(expected, columns)
        assert canon(got_deltalake, columns) == canon(expected, columns)


# -- 1. oracle tests on generated tables -----------------------------------------------------

ID, N, S, D, TS, AMOUNT, F = (col(c) for c in ("id", "n", "s", "d", "ts", "amount", "f"))
STX, STY, PART = col("st.x"), col("st.y"), col("part")

ORACLE_STEPS: list[P] = [
    like_prefix(S, "a"),
    or_(is_null(N), cmp(">", N, lit(15))),
    and_(between(AMOUNT, Decimal("-1.50"), Decimal("2.00")), not_(in_(STX, [1, 2]))),
    # NULL never deletes: `n = NULL` and `s <> s` are NULL or FALSE on every row.
    or_(cmp("=", N, lit(None)), cmp("<>", S, S)),
    and_(
        cmp(">=", D, lit(DAY0 + dt.timedelta(days=20))),
        cmp("<", TS, lit(TS0 + dt.timedelta(days=5))),
    ),
    cmp("=", PART, lit("p1")),
    or_(cmp("=", STY, lit("u")), cmp("=", mod(ID, 7), lit(3))),
    in_(S, ["banana", None, "it's"]),
    or_(cmp(">", F, lit(1.5)), cmp("=", S, lit(LONG_B))),
    cmp(">", TS, lit(TS0 + dt.timedelta(days=9, hours=12, microseconds=500))),
    cmp("<", ID, lit(10)),
]


# Several row groups per file (and truncated parquet string statistics), so the engine's
# row-group pruning is exercised end to end.
SMALL_ROW_GROUPS = WriterProperties(max_row_group_size=16)
TRUNCATED_STATS = WriterProperties(max_row_group_size=7, statistics_truncate_length=8)


@pytest.mark.parametrize(
    ("partitioned", "writer"),
    [(False, None), (False, SMALL_ROW_GROUPS), (True, None)],
    ids=["flat", "flat-row-groups", "partitioned"],
)
def test_delete_sequence_matches_independent_readers(
    tmp_path: Path, partitioned: bool, writer: WriterProperties | None
) -> None:
    original = make_rows(range(240), seed=7)
    table = enabled_table(tmp_path / "t", original, 4, partitioned=partitioned, writer=writer)
    expected = list(original)
    assert_reads(table, expected, full=True)
    version = commit_versions(table)[-1]
    for step, pred in enumerate(ORACLE_STEPS):
        before = len(expected)
        expected = survivors(expected, pred)
        result = delete(table, pred)
        deleted = before - len(expected)
        assert result.metrics["numDeletedRows"] == deleted, pred
        if deleted:
            version += 1
            assert result.version == version
            assert result.mode == "dv"
        else:
            assert result.version is None, "a delete matching nothing must not commit"
            assert result.changes == []
        assert commit_versions(table)[-1] == version
        assert_reads(table, expected, full=step in (2, len(ORACLE_STEPS) - 1))
    assert 0 < len(expected) < len(original)


def test_delete_every_row_leaves_an_empty_table(tmp_path: Path) -> None:
    original = make_rows(range(60), seed=3)
    table = enabled_table(tmp_path / "t", original, 3)
    delete(table, "id % 2 = 0")
    result = delete(table, "id >= 0")
    assert result.metrics["numDeletedRows"] == 30
    assert {c.action for c in result.changes} == {"remove"}
    assert_reads(table, [])
    _, live = replay_json(table)
    assert live == {}


# -- 2. random predicates (hypothesis) -------------------------------------------------------


def _atoms() -> st.SearchStrategy[P]:
    ops = st.sampled_from(sorted(OPS))
    days = st.integers(0, 30).map(lambda k: DAY0 + dt.timedelta(days=k))
    times = st.builds(
        lambda m, us: TS0 + dt.timedelta(minutes=m, microseconds=us),
        st.integers(0, 60 * 24 * 10),
        st.sampled_from(MICROS),
    )
    money = st.integers(-1000, 1000).map(lambda c: Decimal(c).scaleb(-2))
    words = st.sampled_from(WORDS)
    return st.one_of(
        st.builds(lambda op, v: cmp(op, ID, lit(v)), ops, st.integers(-5, 210)),
        st.builds(lambda op, v: cmp(op, N, lit(v)), ops, st.integers(-6, 21)),
        st.builds(lambda op, v: cmp(op, S, lit(v)), ops, words),
        st.builds(lambda op, v: cmp(op, D, lit(v)), ops, days),
        st.builds(lambda op, v: cmp(op, TS, lit(v)), ops, times),
        st.builds(lambda op, v: cmp(op, AMOUNT, lit(v)), ops, money),
        st.builds(lambda op, v: cmp(op, STX, lit(v)), ops, st.integers(-1, 10)),
        st.builds(lambda op, v: cmp(op, F, lit(v)), ops, st.sampled_from(FLOATS)),
        st.builds(lambda v: cmp("=", PART, lit(v)), st.sampled_from(["p0", "p1", "p2"])),
        st.builds(lambda v: cmp("=", STY, lit(v)), st.sampled_from("uvw")),
        st.builds(
            lambda k, r: cmp("=", mod(ID, k), lit(r % k)), st.integers(2, 7), st.integers(0, 6)
        ),
        st.builds(
            lambda c, vs: in_(c, vs),
            st.sampled_from([ID, N, STX]),
            st.lists(st.one_of(st.none(), st.integers(-5, 200)), min_size=1, max_size=4),
        ),
        st.builds(
            lambda vs: in_(S, vs), st.lists(st.one_of(st.none(), words), min_size=1, max_size=3)
        ),
        st.builds(
            lambda a, b: between(ID, min(a, b), max(a, b)), st.integers(0, 200), st.integers(0, 200)
        ),
        st.builds(lambda a, b: between(D, min(a, b), max(a, b)), days, days),
        st.builds(lambda a, b: between(AMOUNT, min(a, b), max(a, b)), money, money),
        st.builds(is_null, st.sampled_from([N, S, AMOUNT, F, col("st"), STY, PART])),
        st.builds(is_not_null, st.sampled_from([N, S, AMOUNT, STY, PART])),
        st.builds(lambda p: like_prefix(S, p), st.sampled_from(["a", "b", "ap", "A", "c"])),
    )


PREDICATES = st.recursive(
    _atoms(),
    lambda inner: st.one_of(
        st.builds(and_, inner, inner), st.builds(or_, inner, inner), st.builds(not_, inner)
    ),
    max_leaves=4,
)


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    files=st.integers(3, 6),
    partitioned=st.booleans(),
    writer=st.sampled_from([None, SMALL_ROW_GROUPS, TRUNCATED_STATS]),
    steps=st.lists(
        st.tuples(PREDICATES, st.sampled_from(["auto", "auto", "cow"])), min_size=2, max_size=4
    ),
)
def test_random_delete_sequences(
    seed: int,
    files: int,
    partitioned: bool,
    writer: WriterProperties | None,
    steps: list[tuple[P, str]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        original = make_rows(range(200), seed)
        table = enabled_table(
            Path(tmp) / "t", original, files, partitioned=partitioned, writer=writer
        )
        expected = list(original)
        for pred, mode in steps:
            before = len(expected)
            expected = survivors(expected, pred)
            result = delete(table, pred, mode)
            assert result.metrics["numDeletedRows"] == before - len(expected), (pred.sql, result)
            assert ids(polars_rows(table)) == ids(expected), (pred.sql, mode)
        assert logical_rows(table) == len(expected)


# -- 3. golden DV tables ---------------------------------------------------------------------

GOLDEN_CASES = [
    # (table, predicate, rows before, rows deleted)
    (
        "table-with-dv-small",
        or_(cmp("=", mod(col("value"), 2), lit(0)), cmp("=", col("value"), lit(9))),
        8,
        4,
    ),
    (
        "basic-dv-with-checkpoint",
        and_(cmp("=", mod(ID, 5), lit(0)), cmp(">", ID, lit(100))),
        454,
        None,
    ),
    (
        "dv-partitioned-with-checkpoint/delta",
        or_(
            and_(in_(col("part"), [2, 3]), cmp("=", mod(col("col1"), 2), lit(1))),
            cmp("=", col("col2"), lit("foo4")),
        ),
        35,
        None,
    ),
    (
        "dv-with-columnmapping/delta",
        or_(cmp(">=", col("col1"), lit(40)), cmp("=", col("part"), lit(5))),
        35,
        None,
    ),
    (
        "compacted-log-files-table",
        or_(like_prefix(col("comment"), "merge"), cmp("=", ID, lit(0))),
        5,
        3,
    ),
    # Multi-part checkpoint with stats_parsed only. Its protocol lists the appendOnly
    # feature, but `delta.appendOnly` is not set, so deletes are allowed (PROTOCOL.md:
    # only the property makes a table append-only).
    (
        "v1-multi-part-partitioned-struct-stats-only",
        or_(cmp("=", col("part"), lit(1)), cmp("=", col("value"), lit("value_5"))),
        5,
        3,
    ),
]


def _golden_reader(path: Path) -> Callable[[Path], list[Row]]:
    protocol = DeltaTable(str(path)).protocol()
    return deltalake_rows if "columnMapping" in (protocol.reader_features or []) else polars_rows


def _live_dvs(path: Path) -> dict[str, set[int]]:
    _, live = replay_json(path)
    return {
        p: read_dv(path, add["deletionVector"]) if add.get("deletionVector") else set()
        for (p, _), add in live.items()
    }


@pytest.mark.parametrize(
    ("name", "pred", "before_rows", "deleted_rows"), GOLDEN_CASES, ids=[c[0] for c in GOLDEN_CASES]
)
def test_delete_on_golden_tables(
    tmp_path: Path, name: str, pred: P, before_rows: int, deleted_rows: int | None
) -> None:
    table = copy_golden(name, tmp_path)
    read = _golden_reader(table)
    before = read(table)
    assert len(before) == before_rows
    assert canon(raw_rows(table)) == canon(before)
    old_dvs = _live_dvs(table)
    last = commit_versions(table)[-1]
    expected = survivors(before, pred)
    if deleted_rows is not None:
        assert len(before) - len(expected) == deleted_rows
    assert 0 < len(before) - len(expected) < len(before)

    result = delete(table, pred)

    assert result.version == last + 1
    assert result.metrics["numDeletedRows"] == len(before) - len(expected)
    assert canon(read(table)) == canon(expected)
    assert canon(deltalake_rows(table)) == canon(expected)
    assert canon(raw_rows(table)) == canon(expected)
    assert logical_rows(table) == len(expected)
    # Rows deleted before stay deleted: every old DV is contained in the file's new DV.
    new_dvs = _live_dvs(table)
    for file_path, rows in old_dvs.items():
        if file_path in new_dvs:
            assert rows <= new_dvs[file_path], file_path
    assert not any("cdc" in a for a in commit_actions(table, result.version))


def test_delete_merges_inline_dv_of_cdf_table(tmp_path: Path) -> None:
    """cdf-table-with-dv at version 5: one file with an inline DV; the delete must keep the
    inline DV's row deleted, write an on-disk DV, and no change data (DV mode)."""
    table = copy_golden("cdf-table-with-dv", tmp_path)
    (table / "_delta_log" / f"{6:020d}.json").unlink()
    _, live = replay_json(table)
    [(file_path, add)] = [(k[0], v) for k, v in live.items()]
    assert add["deletionVector"]["storageType"] == "i"
    inline_rows = read_dv(table, add["deletionVector"])
    before = polars_rows(table)
    assert len(before) == 10 - len(inline_rows)
    value = col("value")
    pred = or_(cmp("<", value, lit(3)), cmp("=", value, lit(8)))
    expected = survivors(before, pred)

    result = delete(table, pred)

    assert result.version == 6
    assert result.mode == "dv"
    actions = commit_actions(table, 6)
    assert not any("cdc" in a for a in actions)
    assert not (table / "_change_data").exists()
    [new_add] = [a["add"] for a in actions if "add" in a]
    [removed] = [a["remove"] for a in actions if "remove" in a]
    assert dv_key(removed["deletionVector"]) == dv_key(add["deletionVector"])
    assert new_add["deletionVector"]["storageType"] == "u"
    new_rows = read_dv(table, new_add["deletionVector"])
    assert inline_rows < new_rows
    assert len(new_rows) == 10 - len(expected)
    assert unquote(new_add["path"]) == file_path
    assert canon(polars_rows(table)) == canon(expected)
    assert canon(deltalake_rows(table)) == canon(expected)
    assert canon(raw_rows(table)) == canon(expected)


def test_column_mapping_delete_writes_physical_dv_and_logical_predicate(tmp_path: Path) -> None:
    table = copy_golden("dv-with-columnmapping/delta", tmp_path)
    # A physical name is not a column of the table: the predicate uses logical names.
    metadata, _ = replay_json(table)
    physical = json.loads(metadata["schemaString"])["fields"][1]["metadata"][
        "delta.columnMapping.physicalName"
    ]
    result = CliRunner().invoke(cli, ["delete", str(table), "--where", f"`{physical}` = 1"])
    assert result.exit_code == 2  # usage: an unknown column
    assert "col1" in result.output
    before = deltalake_rows(table)
    pred = cmp("<", col("col1"), lit(20))
    delete(table, pred)
    assert canon(raw_rows(table)) == canon(survivors(before, pred))
    assert canon(deltalake_rows(table)) == canon(survivors(before, pred))


# -- 4. checkpoints --------------------------------------------------------------------------


def _checkpoint_adds(path: Path, version: int) -> dict[tuple[str, str | None], dict[str, Any]]:
    table = pq.read_table(path / "_delta_log" / f"{version:020d}.checkpoint.parquet")
    out = {}
    for row in table.column("add").to_pylist():
        if row is not None:
            out[(unquote(row["path"]), dv_key(row.get("deletionVector")))] = row
    return out


def test_checkpoints_every_two_versions(tmp_path: Path) -> None:
    original = make_rows(range(120), seed=11)
    table = enabled_table(
        tmp_path / "t", original, 3, configuration={"delta.checkpointInterval": "2"}
    )
    expected = list(original)
    preds = [
        cmp("=", mod(ID, 3), lit(0)),
        like_prefix(S, "b"),
        is_null(AMOUNT),
        cmp("<", ID, lit(30)),
        in_(STX, [4, 5]),
    ]
    ours = []
    for pred in preds:
        expected = survivors(expected, pred)
        result = delete(table, pred)
        assert result.version is not None
        assert result.checkpoint_warning is None
        ours.append(result.version)
        has_checkpoint = (
            table / "_delta_log" / f"{result.version:020d}.checkpoint.parquet"
        ).exists()
        assert has_checkpoint == (result.version % 2 == 0), result.version
        assert ids(polars_rows(table)) == ids(expected)
    last_checkpoint = max(v for v in ours if v % 2 == 0)
    hint = json.loads((table / "_delta_log" / "_last_checkpoint").read_text())
    assert hint["version"] == last_checkpoint
    # The checkpoint holds exactly the live files (with their DVs) the JSON commits give.
    _, live_at_checkpoint = replay_json_until(table, last_checkpoint)
    assert set(_checkpoint_adds(table, last_checkpoint)) == set(live_at_checkpoint)

    # Readers forced onto our checkpoint: no JSON commit before it, no older checkpoint.
    forced = tmp_path / "forced"
    shutil.copytree(table, forced)
    for f in (forced / "_delta_log").iterdir():
        m = COMMIT.match(f.name) or CHECKPOINT.match(f.name)
        if m and int(m[1]) < last_checkpoint:
            f.unlink()
    assert ids(polars_rows(forced)) == ids(expected)
    assert ids(deltalake_rows(forced)) == ids(expected)
    assert logical_rows(forced) == len(expected)
    # And a delete on top of our checkpoint still works.
    pred = cmp(">", ID, lit(100))
    expected = survivors(expected, pred)
    delete(forced, pred)
    assert ids(polars_rows(forced)) == ids(expected)
    assert ids(deltalake_rows(forced)) == ids(expected)


def replay_json_until(
    path: Path, version: int
) -> tuple[dict[str, Any], dict[tuple[str, str | None], dict[str, Any]]]:
    """replay_json on a copy of the log cut at `version`."""
    with tempfile.TemporaryDirectory() as tmp:
        cut = Path(tmp) / "t"
        (cut / "_delta_log").mkdir(parents=True)
        for v in commit_versions(path):
            if v <= version:
                name = f"{v:020d}.json"
                shutil.copy(path / "_delta_log" / name, cut / "_delta_log" / name)
        return replay_json(cut)


# -- 5. modes and change data feed -----------------------------------------------------------


def test_default_delete_without_dvs_rewrites_files(tmp_path: Path) -> None:
    original = make_rows(range(90), seed=5)
    table = write_table(tmp_path / "t", original, 3)
    pred = or_(cmp("=", mod(ID, 3), lit(0)), like_prefix(S, "a"))
    expected = survivors(original, pred)
    result = delete(table, pred)
    assert result.mode == "cow"
    assert result.metrics["numAddedFiles"] > 0
    assert result.metrics["numRemovedFiles"] == 3
    assert result.metrics["numDeletedRows"] == len(original) - len(expected)
    assert result.metrics["numCopiedRows"] == len(expected)
    assert dv_files(table) == set()
    actions = commit_actions(table, result.version)
    assert not any((a.get("add") or {}).get("deletionVector") for a in actions)
    assert not any("protocol" in a for a in actions)
    # deltalake's plain reader refuses DV tables; it reads this one.
    plain = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    assert canon(plain) == canon(expected)
    assert canon(polars_rows(table)) == canon(expected)
    assert ids(raw_rows(table)) == ids(expected)
    assert logical_rows(table) == len(expected)


def test_mode_dv_without_enable_is_refused(tmp_path: Path) -> None:
    table = write_table(tmp_path / "t", make_rows(range(30), seed=1), 2)
    before = tree_hashes(table)
    result = CliRunner().invoke(cli, ["delete", str(table), "--where", "id = 1", "--mode", "dv"])
    assert result.exit_code == 7, result.output  # refused
    assert "dvtool enable" in result.output
    assert tree_hashes(table) == before
    with pytest.raises(WriteRefusedError):
        delete(table, "id = 1", mode="dv")


def test_mode_cow_on_enabled_table_rewrites(tmp_path: Path) -> None:
    original = make_rows(range(90), seed=6)
    table = enabled_table(tmp_path / "t", original, 3)
    first = cmp("<", ID, lit(40))  # a DV first, so the rewrite must drop the DV's rows too
    expected = survivors(original, first)
    delete(table, first)
    assert dv_files(table)
    pred = cmp("=", mod(ID, 2), lit(1))
    expected = survivors(expected, pred)
    result = delete(table, pred, mode="cow")
    assert result.mode == "cow"
    assert result.metrics["numAddedFiles"] > 0
    assert result.metrics["numDeletionVectorFiles"] == 0
    adds = [a["add"] for a in commit_actions(table, result.version) if "add" in a]
    assert adds and all(add.get("deletionVector") is None for add in adds)
    for add in adds:
        assert (
            json.loads(add["stats"])["numRecords"]
            == pq.read_metadata(table / unquote(add["path"])).num_rows
        )
    assert_reads(table, expected, full=True)


def test_cow_delete_with_change_data_feed_writes_cdc(tmp_path: Path) -> None:
    original = make_rows(range(90), seed=8)
    table = write_table(
        tmp_path / "t",
        original,
        3,
        partitioned=True,
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    # `part = 'p1'` removes whole files, the rest rewrites files: a commit with both.
    pred = or_(
        cmp("=", PART, lit("p1")), or_(cmp("=", mod(ID, 4), lit(1)), cmp("=", S, lit("cherry")))
    )
    deleted = [r for r in original if pred.fn(r) is True]
    expected = survivors(original, pred)
    result = delete(table, pred)
    assert result.mode == "cow"
    assert {c.action for c in result.changes} == {"remove", "rewrite"}
    assert result.metrics["numAddedChangeFiles"] > 0
    actions = commit_actions(table, result.version)
    cdc = [a["cdc"] for a in actions if "cdc" in a]
    assert cdc and all(c["dataChange"] is False for c in cdc)
    assert len(cdc) == result.metrics["numAddedChangeFiles"]
    # The cdc files, read directly: exactly the deleted rows, each tagged 'delete'.
    change_rows: list[Row] = []
    for c in cdc:
        assert unquote(c["path"]).startswith("_change_data/")
        part = pq.read_table(table / unquote(c["path"])).to_pylist()
        for row in part:
            for k, v in c["partitionValues"].items():
                row[k] = v or None
        change_rows += part
    assert {r.pop("_change_type") for r in change_rows} == {"delete"}
    assert canon(change_rows) == canon(deleted)
    # deltalake's CDF reader agrees.
    cdf = pa.table(
        DeltaTable(str(table))
        .load_cdf(starting_version=result.version, ending_version=result.version)
        .read_all()
    ).to_pylist()
    assert {r["_change_type"] for r in cdf} == {"delete"}
    assert sorted(r["id"] for r in cdf) == ids(deleted)
    assert canon(polars_rows(table)) == canon(expected)
    assert canon(DeltaTable(str(table)).to_pyarrow_table().to_pylist()) == canon(expected)


def test_dv_delete_with_change_data_feed_writes_no_cdc(tmp_path: Path) -> None:
    original = make_rows(range(60), seed=9)
    table = enabled_table(
        tmp_path / "t", original, 2, configuration={"delta.enableChangeDataFeed": "true"}
    )
    pred = cmp("=", mod(ID, 4), lit(1))
    result = delete(table, pred)
    assert result.mode == "dv"
    assert result.metrics["numAddedChangeFiles"] == 0
    assert not any("cdc" in a for a in commit_actions(table, result.version))
    assert not (table / "_change_data").exists()
    assert_reads(table, survivors(original, pred))


# -- 6. dry run ------------------------------------------------------------------------------


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    table = enabled_table(tmp_path / "t", make_rows(range(90), seed=2), 3, partitioned=True)
    delete(table, "id % 5 = 0")  # some DVs already
    before = tree_hashes(table)
    last = commit_versions(table)[-1]
    runner = CliRunner(env={"COLUMNS": "200"})
    result = runner.invoke(
        cli, ["delete", str(table), "--where", "id % 3 = 0 OR part = 'p1'", "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    assert "dry run" in result.output
    assert "Plan" in result.output and "from stats" in result.output and "scanned" in result.output
    assert tree_hashes(table) == before
    as_json = runner.invoke(
        cli, ["delete", str(table), "--where", "id % 3 = 0", "--dry-run", "--json"]
    )
    assert as_json.exit_code == 0, as_json.output
    doc = json.loads(as_json.stdout)
    assert doc["dry_run"] is True and doc["version"] is None and doc["read_version"] == last
    assert doc["files"] and doc["metrics"]["numDeletedRows"] > 0
    assert tree_hashes(table) == before
    assert commit_versions(table)[-1] == last


# -- 7. DV file packing ----------------------------------------------------------------------


def test_one_dv_file_and_one_commit_for_many_files(tmp_path: Path) -> None:
    original = make_rows(range(240), seed=4)
    table = enabled_table(tmp_path / "t", original, 4, partitioned=True)
    log_before = set(os.listdir(table / "_delta_log"))
    dvs_before = dv_files(table)
    pred = cmp("=", mod(ID, 10), lit(3))
    result = delete(table, pred)
    new_dv_files = dv_files(table) - dvs_before
    new_log = sorted(set(os.listdir(table / "_delta_log")) - log_before)
    assert len(new_dv_files) == 1
    assert new_log == [f"{result.version:020d}.json"]
    assert result.metrics["numDeletionVectorFiles"] == 1
    touched = [c for c in result.changes if c.action == "dv"]
    assert len(touched) > 8
    assert result.metrics["numDeletionVectorsAdded"] == len(touched)
    # Each re-added file's DV holds exactly its matching rows (read from the parquet here).
    adds = [a["add"] for a in commit_actions(table, result.version) if "add" in a]
    assert len(adds) == len(touched)
    offsets = set()
    for add in adds:
        dv = add["deletionVector"]
        assert dv_file(table, dv) in new_dv_files
        offsets.add(dv["offset"])
        records = pq.read_table(table / unquote(add["path"])).to_pylist()
        matching = {i for i, r in enumerate(records) if pred.fn(r) is True}
        assert read_dv(table, dv) == matching
        assert json.loads(add["stats"])["numRecords"] == len(records)
    assert len(offsets) == len(adds)
    # A second delete over the same files packs again into one new file, merging old DVs.
    dvs_before = dv_files(table)
    delete(table, cmp("=", mod(ID, 10), lit(4)))
    assert len(dv_files(table) - dvs_before) == 1
    expected = [r for r in original if r["id"] % 10 not in (3, 4)]
    assert_reads(table, expected)


# -- 8. whole-file removal from partition values and stats -----------------------------------


def _forbid_data_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a data file was read")

    for module in (data_files, arrow_scan):
        monkeypatch.setattr(module, "iter_file_batches", boom)
        monkeypatch.setattr(module, "row_group_stats", boom)
    monkeypatch.setattr(data_files, "footer_row_count", boom)
    monkeypatch.setattr(delete_module, "footer_row_count", boom)
    monkeypatch.setattr(Storage, "open_parquet", boom)


def test_partition_predicate_removes_files_without_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = make_rows(range(160), seed=12)
    table = enabled_table(tmp_path / "t", original, 4, partitioned=True)
    first = cmp("=", mod(ID, 3), lit(0))
    delete(table, first)  # some of the files to remove carry DVs
    expected = survivors(survivors(original, first), cmp("=", PART, lit("p1")))
    _, live = replay_json(table)
    in_p1 = [a for a in live.values() if a["partitionValues"].get("part") == "p1"]
    with_dv = [a for a in in_p1 if a.get("deletionVector")]
    assert in_p1 and with_dv

    with monkeypatch.context() as m:
        _forbid_data_reads(m)
        result = delete(table, "part = 'p1'")

    assert result.version is not None
    assert {c.action for c in result.changes} == {"remove"}
    assert not any(c.read for c in result.changes)
    assert result.metrics["numRemovedFiles"] == len(in_p1)
    assert result.metrics["numFilesScanned"] == 0
    assert result.metrics["numDeletionVectorsRemoved"] == len(with_dv)
    assert result.metrics["numDeletedRows"] == len(survivors(original, first)) - len(expected)
    assert result.files_skipped == len(live) - len(in_p1)
    assert_reads(table, expected)


def test_stats_predicate_removes_whole_files_without_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = make_rows(range(200), seed=13)
    table = enabled_table(tmp_path / "t", original, 4)  # ids 0-49, 50-99, ...
    with monkeypatch.context() as m:
        _forbid_data_reads(m)
        result = delete(table, "id < 100 OR id >= 150")
    assert [c.read for c in result.changes] == [False, False, False]
    assert result.metrics["numRemovedFiles"] == 3
    assert result.metrics["numFilesSkipped"] == 1
    assert result.metrics["numDeletedRows"] == 150
    assert_reads(table, [r for r in original if 100 <= r["id"] < 150])


def test_null_partition_is_matched_by_is_null(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = make_rows(range(80), seed=14)
    table = enabled_table(tmp_path / "t", original, 2, partitioned=True)
    pred = is_null(PART)
    with monkeypatch.context() as m:
        _forbid_data_reads(m)
        result = delete(table, pred)
    assert result.metrics["numDeletedRows"] == sum(r["part"] is None for r in original) > 0
    assert_reads(table, survivors(original, pred))


# -- 9. bad input ----------------------------------------------------------------------------


def _cli(*args: str | Path) -> Result:
    return CliRunner(env={"COLUMNS": "200"}).invoke(cli, [str(a) for a in args])


def _with_future_writer_feature(table: Path) -> None:
    last = commit_versions(table)[-1]
    protocol = {
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors"],
            "writerFeatures": ["appendOnly", "deletionVectors", "invariants", "futureFeature"],
        }
    }
    info = {"commitInfo": {"timestamp": 1_700_000_000_000, "operation": "UPGRADE PROTOCOL"}}
    text = json.dumps(info) + "\n" + json.dumps(protocol) + "\n"
    (table / "_delta_log" / f"{last + 1:020d}.json").write_text(text)


BAD_INPUTS = [
    # (case, where, exit code (2 usage, 5 not found, 7 refused), words the message must contain)
    ("unknown-column", "nope = 1", 2, ["nope", "available columns", "id", "amount"]),
    ("malformed", "id >", 2, ["parse"]),
    ("malformed-2", "id = = 3", 2, ["parse", "id = = 3"]),
    ("empty", " ", 2, ["--where"]),
    ("not-boolean", "id + 1", 2, ["boolean"]),
    ("type-error", "d > TRUE", 2, ["date", "boolean"]),
    ("subquery", "id IN (SELECT 1)", 2, ["subquery"]),
    ("aggregate", "max(id) > 1", 2, ["max"]),
    ("append-only", "id = 1", 7, ["appendOnly"]),
    ("future-feature", "id = 1", 7, ["futureFeature"]),
    ("missing-table", "id = 1", 5, ["no Delta, Iceberg or Paimon table"]),
]


@pytest.mark.parametrize(
    ("case", "where", "code", "words"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS]
)
def test_bad_input_is_refused_and_writes_nothing(
    tmp_path: Path, case: str, where: str, code: int, words: list[str]
) -> None:
    rows = make_rows(range(30), seed=1)
    table = tmp_path / "t"
    if case == "append-only":
        write_table(table, rows, 2, configuration={"delta.appendOnly": "true"})
    elif case == "missing-table":
        table.mkdir()
    else:
        enabled_table(table, rows, 2)
        if case == "future-feature":
            _with_future_writer_feature(table)
    before = tree_hashes(table)
    result = _cli("delete", table, "--where", where)
    assert result.exit_code == code, result.output
    assert "internal error" not in result.output
    for word in words:
        assert word in result.output, (word, result.output)
    assert tree_hashes(table) == before
    if case == "missing-table":
        assert not (table / "_delta_log").exists()
        result = _cli("delete", tmp_path / "absent", "--where", where)
        assert result.exit_code == 5 and not (tmp_path / "absent").exists()


def test_invalid_mode_is_a_usage_error(tmp_path: Path) -> None:
    table = enabled_table(tmp_path / "t", make_rows(range(20), seed=1), 1)
    before = tree_hashes(table)
    assert _cli("delete", table, "--where", "id = 1", "--mode", "fast").exit_code == 2
    assert _cli("delete", table).exit_code == 2
    assert tree_hashes(table) == before


def test_cli_delete_reports_and_commits(tmp_path: Path) -> None:
    original = make_rows(range(60), seed=15)
    table = enabled_table(tmp_path / "t", original, 2)
    result = _cli("delete", table, "--where", "s LIKE 'a%'", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    expected = survivors(original, like_prefix(S, "a"))
    assert doc["version"] == commit_versions(table)[-1]
    assert doc["metrics"]["numDeletedRows"] == len(original) - len(expected)
    assert doc["mode"] == "dv"
    text = _cli("delete", table, "--where", "id = 2 OR id = 3")
    assert text.exit_code == 0, text.output
    assert f"committed version {doc['version'] + 1}" in text.output
    expected = survivors(expected, in_(ID, [2, 3]))
    assert ids(polars_rows(table)) == ids(expected)


# -- statistics the delete relies on and rewrites -------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "cow"])
def test_wide_decimal_statistics_stay_sound(tmp_path: Path, mode: str) -> None:
    """delta-rs writes decimal stats as rounded doubles (…567.81 -> 1.2345678901234568e+16):
    they must neither skip a file holding matching rows nor remove a whole file whose rows
    do not all match, before or after a DV delete rewrote the stats."""
    schema = pa.schema([("id", pa.int64()), ("amount", pa.decimal128(38, 2))])
    base = Decimal("12345678901234567")
    cents = [81, 85, 89, 95]
    original = [{"id": i, "amount": base + Decimal(c).scaleb(-2)} for i, c in enumerate(cents)]
    table = enabled_table(tmp_path / "t", original, 1, schema=schema)
    [add0] = [a["add"] for a in commit_actions(table, 0) if "add" in a]
    amount = col("amount")
    expected = list(original)
    for pred, deleted in (
        (cmp("=", amount, lit(base + Decimal("0.81"))), 1),
        (cmp(">", amount, lit(base + Decimal("0.90"))), 1),
        (cmp("<", amount, lit(base + Decimal("0.88"))), 1),
    ):
        expected = survivors(expected, pred)
        result = delete(table, pred, mode)
        assert ids(polars_rows(table)) == ids(expected), pred.sql
        assert result.metrics["numDeletedRows"] == deleted, pred.sql
        if mode == "auto":
            # The re-added file keeps the original statistics' number text.
            [add] = [a["add"] for a in commit_actions(table, result.version) if "add" in a]
            stats = json.loads(add["stats"])
            assert stats["tightBounds"] is False and stats["numRecords"] == 4
            number = r'"amount":([^,}]+)'
            assert re.findall(number, add["stats"]) == re.findall(number, add0["stats"])
    assert ids(expected) == [2]


def _strip_stats(table: Path) -> None:
    """Remove `stats` from every add in the JSON commits (as some writers leave them out)."""
    for version in commit_versions(table):
        lines = []
        for action in commit_actions(table, version):
            if "add" in action:
                action["add"].pop("stats", None)
            lines.append(json.dumps(action))
        (table / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def test_files_without_stats(tmp_path: Path) -> None:
    original = make_rows(range(120), seed=16)
    table = write_table(tmp_path / "t", original, 3, partitioned=True)
    _strip_stats(table)
    assert run_enable(open_log(str(table))).changed
    expected = list(original)
    # The partition delete first: the row counts of the removed files come from footers.
    for pred in (cmp("=", PART, lit("p1")), cmp("=", mod(ID, 3), lit(0)), like_prefix(S, "b")):
        before = len(expected)
        expected = survivors(expected, pred)
        result = delete(table, pred)
        assert result.metrics["numDeletedRows"] == before - len(expected)
        assert result.metrics["numFilesSkipped"] == (0 if pred.sql != "(part = 'p1')" else 9)
        for action in commit_actions(table, result.version):
            if "add" in action:
                add = action["add"]
                stats = json.loads(add["stats"])
                assert (
                    stats["numRecords"] == pq.read_metadata(table / unquote(add["path"])).num_rows
                )
                assert stats["tightBounds"] is False
        assert_reads(table, expected)
    assert summarize(open_log(str(table)).snapshot()).files_without_stats == 0


@pytest.mark.parametrize("mode", ["auto", "cow"])
def test_column_added_later_reads_as_null_in_older_files(tmp_path: Path, mode: str) -> None:
    narrow = pa.schema([("id", pa.int64()), ("s", pa.string())])
    wide = narrow.append(pa.field("extra", pa.string()))
    old_rows = [{"id": i, "s": f"s{i}"} for i in range(40)]
    new_rows = [{"id": 40 + i, "s": "t", "extra": None if i % 2 else "x"} for i in range(40)]
    table = tmp_path / "t"
    write_deltalake(str(table), pa.Table.from_pylist(old_rows, narrow))
    write_deltalake(
        str(table), pa.Table.from_pylist(new_rows, wide), mode="append", schema_mode="merge"
    )
    assert run_enable(open_log(str(table))).changed
    original = [{**r, "extra": None} for r in old_rows] + new_rows
    extra = col("extra")
    expected = list(original)
    for pred in (and_(is_null(extra), cmp("<", ID, lit(50))), cmp("=", extra, lit("x"))):
        expected = survivors(expected, pred)
        result = delete(table, pred, mode)
        assert result.metrics["numDeletedRows"] > 0
        assert canon(polars_rows(table)) == canon(expected)
        assert canon(deltalake_rows(table)) == canon(expected)
    assert ids(expected) == [i for i in range(50, 80) if i % 2 == 1]


def test_cow_delete_on_column_mapping_table(tmp_path: Path) -> None:
    table = copy_golden("dv-with-columnmapping/delta", tmp_path)
    before = deltalake_rows(table)
    pred = or_(cmp("<", col("col1"), lit(12)), in_(col("col1"), [46, 47]))  # 26 has a DV
    expected = survivors(before, pred)
    result = delete(table, pred, mode="cow")
    assert result.mode == "cow" and result.metrics["numAddedFiles"] > 0
    assert any(c.action == "rewrite" and c.had_dv for c in result.changes)
    metadata, _ = replay_json(table)
    physical = {
        f["metadata"]["delta.columnMapping.physicalName"]
        for f in json.loads(metadata["schemaString"])["fields"]
    }
    for action in commit_actions(table, result.version):
        if "add" in action:
            written = pq.read_schema(table / unquote(action["add"]["path"]))
            assert set(written.names) <= physical
            assert all(f.metadata and b"PARQUET:field_id" in f.metadata for f in written)
    assert canon(deltalake_rows(table)) == canon(expected)
    assert canon(raw_rows(table)) == canon(expected)
    assert logical_rows(table) == len(expected)


def test_random_file_prefixes_put_dvs_under_a_prefix(tmp_path: Path) -> None:
    original = make_rows(range(60), seed=17)
    table = enabled_table(
        tmp_path / "t",
        original,
        2,
        configuration={"delta.randomizeFilePrefixes": "true", "delta.randomPrefixLength": "3"},
    )
    pred = cmp("=", mod(ID, 2), lit(0))
    result = delete(table, pred)
    adds = [a["add"] for a in commit_actions(table, result.version) if "add" in a]
    [location] = {dv_file(table, add["deletionVector"]) for add in adds}
    assert location.exists()
    assert len(location.parent.relative_to(table).as_posix()) == 3
    assert_reads(table, survivors(original, pred))


@pytest.mark.parametrize("mode", ["dv", "cow"])
@pytest.mark.parametrize("error", ["conflict", "crash"])
def test_failed_commits_leave_no_files_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, error: str
) -> None:
    from dvtool.delta.log.writer import LogWriter
    from dvtool.errors import CommitConflictError

    original = make_rows(range(90), seed=18)
    table = enabled_table(
        tmp_path / "t", original, 3, configuration={"delta.enableChangeDataFeed": "true"}
    )
    before = tree_hashes(table)
    attempts = []

    def refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(1)
        if error == "conflict":
            raise CommitConflictError("a concurrent commit conflicts")
        raise RuntimeError("the commit failed")

    monkeypatch.setattr(LogWriter, "try_commit", refuse)
    expected_error = CommitConflictError if error == "conflict" else RuntimeError
    with pytest.raises(expected_error):
        delete(table, "id % 3 = 0 OR id < 30", mode=mode)
    assert len(attempts) == (delete_module.MAX_REPLANS if error == "conflict" else 1)
    assert tree_hashes(table) == before
    monkeypatch.undo()
    assert_reads(table, original)


def _force_checkpoint_reads(table: Path, dest: Path) -> Path:
    """A copy of `table` without the commits and checkpoints before its latest checkpoint."""
    hint = json.loads((table / "_delta_log" / "_last_checkpoint").read_text())["version"]
    shutil.copytree(table, dest)
    for f in (dest / "_delta_log").iterdir():
        m = COMMIT.match(f.name) or CHECKPOINT.match(f.name)
        if m and int(m[1]) < hint:
            f.unlink()
    return dest


@pytest.mark.parametrize(
    ("name", "column", "deletes", "checkpoint"),
    [
        ("basic-dv-with-checkpoint", "id", 4, 50),
        ("dv-partitioned-with-checkpoint/delta", "col1", 5, 20),
    ],
)
def test_golden_deletes_across_a_checkpoint(
    tmp_path: Path, name: str, column: str, deletes: int, checkpoint: int
) -> None:
    """Deletes on a table dvtool loaded from a Delta Spark checkpoint reach the next
    checkpoint version (interval 10): readers using only dvtool's checkpoint agree."""
    table = copy_golden(name, tmp_path)
    expected = polars_rows(table)
    for k in range(deletes):
        pred = cmp("=", mod(col(column), 7), lit(k))
        expected = survivors(expected, pred)
        delete(table, pred)
    assert commit_versions(table)[-1] == checkpoint
    assert (table / "_delta_log" / f"{checkpoint:020d}.checkpoint.parquet").exists()
    forced = _force_checkpoint_reads(table, tmp_path / "forced")
    assert commit_versions(forced) == [checkpoint]
    assert canon(polars_rows(forced)) == canon(expected)
    assert canon(deltalake_rows(forced)) == canon(expected)
    assert logical_rows(forced) == len(expected)


def test_commit_with_unknown_outcome_keeps_its_dv_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If nobody can tell whether the commit landed, the DV files it names must stay: deleting
    them could leave a committed DV pointing at nothing."""
    table = enabled_table(tmp_path / "t", make_rows(range(100), seed=5), files=2)

    def unknown(*args: Any, **kwargs: Any) -> Any:
        raise CommitOutcomeUnknownError("the commit of version 2 may or may not have been written")

    monkeypatch.setattr(LogWriter, "try_commit", unknown)
    with pytest.raises(CommitOutcomeUnknownError):
        delete(table, "id < 10")
    assert len(list(table.glob("deletion_vector_*.bin"))) == 1
