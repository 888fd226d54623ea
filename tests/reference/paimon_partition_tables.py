"""Paimon tables partitioned by every kind of column, and tables of ORC and Avro data files,
written by Paimon's Java API (the `paimon_java` session), for the tests.

Each table has columns `id INT NOT NULL`, its partition columns and `v STRING`. Values are
given as text and converted by Paimon itself (`InternalRowPartitionComputer.
convertSpecToInternalRow`, i.e. `TypeUtils.castFromString`), so each column holds what a
Paimon writer would put there; row i goes to partition `partitions[i % len(partitions)]`.
A primary-key table (primary key `id` plus the partition columns, `bucket` 1,
`deletion-vectors.enabled`) is written in two commits: `ROWS` inserts, then upserts of every
third id and deletes of ids = 1 mod 4, so its lookup compaction leaves DVs. An append table
(nullable partition columns) gets one insert commit, and so do `binary_cast` and `strings`,
which Paimon 1.4.2 cannot commit to twice (`PartitionSpec.one_commit`).

Tables (`SPECS`): `numbers` (decimals compact and not, FLOAT, DOUBLE, BOOLEAN, TINYINT,
BIGINT), `times_legacy` (DATE, TIMESTAMP(3), TIMESTAMP(9), TIMESTAMP(6) WITH LOCAL TIME
ZONE, `partition.legacy-name` true), `times_cast` (DATE, TIME(3), TIMESTAMP(6),
TIMESTAMP(0), legacy false), `binary_cast` (VARBINARY, legacy false, no DVs), `strings`
(values needing escaping, blanks), `nulls` (append table, null partition values and
`partition.default-name` `nil`), `orc_dv` and `avro_dv` (`file.format` orc and avro).

`partition-manifest.json` in OUT holds, per table, its path, options and expected row count.
Fixture: `paimon_partition_tables` (tests/reference/test_paimon_partitions.py).
By hand: `python -m tests.reference.paimon_partition_tables OUT_DIR`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.engines.jvm_engines import PAIMON_JAVA, JvmSession, builder_main
from tests.reference.paimon_tables import JAVA_CATALOG, write_manifest

DB = "partitions"
ROWS = 24
NULL = "__NULL__"  # the text standing for a null value in the specs
DV = {"deletion-vectors.enabled": "true", "bucket": "1"}
LEGACY = {"partition.legacy-name": "true"}
CAST = {"partition.legacy-name": "false"}


@dataclass(frozen=True)
class PartitionSpec:
    """A table to build: partition columns (name, Paimon type), the partition values (one
    text per column; NULL for null), options, and whether it has a primary key."""

    name: str
    columns: tuple[tuple[str, str], ...]
    partitions: tuple[tuple[str, ...], ...]
    options: dict[str, str] = field(default_factory=dict)
    primary_key: bool = True
    # One insert commit only: Paimon 1.4.2 cannot commit to a table partitioned by a binary
    # column once it holds files (its commit's partition filter has no binary statistics; a
    # DV table's first commit is followed by a compaction commit, so no DVs either),
    # and its lookup compaction fails on the partitions of `strings` (a local file named by
    # the unescaped partition).
    one_commit: bool = False


SPECS = (
    PartitionSpec(
        "numbers",
        (
            ("dc", "DECIMAL(10, 2)"),
            ("dw", "DECIMAL(38, 10)"),
            ("f", "FLOAT"),
            ("d", "DOUBLE"),
            ("b", "BOOLEAN"),
            ("t", "TINYINT"),
            ("l", "BIGINT"),
        ),
        (
            (
                "-12.50",
                "12345678901234567890.0123456789",
                "1.5",
                "3.141592653589793",
                "true",
                "-128",
                "-9223372036854775808",
            ),
            ("0.00", "-1.5", "-0.1", "1.0E-5", "false", "0", "0"),
            ("123.45", "0", "1.0E10", "-2.0E20", "true", "127", "42"),
        ),
        DV,
    ),
    PartitionSpec(
        "times_legacy",
        (
            ("d", "DATE"),
            ("ts", "TIMESTAMP(3)"),
            ("tn", "TIMESTAMP(9)"),
            ("lz", "TIMESTAMP(6) WITH LOCAL TIME ZONE"),
        ),
        (
            (
                "2024-05-14",
                "2024-05-14 10:15:30.123",
                "2024-05-14 10:15:30.123456789",
                "2024-05-14 10:15:30.123456",
            ),
            ("1969-12-31", "2024-05-14 00:00:00", "2024-05-14 10:15:00", "1960-01-01 00:00:00"),
            (
                "1970-01-01",
                "1969-12-31 23:59:59.999",
                "1960-01-01 00:00:00.000001",
                "2024-05-14 10:15:30.1",
            ),
        ),
        {**DV, **LEGACY},
    ),
    PartitionSpec(
        "times_cast",
        (("d", "DATE"), ("t", "TIME(3)"), ("tm", "TIMESTAMP(6)"), ("t0", "TIMESTAMP(0)")),
        (
            ("2024-05-14", "10:15:30.5", "2024-05-14 10:15:30.123456", "2024-05-14 10:15:30"),
            ("1969-12-31", "00:00:00", "2024-05-14 00:00:00", "1960-01-01 00:00:00"),
            ("0001-01-01", "23:59:59.999", "1969-12-31 23:59:59.99", "2024-05-14 10:15:00"),
        ),
        {**DV, **CAST},
    ),
    PartitionSpec(
        "binary_cast",
        (("bin", "VARBINARY(32)"),),
        (("abc",), ("a/b:c=d",), ("a long binary value",)),
        {"bucket": "1", **CAST},
        one_commit=True,
    ),
    PartitionSpec(
        "strings",
        (("s", "STRING"), ("c", "CHAR(4)")),
        (
            ("a/b=c:d%e", "x#?"),
            ("{}[]^*'\"\\", " "),
            ("tab\tnew\nline\x7f", "ü ñ"),
            (" ", "\u00a0"),
            ("", "\x1c"),
        ),
        DV,
        one_commit=True,
    ),
    PartitionSpec(
        "nulls",
        (("s", "STRING"), ("n", "INT")),
        (("eu", "1"), (NULL, "2"), ("us", NULL), (NULL, NULL)),
        {"bucket": "-1", "deletion-vectors.enabled": "true", "partition.default-name": "nil"},
        primary_key=False,
    ),
    PartitionSpec(
        "orc_dv", (("part", "STRING"),), (("p0",), ("p1",)), {**DV, "file.format": "orc"}
    ),
    PartitionSpec(
        "avro_dv", (("part", "STRING"),), (("p0",), ("p1",)), {**DV, "file.format": "avro"}
    ),
)


def batches(spec: PartitionSpec) -> list[list[tuple[str, dict[str, str]]]]:
    """The commits of a table: lists of (row kind `+I`/`-D`, column texts)."""

    def row(i: int, v: str | None) -> dict[str, str]:
        part = spec.partitions[i % len(spec.partitions)]
        values = dict(zip((c for c, _ in spec.columns), part, strict=True))
        return {"id": str(i), **values, "v": NULL if v is None else v}

    inserts = [("+I", row(i, f"a{i}")) for i in range(ROWS)]
    if not spec.primary_key or spec.one_commit:
        return [inserts]
    upserts = [("+I", row(i, f"b{i}")) for i in range(0, ROWS, 3)]
    deletes = [("-D", row(i, None)) for i in range(1, ROWS, 4)]
    return [inserts, upserts + deletes]


def expected_rows(spec: PartitionSpec) -> int:
    """The rows the commits leave (ids are unique, so keys by id)."""
    live: set[str] = set()
    for batch in batches(spec):
        for kind, row in batch:
            (live.add if kind == "+I" else live.discard)(row["id"])
    return len(live)


# Runs in the engine's process: create table args["name"] and commit each batch, every value
# converted from text by Paimon (NULL text: null).
WRITE = (
    JAVA_CATALOG
    + """
parse = P.types.DataTypeJsonParser.parseAtomicTypeSQLString
columns = [("id", "INT NOT NULL")] + [
    (c, t + (" NOT NULL" if args["primary_key"] else "")) for c, t in args["columns"]
] + [("v", "STRING")]
b = P.schema.Schema.newBuilder()
row_type = P.types.RowType.builder()
for name, kind in columns:
    b.column(name, parse(kind))
    row_type.field(name, parse(kind))
row_type = row_type.build()
partition_keys = [c for c, _ in args["columns"]]
b.partitionKeys(partition_keys)
if args["primary_key"]:
    b.primaryKey(["id"] + partition_keys)
for key, value in args["options"].items():
    b.option(key, value)
ident = P.catalog.Identifier.create(args["db"], args["name"])
catalog.createTable(ident, b.build(), False)
table = catalog.getTable(ident)
kinds = {"+I": P.types.RowKind.INSERT, "-D": P.types.RowKind.DELETE}
for batch in args["batches"]:
    builder = P.table.sink.BatchWriteBuilderImpl(table)
    write = builder.newWrite()
    write.withIOManager(P.disk.IOManager.create(args["tmp"]))
    for kind, values in batch:
        spec = jvm.java.util.LinkedHashMap()
        for name, _ in columns:
            spec.put(name, values[name])
        row = P.utils.InternalRowPartitionComputer.convertSpecToInternalRow(
            spec, row_type, args["null"])
        row.setRowKind(kinds[kind])
        write.write(row)
    commit = builder.newCommit()
    commit.commit(write.prepareCommit())
    write.close()
    commit.close()
result = str(table.location())
"""
)


def build_table(session: JvmSession, spec: PartitionSpec, warehouse: Path) -> dict[str, Any]:
    """Create and write one table; its manifest entry."""
    location = session.python(
        WRITE,
        warehouse=str(warehouse),
        tmp=str(session.workdir / "paimon-io"),
        db=DB,
        name=spec.name,
        columns=[list(c) for c in spec.columns],
        primary_key=spec.primary_key,
        options=spec.options,
        batches=batches(spec),
        null=NULL,
    )
    return {
        "path": str(location).removeprefix("file:"),
        "options": spec.options,
        "expected_rows": expected_rows(spec),
    }


def build_all(session: JvmSession, out: Path) -> Path:
    """Build every table of SPECS under OUT/paimon; write and return the manifest's path."""
    manifest = {spec.name: build_table(session, spec, out / "paimon") for spec in SPECS}
    return write_manifest(out / "partition-manifest.json", manifest)


def main(argv: list[str]) -> int:
    return builder_main(argv, "tests.reference.paimon_partition_tables", PAIMON_JAVA, build_all)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
