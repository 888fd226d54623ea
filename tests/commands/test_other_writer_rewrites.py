"""dvtool's writing commands on tables other writers made, checked against independent readers.

- Column mapping `id` (a table converted from Iceberg, tests/writers.py): the older file holds
  `amount` under its pre-rename name `amount_old` (and `info.city` as `info.town`), found only
  by parquet field id. Deletes (DV and copy-on-write), purge and compaction must see and keep
  those values, and new files must carry the physical names and field ids of the schema.
- Type widening (golden `type-widening`): its first file still holds the narrow types (int8,
  float32, decimal(10,2), date ...). Predicates must see the widened values, and rewrites must
  write the table's current types with the values converted exactly.
- Materialized partitions (`materializePartitionColumns`, a Delta Spark 4 table and the golden
  one, whose files lack `letter` although the feature is on): every new file must hold the
  partition column, after the data columns, with the value its add action records.

Rows are compared with tests/oracles.py's `raw_rows` and, where they can read the table, with
polars and deltalake; parquet files are read directly with pyarrow, never through dvtool.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.commands.other_writers import (
    by_id,
    check_stats,
    committing,
    deltalake_rows,
    dvtool,
    live_adds,
    new_adds,
    schema_fields,
)
from tests.oracles import (
    canon,
    commit_actions,
    commit_versions,
    copy_golden,
    parquet_field_id,
    raw_rows,
    read_dv,
    replay_json,
)
from tests.test_oracles import TYPE_WIDENING_NEW_ROW, TYPE_WIDENING_OLD_ROW
from tests.writers import (
    DeltaLog,
    column_mapping_id_rows,
    column_mapping_id_table,
    delta_field,
    delta_stats,
    materialized_partition_rows,
    materialized_partition_table,
    metadata_action,
    mtime_ms,
    protocol,
)

Row = dict[str, Any]
COMPACT = ("optimize", "--target-size", str(10**6))  # far above these files: they all merge
PURGE = ("optimize", "--purge")


# -- 1. column mapping `id` ---------------------------------------------------------------------

CM_KEPT = [r for r in column_mapping_id_rows() if r["amount"] != 30]
PHYSICAL = "delta.columnMapping.physicalName"
OLD_FILE = "data/00000-0-"  # the file written before the renames


def check_field_ids(path: Path, adds: Sequence[dict[str, Any]]) -> None:
    """The files of `adds` name each column by its physical name and carries its column mapping
    id as parquet field id, nested struct fields too (PROTOCOL.md "Writer Requirements for
    Column Mapping")."""

    def expected(fields: Sequence[dict[str, Any]]) -> list[tuple[str, int, Any]]:
        return [
            (
                f["metadata"][PHYSICAL],
                int(f["metadata"]["delta.columnMapping.id"]),
                expected(f["type"]["fields"]) if isinstance(f["type"], dict) else None,
            )
            for f in fields
        ]

    def actual(fields: Sequence[pa.Field]) -> list[tuple[str, int | None, Any]]:
        return [
            (
                f.name,
                parquet_field_id(f),
                actual(list(f.type)) if pa.types.is_struct(f.type) else None,
            )
            for f in fields
        ]

    want = sorted(expected(schema_fields(path)))
    for add in adds:
        assert sorted(actual(list(pq.read_schema(path / add["path"])))) == want, add["path"]


def test_column_mapping_premise(tmp_path: Path) -> None:
    """The old file really holds amount = 30 under `amount_old`, reachable by field id only."""
    path = column_mapping_id_table(tmp_path / "t")
    (old,) = [a for a in live_adds(path) if a["path"].startswith(OLD_FILE)]
    schema = pq.read_schema(path / old["path"])
    assert "amount" not in schema.names
    assert parquet_field_id(schema.field("amount_old")) == 2
    assert 30 in pq.read_table(path / old["path"]).column("amount_old").to_pylist()
    assert by_id(raw_rows(path)) == by_id(column_mapping_id_rows())


@pytest.mark.parametrize("mode", ["dv", "cow"])
def test_column_mapping_delete_then_purge(tmp_path: Path, mode: str) -> None:
    path = column_mapping_id_table(tmp_path / "t")
    args = ["--where", "amount = 30", "--json"] + (["--mode", "cow"] if mode == "cow" else [])
    result = json.loads(committing(path, "delete", *args))
    assert result["mode"] == mode
    assert result["metrics"]["numDeletedRows"] == 3
    assert by_id(raw_rows(path)) == by_id(CM_KEPT)
    if mode == "dv":  # the old file keeps its bytes and gets a DV of its rows 0 and 1
        (old,) = [a for a in live_adds(path) if a["path"].startswith(OLD_FILE)]
        assert read_dv(path, old["deletionVector"]) == {0, 1}
        committing(path, *PURGE)
    else:
        dvtool(path, *PURGE)  # nothing to purge after a copy-on-write delete
    assert by_id(raw_rows(path)) == by_id(CM_KEPT)
    assert not any(a["path"].startswith(OLD_FILE) for a in live_adds(path))
    check_field_ids(path, live_adds(path))
    for add in live_adds(path):
        assert "deletionVector" not in add
        check_stats(path, add)
    assert deltalake_rows(path) == canon(CM_KEPT)  # readable by name now: no old file left


def test_column_mapping_compaction_keeps_renamed_values(tmp_path: Path) -> None:
    path = column_mapping_id_table(tmp_path / "t")
    committing(path, *COMPACT)
    (add,) = live_adds(path)
    assert by_id(raw_rows(path)) == by_id(column_mapping_id_rows())
    check_field_ids(path, [add])
    check_stats(path, add)
    assert deltalake_rows(path) == canon(column_mapping_id_rows())


@pytest.mark.parametrize("mode", ["dv", "cow"])
@pytest.mark.parametrize(
    ("where", "deleted"),
    [
        ("info.city = 'Oslo'", lambda r: r["info"] is not None and r["info"]["city"] == "Oslo"),
        ("note IS NULL", lambda r: r["note"] is None),  # `note` is missing from the old file
        (
            "amount > 20 AND info.city IS NULL",
            lambda r: r["amount"] > 20 and (r["info"] or {}).get("city") is None,
        ),
    ],
    ids=["renamed-nested", "missing-column", "renamed-and-null"],
)
def test_column_mapping_predicates_on_renamed_columns(
    tmp_path: Path, mode: str, where: str, deleted: Callable[[Row], bool]
) -> None:
    path = column_mapping_id_table(tmp_path / "t")
    original = {add["path"] for add in live_adds(path)}
    committing(path, "delete", "--where", where, "--mode", mode)
    kept = [r for r in column_mapping_id_rows() if not deleted(r)]
    assert by_id(raw_rows(path)) == by_id(kept)
    check_field_ids(path, new_adds(path, original))


# -- 2. type widening ---------------------------------------------------------------------------

TW_ROWS = [TYPE_WIDENING_OLD_ROW, TYPE_WIDENING_NEW_ROW]


def typed(rows: Sequence[Row]) -> list[list[tuple[str, str, str]]]:
    """Rows as (column, Python type, repr): 5 and 5.0, Decimal('1') and Decimal('1.0') differ."""
    return sorted([(k, type(v).__name__, repr(v)) for k, v in sorted(r.items())] for r in rows)


def table_arrow_type(delta_type: str) -> pa.DataType:
    """The parquet (arrow) type a Delta primitive type is written as."""
    if delta_type.startswith("decimal("):
        precision, scale = delta_type[len("decimal(") : -1].split(",")
        return pa.decimal128(int(precision), int(scale))
    return {"long": pa.int64(), "double": pa.float64(), "timestamp_ntz": pa.timestamp("us")}[
        delta_type
    ]


def widening_table(tmp_path: Path) -> Path:
    """A copy of the golden table with deletion vectors enabled by `dvtool enable`, which must
    keep its features and type widening property."""
    path = copy_golden("type-widening", tmp_path)
    committing(path, "enable")
    actions = commit_actions(path, max(commit_versions(path)))
    (new,) = [a["protocol"] for a in actions if "protocol" in a]
    reader = {"timestampNtz", "typeWidening-preview", "deletionVectors"}
    assert reader <= set(new["readerFeatures"])
    assert reader | {"appendOnly", "invariants"} <= set(new["writerFeatures"])
    configuration = replay_json(path)[0]["configuration"]
    assert configuration["delta.enableTypeWidening"] == "true"
    assert configuration["delta.enableDeletionVectors"] == "true"
    assert typed(raw_rows(path)) == typed(TW_ROWS)
    return path


def check_widened_file(path: Path, add: dict[str, Any], rows: Sequence[Row]) -> None:
    """A new file holds the table's current types, and pyarrow reads the expected values from
    it as they are, without any conversion."""
    want = pa.schema([(f["name"], table_arrow_type(f["type"])) for f in schema_fields(path)])
    data = pq.read_table(path / add["path"])
    assert data.schema.remove_metadata().equals(want), data.schema
    assert typed(data.to_pylist()) == typed(rows)
    check_stats(path, add)


@pytest.mark.parametrize("mode", ["dv", "cow"])
@pytest.mark.parametrize(
    ("where", "deleted"),
    [
        # the old file's float32 3.4 widens to 3.4000000953674316, which is not 3.4
        ("float_double = 3.4", lambda r: r["float_double"] == 3.4),
        ("float_double = 3.4000000953674316", lambda r: r["float_double"] == 3.4000000953674316),
        (
            "decimal_decimal_greater_scale = 67.89",
            lambda r: r["decimal_decimal_greater_scale"] == Decimal("67.89"),
        ),
        ("byte_decimal < 2", lambda r: r["byte_decimal"] < 2),
        (
            "date_timestamp_ntz = TIMESTAMP_NTZ '2024-09-09 00:00:00'",
            lambda r: r["date_timestamp_ntz"] == dt.datetime(2024, 9, 9),
        ),
        ("int_long > 100", lambda r: r["int_long"] > 100),  # old stats are int32
    ],
    ids=["float-not-equal", "float-exact", "decimal-scale", "byte-decimal", "date-ntz", "int"],
)
def test_type_widening_delete_sees_widened_values(
    tmp_path: Path, mode: str, where: str, deleted: Callable[[Row], bool]
) -> None:
    path = widening_table(tmp_path)
    kept = [r for r in TW_ROWS if not deleted(r)]
    last = max(commit_versions(path))
    dvtool(path, "delete", "--where", where, "--mode", mode)
    assert max(commit_versions(path)) == last + (len(kept) < len(TW_ROWS))
    assert typed(raw_rows(path)) == typed(kept)


@pytest.mark.parametrize("step", ["dv-purge", "cow"])
def test_type_widening_rewrites_write_the_table_types(tmp_path: Path, step: str) -> None:
    """Compaction rewrites the narrow file's row into the table types; the compacted file's
    other row is then deleted (DV + purge, or copy-on-write) and the narrow-origin row is
    rewritten once more."""
    path = widening_table(tmp_path)
    committing(path, *COMPACT)
    (compacted,) = live_adds(path)
    check_widened_file(path, compacted, TW_ROWS)
    assert typed(raw_rows(path)) == typed(TW_ROWS)
    where = "byte_long = 9223372036854775807"
    if step == "cow":
        committing(path, "delete", "--where", where, "--mode", "cow")
    else:
        committing(path, "delete", "--where", where)
        assert typed(raw_rows(path)) == typed([TYPE_WIDENING_OLD_ROW])
        committing(path, *PURGE)
    (rewritten,) = live_adds(path)
    assert rewritten["path"] != compacted["path"] and "deletionVector" not in rewritten
    check_widened_file(path, rewritten, [TYPE_WIDENING_OLD_ROW])
    assert typed(raw_rows(path)) == typed([TYPE_WIDENING_OLD_ROW])


# -- 3. materialized partition columns ----------------------------------------------------------

Step = tuple[tuple[str, ...], int | None]  # (dvtool command and options, number deleted)
ENABLE: Step = (("enable",), None)
DV_4: Step = (("delete", "--where", "number = 4"), 4)
COW_1: Step = (("delete", "--where", "number = 1", "--mode", "cow"), 1)
MATERIALIZED_CASES: dict[str, tuple[str, list[Step]]] = {
    # Delta Spark 4 files (holding `letter`): DV + purge of a writer's file, compaction of the
    # purged file with a writer's file, copy-on-write delete in the compacted file
    "writer": (
        "writer",
        [(("delete", "--where", "number = 7"), 7), (PURGE, None), (COMPACT, None), COW_1],
    ),
    # golden files lack `letter`: compaction must write it, then the compacted file is rewritten
    "golden-dv": ("golden", [ENABLE, (COMPACT, None), DV_4, (PURGE, None)]),
    "golden-cow": ("golden", [ENABLE, (COMPACT, None), COW_1]),
}

NAMES = ("number", "a_float", "letter")


def materialized_table(tmp_path: Path, source: str) -> tuple[Path, list[Row]]:
    """The table and its rows: the golden table holds the fixture's rows but (a, 7, 7.7)."""
    if source == "writer":
        return materialized_partition_table(tmp_path / "t"), materialized_partition_rows()
    path = copy_golden("partitioned-with-materialize-feature", tmp_path)
    assert all("letter" not in pq.read_schema(f).names for f in path.rglob("*.parquet"))
    return path, [r for r in materialized_partition_rows() if r["number"] != 7]


def check_materialized(path: Path, add: dict[str, Any], names: Sequence[str] = NAMES) -> None:
    """The file holds the data columns, then the partition column (`names`: physical names),
    whose every value is the add's partition value (null for the null partition)."""
    data = pq.read_table(path / add["path"])
    assert data.schema.names == list(names)
    assert data.schema.field(names[-1]).type == pa.string()
    assert set(data.column(names[-1]).to_pylist()) == {add["partitionValues"][names[-1]]}


@pytest.mark.parametrize("case", list(MATERIALIZED_CASES))
def test_materialized_partition_rewrites(tmp_path: Path, case: str) -> None:
    source, steps = MATERIALIZED_CASES[case]
    path, expected = materialized_table(tmp_path, source)
    assert canon(pl.read_delta(str(path)).to_dicts()) == canon(expected)
    original = {add["path"] for add in live_adds(path)}
    rewritten = 0
    for args, gone in steps:
        committing(path, *args)
        expected = [r for r in expected if r["number"] != gone]
        rows = canon(expected)
        assert canon(raw_rows(path)) == rows, args
        assert canon(pl.read_delta(str(path)).to_dicts()) == deltalake_rows(path) == rows, args
        for add in new_adds(path, original):
            check_materialized(path, add)
            check_stats(path, add, partition_columns=["letter"])
            rewritten += 1
    assert rewritten, "the steps must have written new files"


# (logical name, physical name, Delta type, column mapping id)
MAPPED = [("letter", "col-l3", "string", 1), ("number", "col-n5", "long", 2)]
MAPPED += [("a_float", "col-f7", "double", 3)]


def mapped_materialized_table(path: Path) -> Path:
    """`materialized_partition_table`'s rows as Delta Spark writes them under column mapping
    `name` mode: one file per partition with physical names and field ids everywhere, the
    partition column `col-l3` after the data columns; partition values and stats by physical
    name."""
    fields = [
        delta_field(n, t, metadata={"delta.columnMapping.id": i, PHYSICAL: p})
        for n, p, t, i in MAPPED
    ]
    arrow = {"string": pa.string(), "long": pa.int64(), "double": pa.float64()}
    ids = [(p, arrow[t], {b"PARQUET:field_id": str(i).encode()}) for _, p, t, i in MAPPED]
    schema = pa.schema([pa.field(*f) for f in ids[1:] + ids[:1]])
    log, rows, adds = DeltaLog(path), materialized_partition_rows(), []
    for letter in dict.fromkeys(r["letter"] for r in rows):
        records = [{p: r[n] for n, p, _, _ in MAPPED} for r in rows if r["letter"] == letter]
        data = pa.Table.from_pylist(records, schema)
        file = path / f"col-l3={letter or '__HIVE_DEFAULT_PARTITION__'}" / "part-0.snappy.parquet"
        file.parent.mkdir(parents=True)
        pq.write_table(data, file)
        add: dict[str, Any] = {
            "path": str(file.relative_to(path)),
            "partitionValues": {"col-l3": letter},
        }
        add.update(size=file.stat().st_size, modificationTime=mtime_ms(file), dataChange=True)
        adds.append({"add": {**add, "stats": delta_stats(data, fields[1:], mode="name")}})
    configuration = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "3"}
    configuration["delta.enableDeletionVectors"] = "true"
    features = ["columnMapping", "deletionVectors"]
    metadata = metadata_action(
        fields, partition_columns=["letter"], configuration=configuration, created_time=log.now()
    )
    log.commit([protocol(features, [*features, "materializePartitionColumns"]), metadata, *adds])
    return path


def test_materialized_partition_columns_get_field_ids(tmp_path: Path) -> None:
    """Under column mapping the materialized partition column is a file column like any
    other: physical name and field id (Iceberg readers resolve it by id). dvtool used to
    write it without a field id."""
    path = mapped_materialized_table(tmp_path / "t")
    expected = materialized_partition_rows()
    assert canon(raw_rows(path)) == deltalake_rows(path) == canon(expected)
    original = {add["path"] for add in live_adds(path)}
    committing(path, "delete", "--where", "number = 7")
    committing(path, *PURGE)
    (add,) = new_adds(path, original)
    expected = [r for r in expected if r["number"] != 7]
    assert canon(raw_rows(path)) == deltalake_rows(path) == canon(expected)
    check_materialized(path, add, ("col-n5", "col-f7", "col-l3"))
    check_field_ids(path, [add])
    check_stats(path, add, partition_columns=["col-l3"])
