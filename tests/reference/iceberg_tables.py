"""Iceberg tables with row-level deletes, written by Iceberg's Spark runtime, for the tests.

What it builds (`build_all(session, out)`: ALL_SPECS), each in the Hadoop catalog `fixture` of
the session (`fixture.fixtures.NAME`, location `OUT/iceberg-warehouse/fixtures/NAME`; any
session reads them there after `attach_fixtures(session, out)`), all merge-on-read
(`write.delete.mode`, `write.update.mode`, `write.merge.mode`), schema
`(id BIGINT, cat STRING, d DATE, v BIGINT)`, 80 rows in two INSERTs then DELETE, UPDATE and
MERGE (see `STEPS`), first `SPECS`:

- `v2_flat`, `v2_part` (`PARTITIONED BY (cat, bucket(3, id))`): format-version 2, the deletes
  are Parquet position-delete files.
- `v3_flat`, `v3_part` (`PARTITIONED BY (cat, days(d))`): format-version 3, the deletes are
  deletion vectors (`deletion-vector-v1` blobs in Puffin files).
- `v2_to_v3`: partitioned like `v2_part`; INSERTs and DELETE as v2 (position deletes), then
  `format-version` set to 3 and UPDATE and MERGE as v3 (deletion vectors).
- `v2_equality`: format-version 2, unpartitioned, INSERTs then one equality-delete file on
  `id`. Iceberg's Spark runtime never writes equality deletes (Flink does), so the builder
  writes the delete file with pyarrow (Parquet, field id 1) and commits it through Iceberg's
  Java API (`RowDelta`) in the same JVM.

And the shapes of a table's later life (`HISTORY_SPECS`):

- `v2_evolved`: partition spec evolution, `PARTITIONED BY (cat)`, then `ADD PARTITION FIELD
  bucket(2, id)`, `REPLACE PARTITION FIELD cat WITH days(d)`, `DROP PARTITION FIELD
  bucket(2, id)` (four specs), with rows and position deletes under each; the later deletes
  reach data files of the earlier specs (`EVOLVED_STEPS`).
- `v2_compacted` (`PARTITIONED BY (cat)`): position deletes, then `rewrite_position_delete_files`
  and `rewrite_data_files` of partition `a` (whose compacted delete file stays live but
  dangling: it names only data files that are gone), more deletes, then all but the last
  two snapshots expired (their files deleted).
- `v3_compacted`: deletion vectors, `rewrite_data_files` (the DVs go with their data files),
  more DVs, expired like `v2_compacted`.
- `v2_flink`, `v2_flink_part` (`PARTITIONED BY (cat)`): identifier fields `id` (and `cat`),
  40 rows from Spark, then two Flink upsert checkpoints, each one `RowDelta` with, per
  partition, a data file, an equality-delete file on the identifier fields and position
  deletes into its own data file (tests/reference/iceberg_flink.py says how Flink writes
  them and why). `v3_flink_part`: the same in format version 3, where the position deletes
  are deletion vectors (Iceberg's DV writer), beside the equality deletes.

Every table comes with its expected rows, computed here in Python from what each step
intends (`Step.apply`), not by reading the table back: `iceberg-manifest.json` in OUT holds, per
table, its location, latest metadata file, format version and expected rows.

Fixture: `iceberg_tables` (tests/reference/engine_fixtures.py), built once per test run into a
temporary folder shared by the run's processes (the xdist workers; `tests.shared_builds`),
each of which attaches it to its session as catalog `fixture` (`attach_fixtures`): treat it as
read-only, a write would reach every process. Iceberg metadata holds absolute paths, so a byte
copy of a table still points at the original's files: a test that writes takes a copy with
`copy_table(session, entry, dst)` (Iceberg's `rewrite_table_path`; not for `v2_to_v3`,
which Iceberg 1.12 cannot rewrite) or builds its own with `build_table(session, spec)`.

By hand: `python -m tests.reference.iceberg_tables OUT_DIR` builds them all into OUT_DIR
(the warehouse is OUT_DIR/iceberg-warehouse, that of the session's `local` catalog too) and
prints the manifest's path.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tests.engines.jvm_engines import ICEBERG_SPARK, JvmSession, builder_main
from tests.reference.iceberg_flink import Checkpoint, commit_checkpoint, delete, upsert

Row = dict[str, Any]
State = dict[int, Row]
MOR = ("write.delete.mode", "write.update.mode", "write.merge.mode")
DAY0 = dt.date(2024, 1, 1)
# The Hadoop catalog of the fixture tables (`fixture.fixtures.NAME`), beside `local`: its
# warehouse is the folder they were built into (`attach_fixtures`).
FIXTURE_CATALOG = "fixture"


@dataclass(frozen=True)
class Step:
    """One write: its SQL (`{t}` is the table, `{n}` its name in its catalog `{c}`, for CALLs) and
    its intended effect on the rows by id; or, with `run`, a commit made in Python with
    Iceberg's Java API (`run(session, location)`; `sql` then only describes it)."""

    sql: str
    apply: Callable[[State], None]
    run: Callable[[JvmSession, Path], object] | None = None


def procedure(call: str) -> Step:
    """`CALL {c}.system.{call}` in the table's catalog `{c}` (maintenance: no change to the
    rows)."""
    return Step(f"CALL {{c}}.system.{call}", lambda state: None)


def alter(change: str) -> Step:
    """`ALTER TABLE {t} {change}` (schema, partitioning or properties: rows unchanged)."""
    return Step(f"ALTER TABLE {{t}} {change}", lambda state: None)


def make_rows(lo: int, hi: int, v_factor: int = 10) -> list[Row]:
    """Rows for ids lo..hi-1: three categories, four days, v derived from id."""
    return [
        {"id": i, "cat": "abc"[i % 3], "d": DAY0 + dt.timedelta(days=i % 4), "v": i * v_factor}
        for i in range(lo, hi)
    ]


def sql_values(rows: list[Row]) -> str:
    return ", ".join(f"({r['id']}, '{r['cat']}', DATE'{r['d']}', {r['v']})" for r in rows)


def insert(rows: list[Row]) -> Step:
    def apply(state: State) -> None:
        state.update({r["id"]: dict(r) for r in rows})

    return Step(f"INSERT INTO {{t}} VALUES {sql_values(rows)}", apply)


def delete_multiples(k: int) -> Step:
    def apply(state: State) -> None:
        for i in [i for i in state if i % k == 0]:
            del state[i]

    return Step(f"DELETE FROM {{t}} WHERE id % {k} = 0", apply)


def negate_where_remainder(k: int, rem: int) -> Step:
    def apply(state: State) -> None:
        for row in state.values():
            if row["id"] % k == rem:
                row["v"] = -row["v"]

    return Step(f"UPDATE {{t}} SET v = -v WHERE id % {k} = {rem}", apply)


def merge(source: list[Row]) -> Step:
    """MERGE on id: matched even ids are deleted, matched odd ones take the source's v, and
    unmatched source rows are inserted."""

    def apply(state: State) -> None:
        for s in source:
            if s["id"] not in state:
                state[s["id"]] = dict(s)
            elif s["id"] % 2 == 0:
                del state[s["id"]]
            else:
                state[s["id"]]["v"] = s["v"]

    sql = (
        f"MERGE INTO {{t}} t USING (SELECT * FROM VALUES {sql_values(source)} AS s(id, cat, d, v))"
        " s ON t.id = s.id WHEN MATCHED AND s.id % 2 = 0 THEN DELETE"
        " WHEN MATCHED THEN UPDATE SET t.v = s.v WHEN NOT MATCHED THEN INSERT *"
    )
    return Step(sql, apply)


def one_row(i: int, v: int | None = None) -> Row:
    """The row `make_rows` gives id `i`, with `v` in place of its value if given."""
    row = make_rows(i, i + 1)[0]
    return row if v is None else {**row, "v": v}


# Flink's upsert sink: two checkpoints over 40 rows that Spark inserted (iceberg_flink.py).
# The first upserts old and new keys, one key twice, and deletes an old key, a key it
# wrote itself, and a key it writes and deletes; the second replaces rows of the first.
FLINK_COLUMNS = "id BIGINT NOT NULL, cat STRING NOT NULL, d DATE, v BIGINT"
FLINK_CHECKPOINTS = (
    Checkpoint(
        (
            *(upsert(one_row(i, 100 * i)) for i in (3, 4, 5, 40, 41, 42)),
            upsert(one_row(4, 401)),
            delete(one_row(6)),
            delete(one_row(41)),
            upsert(one_row(43)),
            delete(one_row(43)),
        )
    ),
    Checkpoint(
        (
            upsert(one_row(4, 402)),
            delete(one_row(40)),
            upsert(one_row(7, 700)),
            upsert(one_row(3, 301)),
            upsert(one_row(3, 302)),
            delete(one_row(0)),
            upsert(one_row(44)),
        )
    ),
)


def flink_checkpoint(checkpoint: Checkpoint, key_fields: tuple[str, ...]) -> Step:
    """A Flink upsert checkpoint committed as one RowDelta; partitioned by `cat` when the
    key has it."""

    def partition_of(row: Row) -> str:
        return f"cat={row['cat']}" if "cat" in key_fields else ""

    def run(session: JvmSession, location: Path) -> int:
        return commit_checkpoint(session, location, checkpoint, key_fields, partition_of)

    return Step(f"-- Flink checkpoint: {len(checkpoint.ops)} changes", checkpoint.apply, run)


def flink_steps(key_fields: tuple[str, ...]) -> tuple[Step, ...]:
    identifier = alter(f"SET IDENTIFIER FIELDS {', '.join(key_fields)}")
    checkpoints = (flink_checkpoint(c, key_fields) for c in FLINK_CHECKPOINTS)
    return (identifier, insert(make_rows(0, 40)), *checkpoints)


def set_format_version(version: int) -> Step:
    """Upgrade the table's format version (no change to its rows)."""
    sql = f"ALTER TABLE {{t}} SET TBLPROPERTIES ('format-version'='{version}')"
    return Step(sql, lambda state: None)


STEPS_BEFORE_DELETE = (insert(make_rows(0, 40)), insert(make_rows(40, 80)))
STEPS = (
    *STEPS_BEFORE_DELETE,
    delete_multiples(7),
    negate_where_remainder(5, 1),
    merge(make_rows(70, 90, v_factor=100)),
)
UPGRADE_STEPS = (*STEPS[:3], set_format_version(3), *STEPS[3:])
# Partition spec evolution (spec 0: cat; 1: cat, bucket; 2: bucket, day; 3: day), with rows
# and deletes under each: the later deletes reach data files of every earlier spec.
EVOLVED_STEPS = (
    insert(make_rows(0, 40)),
    delete_multiples(7),
    alter("ADD PARTITION FIELD bucket(2, id)"),
    insert(make_rows(40, 80)),
    negate_where_remainder(5, 1),
    alter("REPLACE PARTITION FIELD cat WITH days(d)"),
    merge(make_rows(70, 90, v_factor=100)),
    alter("DROP PARTITION FIELD bucket(2, id)"),
    delete_multiples(11),
)
REWRITE_ALL = "map('rewrite-all', 'true')"
# Runs in the engine's process: `expire_snapshots` through the Java API (the procedure
# plans the files to delete with Spark jobs, seconds slower on these small tables).
EXPIRE_SNAPSHOTS = """
table = jvm.org.apache.iceberg.hadoop.HadoopTables(
    spark.sparkContext._jsc.hadoopConfiguration()).load(args["location"])
table.expireSnapshots().expireOlderThan(jvm.System.currentTimeMillis()).retainLast(
    args["retain_last"]).commit()
"""


def expire_snapshots(retain_last: int) -> Step:
    """Expire all but the last `retain_last` snapshots, deleting the files only they used."""

    def run(session: JvmSession, location: Path) -> None:
        session.python(EXPIRE_SNAPSHOTS, location=str(location), retain_last=retain_last)

    return Step(f"-- expire_snapshots, retain_last {retain_last}", lambda state: None, run)


# v2 compaction: the position deletes compacted, then partition `a`'s data files rewritten
# with their deletes applied (which leaves that partition's compacted delete file live but
# dangling: Iceberg keeps it until a later rewrite_position_delete_files), more deletes,
# and the older snapshots expired (their files deleted).
V2_COMPACTION_STEPS = (
    *STEPS[:4],
    procedure(
        "rewrite_position_delete_files(table => '{n}', options => map('rewrite-all', 'true'))"
    ),
    procedure(
        f"rewrite_data_files(table => '{{n}}', where => 'cat = \"a\"', options => {REWRITE_ALL})"
    ),
    STEPS[4],
    expire_snapshots(retain_last=2),
)
# v3 compaction: data files rewritten with their deletion vectors applied (the DVs go with
# them), new DVs after, older snapshots expired.
V3_COMPACTION_STEPS = (
    *STEPS[:3],
    procedure(f"rewrite_data_files(table => '{{n}}', options => {REWRITE_ALL})"),
    *STEPS[3:],
    expire_snapshots(retain_last=2),
)


@dataclass(frozen=True)
class TableSpec:
    """A table to build: format version at creation, partitioning, steps."""

    name: str
    format_version: int
    partitioned_by: str | None
    steps: tuple[Step, ...]
    equality_delete_ids: tuple[int, ...] = ()
    columns: str = "id BIGINT, cat STRING, d DATE, v BIGINT"


SPECS = (
    TableSpec("v2_flat", 2, None, STEPS),
    TableSpec("v2_part", 2, "cat, bucket(3, id)", STEPS),
    TableSpec("v3_flat", 3, None, STEPS),
    TableSpec("v3_part", 3, "cat, days(d)", STEPS),
    TableSpec("v2_to_v3", 2, "cat, bucket(3, id)", UPGRADE_STEPS),
    TableSpec("v2_equality", 2, None, STEPS_BEFORE_DELETE, equality_delete_ids=(3, 4, 50, 79)),
)
# The shapes of a table's later life: spec evolution, compaction and expiry, Flink's
# equality deletes (built with SPECS into the same manifest).
HISTORY_SPECS = (
    TableSpec("v2_evolved", 2, "cat", EVOLVED_STEPS),
    TableSpec("v2_compacted", 2, "cat", V2_COMPACTION_STEPS),
    TableSpec("v3_compacted", 3, None, V3_COMPACTION_STEPS),
    TableSpec("v2_flink", 2, None, flink_steps(("id",)), columns=FLINK_COLUMNS),
    TableSpec("v2_flink_part", 2, "cat", flink_steps(("id", "cat")), columns=FLINK_COLUMNS),
    TableSpec("v3_flink_part", 3, "cat", flink_steps(("id", "cat")), columns=FLINK_COLUMNS),
)
ALL_SPECS = SPECS + HISTORY_SPECS


def create_sql(spec: TableSpec, table: str) -> str:
    props = {"format-version": str(spec.format_version), **dict.fromkeys(MOR, "merge-on-read")}
    props_sql = ", ".join(f"'{k}'='{v}'" for k, v in props.items())
    parts = f" PARTITIONED BY ({spec.partitioned_by})" if spec.partitioned_by else ""
    return f"CREATE TABLE {table} ({spec.columns}) USING iceberg{parts} TBLPROPERTIES ({props_sql})"


def expected_rows(spec: TableSpec) -> list[Row]:
    """The rows the steps intend, sorted by id (computed without the engine)."""
    state: State = {}
    for step in spec.steps:
        step.apply(state)
    for i in spec.equality_delete_ids:
        state.pop(i, None)
    return [state[i] for i in sorted(state)]


# Runs in the engine's process: commits a Parquet equality-delete file (field ids in
# `args["field_ids"]`) to the table at `args["location"]` with Iceberg's Java API.
COMMIT_EQUALITY_DELETES = """
I = jvm.org.apache.iceberg
table = I.hadoop.HadoopTables(spark.sparkContext._jsc.hadoopConfiguration()).load(args["location"])
gateway = spark.sparkContext._gateway
ids = gateway.new_array(gateway.jvm.int, len(args["field_ids"]))
for n, field_id in enumerate(args["field_ids"]):
    ids[n] = field_id
builder = I.FileMetadata.deleteFileBuilder(table.spec()).ofEqualityDeletes(ids)
builder = builder.withPath(args["path"]).withFormat("parquet")
builder = builder.withFileSizeInBytes(args["size"]).withRecordCount(args["count"])
table.newRowDelta().addDeletes(builder.build()).commit()
result = table.currentSnapshot().snapshotId()
"""


def add_equality_deletes(session: JvmSession, table: str, location: Path, ids: list[int]) -> None:
    """Write an equality-delete file on `id` (field id 1) and commit it with the Java API."""
    field = pa.field("id", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"1"})
    path = location / "data" / "eq-deletes-00000.parquet"
    pq.write_table(pa.table({"id": ids}, schema=pa.schema([field])), path)
    session.python(
        COMMIT_EQUALITY_DELETES,
        location=str(location),
        field_ids=[1],
        path=str(path),
        size=path.stat().st_size,
        count=len(ids),
    )
    session.sql(f"REFRESH TABLE {table}")


def warehouse(session: JvmSession) -> Path:
    return session.workdir / "iceberg-warehouse"


def latest_metadata(location: Path) -> Path:
    """The newest `vN.metadata.json` of a Hadoop-catalog table."""
    files = (location / "metadata").glob("v*.metadata.json")
    return max(files, key=lambda p: int(p.name[1:].split(".")[0]))


def configure_catalog(session: JvmSession, name: str, settings: dict[str, str]) -> None:
    """Set `spark.sql.catalog.NAME` (an Iceberg SparkCatalog) and its settings in the
    session; Spark loads the catalog on first use."""
    conf = {f"spark.sql.catalog.{name}": "org.apache.iceberg.spark.SparkCatalog"}
    conf.update({f"spark.sql.catalog.{name}.{k}": v for k, v in settings.items()})
    code = "for k, v in args['conf'].items():\n    spark.conf.set(k, v)"
    session.python(code, conf=conf)


def build_table(
    session: JvmSession,
    spec: TableSpec,
    db: str = "fixtures",
    catalog: tuple[str, Path] | None = None,
) -> dict[str, Any]:
    """Create and write one table in the session's `local` catalog, or in the Hadoop
    catalog `catalog` (its name and warehouse); its manifest entry."""
    name, root = catalog or ("local", warehouse(session))
    table = f"{name}.{db}.{spec.name}"
    location = root / db / spec.name
    session.sql(f"CREATE NAMESPACE IF NOT EXISTS {name}.{db}")
    session.sql(create_sql(spec, table))
    for step in spec.steps:
        if step.run is None:
            session.sql(step.sql.format(t=table, n=f"{db}.{spec.name}", c=name))
        else:
            step.run(session, location)
            session.sql(f"REFRESH TABLE {table}")
    if spec.equality_delete_ids:
        add_equality_deletes(session, table, location, list(spec.equality_delete_ids))
    metadata = latest_metadata(location)
    return {
        "table": table,
        "location": str(location),
        "metadata": str(metadata),
        "format_version": json.loads(metadata.read_text())["format-version"],
        "expected": [{**r, "d": r["d"].isoformat()} for r in expected_rows(spec)],
    }


def copy_table(session: JvmSession, entry: dict[str, Any], dst: Path) -> Path:
    """A writable copy of a fixture table at `dst`; returns its latest metadata file.

    Iceberg's `rewrite_table_path` procedure rewrites the metadata, manifests and position
    deletes with `dst` in place of the table's location into a staging folder and lists the
    files to copy; then a `version-hint.text` makes `dst` a Hadoop table. Iceberg 1.12 fails
    with an INTERNAL_ERROR on `v2_to_v3` (caused by a NullPointerException on `firstRowId`:
    the files written before the upgrade to v3 have no row-lineage ids): build that one
    afresh with `build_table` instead."""
    stage = dst.parent / f"{dst.name}.staging"
    catalog, name = entry["table"].split(".", 1)
    answer = session.rows(
        f"CALL {catalog}.system.rewrite_table_path(table => '{name}',"
        f" source_prefix => '{entry['location']}', target_prefix => '{dst}',"
        f" staging_location => '{stage}/')"
    )[0]
    for line in Path(answer["file_list_location"]).read_text().splitlines():
        source, target = (Path(p.removeprefix("file:")) for p in line.split(","))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    shutil.rmtree(stage)
    version: str = answer["latest_version"]
    (dst / "metadata" / "version-hint.text").write_text(version[1:].split(".")[0])
    return dst / "metadata" / version


def build_all(session: JvmSession, out: Path) -> Path:
    """Build every table of ALL_SPECS into OUT/iceberg-warehouse/fixtures, through the
    session's Hadoop catalog `FIXTURE_CATALOG` (`attach_fixtures`), so that the tables
    outlive the session and serve others; write and return OUT/iceberg-manifest.json."""
    attach_fixtures(session, out)
    catalog = (FIXTURE_CATALOG, out / "iceberg-warehouse")
    manifest = {spec.name: build_table(session, spec, catalog=catalog) for spec in ALL_SPECS}
    path = out / "iceberg-manifest.json"
    path.write_text(json.dumps(manifest, indent=1))
    return path


def attach_fixtures(session: JvmSession, out: Path) -> None:
    """Make the tables `build_all` builds into OUT the session's `FIXTURE_CATALOG.fixtures.NAME`
    (a Hadoop catalog whose warehouse is OUT/iceberg-warehouse): a session that did not
    build them reads them there as the one that did."""
    configure_catalog(
        session, FIXTURE_CATALOG, {"type": "hadoop", "warehouse": str(out / "iceberg-warehouse")}
    )


def load_manifest(path: Path) -> dict[str, Any]:
    """The manifest with the expected rows' dates back as `datetime.date`."""
    manifest: dict[str, Any] = json.loads(path.read_text())
    for entry in manifest.values():
        for row in entry["expected"]:
            row["d"] = dt.date.fromisoformat(row["d"])
    return manifest


def main(argv: list[str]) -> int:
    return builder_main(argv, "tests.reference.iceberg_tables", ICEBERG_SPARK, build_all)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
