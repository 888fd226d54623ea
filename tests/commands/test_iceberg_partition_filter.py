"""`--where` as an Iceberg partition filter (dvtool/commands/iceberg_partition_filter.py).

The filter must be INCLUSIVE: for every row DuckDB (an independent SQL engine) says a
predicate matches, the partition Iceberg's transforms (pyiceberg's) put the row in is
selected. Predicates are built at random from atoms dvtool translates (comparisons, IN,
IS NULL) and atoms it can only approximate (functions, arithmetic, LIKE, doubles), under
AND, OR and NOT; the filter must also leave partitions out when the predicate allows.
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import duckdb
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
)
from pyiceberg.types import (
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    NestedField,
    StringType,
)
from pyiceberg.utils.datetime import date_to_days

from dvtool.commands.iceberg_layout import parse_predicate
from dvtool.commands.iceberg_partition_filter import partition_match

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "cat", StringType(), required=False),
    NestedField(3, "d", DateType(), required=False),
    NestedField(4, "amount", DecimalType(10, 2), required=False),
    NestedField(5, "x", DoubleType(), required=False),
)
SPECS: dict[str, list[tuple[int, Any, str]]] = {
    "identity_bucket_day": [
        (2, IdentityTransform(), "cat"),
        (1, BucketTransform(4), "id"),
        (3, DayTransform(), "d"),
    ],
    "truncate_month": [(1, TruncateTransform(10), "id"), (3, MonthTransform(), "d")],
    "decimal_identity": [(4, IdentityTransform(), "amount")],
}
EXACT_ATOMS = [
    "cat = 'a'",
    "cat != 'b'",
    "cat IN ('a', 'c')",
    "cat IS NULL",
    "cat IS NOT NULL",
    "'b' < cat",
    "id < 10",
    "id >= 25",
    "id = 7",
    "id IN (3, 17, 40)",
    "id BETWEEN 5 AND 12",
    "d >= DATE '2024-01-03'",
    "d < DATE '2024-01-02'",
    "d = DATE '2024-01-05'",
    "d IS NULL",
    "amount > 10.50",
    "amount = 3.25",
    "amount <= 3",
]
APPROXIMATE_ATOMS = [
    "upper(cat) = 'A'",
    "id + 1 = 8",
    "cat LIKE 'a%'",
    "x > 1.5",
    "coalesce(cat, 'z') = 'z'",
    "id % 3 = 0",
]


def _metadata(fields: list[tuple[int, Any, str]]) -> TableMetadata:
    spec = PartitionSpec(
        *(
            PartitionField(
                src, 1000 + i, t, name if isinstance(t, IdentityTransform) else f"{name}_p"
            )
            for i, (src, t, name) in enumerate(fields)
        )
    )
    return new_table_metadata(SCHEMA, spec, UNSORTED_SORT_ORDER, "file:///tmp/t")


def _rows(rng: random.Random) -> list[dict[str, Any]]:
    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.1 else value

    return [
        {
            "id": maybe(rng.randrange(0, 50)),
            "cat": maybe(rng.choice("abcd")),
            "d": maybe(date(2024, 1, 1) + timedelta(days=rng.randrange(0, 40))),
            "amount": maybe(Decimal(rng.randrange(0, 2000)).scaleb(-2)),
            "x": maybe(rng.random() * 3),
        }
        for _ in range(200)
    ]


def _partition(metadata: TableMetadata, row: dict[str, Any]) -> tuple[Any, ...]:
    """The row's partition values, by pyiceberg's transforms (internal representation)."""
    schema = metadata.schema()
    values = []
    for f in metadata.spec().fields:
        source = schema.find_field(f.source_id)
        value = row[source.name]
        if isinstance(value, date):
            value = date_to_days(value)
        values.append(f.transform.transform(source.field_type)(value))
    return tuple(values)


def _predicates(rng: random.Random, count: int) -> list[str]:
    def build(depth: int) -> str:
        if depth == 0 or rng.random() < 0.3:
            pool = EXACT_ATOMS if rng.random() < 0.75 else APPROXIMATE_ATOMS
            return rng.choice(pool)
        kind = rng.choice(["AND", "OR", "NOT"])
        if kind == "NOT":
            return f"NOT ({build(depth - 1)})"
        return f"({build(depth - 1)}) {kind} ({build(depth - 1)})"

    return EXACT_ATOMS + APPROXIMATE_ATOMS + [build(3) for _ in range(count)]


@pytest.mark.parametrize("spec", sorted(SPECS))
def test_every_partition_with_a_matching_row_is_selected(spec: str) -> None:
    rng = random.Random(f"partition-filter-{spec}")
    metadata = _metadata(SPECS[spec])
    rows = _rows(rng)
    partitions = [_partition(metadata, r) for r in rows]
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t (i INT, id BIGINT, cat VARCHAR, d DATE, amount DECIMAL(10, 2), x DOUBLE)"
    )
    con.executemany(
        "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)",
        [(i, r["id"], r["cat"], r["d"], r["amount"], r["x"]) for i, r in enumerate(rows)],
    )
    spec_id = metadata.default_spec_id
    pruned = 0
    for where in _predicates(rng, 60):
        matches = partition_match(metadata, parse_predicate(metadata, where, None))
        matching = {i for (i,) in con.execute(f"SELECT i FROM t WHERE {where}").fetchall()}
        for i in matching:
            assert matches(spec_id, partitions[i]), (where, rows[i], partitions[i])
        pruned += sum(1 for p in set(partitions) if not matches(spec_id, p))
    assert pruned > 0  # the filter does leave partitions out


@pytest.mark.parametrize(
    ("where", "selected", "left_out"),
    [
        ("cat = 'a'", ("a", 0, 19730), ("b", 0, 19730)),
        ("cat = 'a' OR upper(cat) = 'B'", ("b", 0, 19730), None),
        ("cat = 'a' AND upper(cat) = 'B'", ("a", 0, 19730), ("b", 0, 19730)),
        ("NOT (upper(cat) = 'A')", ("a", 0, 19730), None),
        ("NOT (cat = 'a')", ("b", 0, 19730), ("a", 0, 19730)),
        ("d = DATE '2024-01-05'", ("a", 1, 19727), ("a", 1, 19728)),
        ("cat = NULL", ("b", 0, 19730), None),
    ],
)
def test_approximations_only_widen(
    where: str, selected: tuple[Any, ...], left_out: tuple[Any, ...] | None
) -> None:
    metadata = _metadata(SPECS["identity_bucket_day"])
    matches = partition_match(metadata, parse_predicate(metadata, where, None))
    assert matches(metadata.default_spec_id, selected)
    if left_out is not None:
        assert not matches(metadata.default_spec_id, left_out)


def test_an_unknown_spec_and_an_unpartitioned_one_match_everything() -> None:
    metadata = _metadata(SPECS["identity_bucket_day"])
    matches = partition_match(metadata, parse_predicate(metadata, "cat = 'a'", None))
    assert matches(99, ("b",))
    unpartitioned = _metadata([])
    matches = partition_match(unpartitioned, parse_predicate(unpartitioned, "cat = 'a'", None))
    assert matches(unpartitioned.default_spec_id, ())
