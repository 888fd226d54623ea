"""Paimon tables with deletion vectors, written by Paimon's Java API, for the tests.

Paimon has no Spark 4 bundle on the registries we reach, so the builder drives the Java API
(paimon-bundle 1.4.2) through py4j in the `paimon_java` session (tests/engines/
jvm_engines.py): catalog `CatalogFactory` (filesystem) at `{warehouse}`, database
`fixtures`, writes with `BatchWriteBuilderImpl` and an IOManager (lookup needs temp disk).

What it builds (`build_all(session, out)`), schema `(id INT, part STRING, v STRING)`. The
primary-key tables are written in three commits (`BATCHES`): 60 inserts; upserts of every
third id and deletes of ids = 1 mod 5 (an id in both is upserted then deleted); upserts of
every fourth id. With `deletion-vectors.enabled` every commit's lookup compaction moves
level-0 files up and marks the rows they replace in deletion vectors, so after the three
commits the DVs are in deletion files under `index/`:

- `pk_dv`: primary key `(id, part)`, `PARTITIONED BY part` (two partitions), `bucket` 2,
  `deletion-vectors.enabled`: 32-bit RoaringBitmap DVs (the default).
- `pk_dv_bitmap64`: primary key `id`, unpartitioned, `bucket` 3, `deletion-vectors.enabled`
  and `deletion-vectors.bitmap64`: 64-bit DVs (Iceberg's layout).
- `pk_dv_expired`: as `pk_dv`, then snapshots expired down to the latest one (older data and
  deletion files deleted) and one orphan file left in a bucket folder (a copy of a data file
  under a name no snapshot references), as a failed write would leave it.
- `append_dv`: append table (no primary key, `bucket` -1), `deletion-vectors.enabled`, two
  inserts of 30 rows, then the rows with id = 0 mod 7 deleted by deletion vectors. Paimon's
  Java API has no DELETE for append tables (Spark's and Flink's SQL do), so the builder
  does what Paimon's Spark writer does: finds the rows' positions in the data files (here
  with pyarrow), and commits DVs through `BaseAppendDeleteFileMaintainer` and a
  `CommitMessageImpl` with the new index files.

Every table comes with its expected rows, computed in Python from what the batches intend
(`expected_rows`); `paimon-manifest.json` in OUT holds, per table, its path, options and
expected rows. Paimon's metadata holds file names relative to the table, so a copy of the
folder (`copy_table`) is a working table: tests that write copy first.

Fixture: `paimon_tables` (tests/reference/engine_fixtures.py), built once per test run.
By hand: `python -m tests.reference.paimon_tables OUT_DIR` (warehouse OUT_DIR/paimon).
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tests.engines.jvm_engines import PAIMON_JAVA, JvmSession, builder_main

DB = "fixtures"
# One change: row kind ("+I" upsert, "-D" delete), id, partition, value.
Change = tuple[str, int, str, str | None]


def part_of(i: int) -> str:
    return f"p{i % 2}"


BATCHES: tuple[tuple[Change, ...], ...] = (
    tuple(("+I", i, part_of(i), f"a{i}") for i in range(60)),
    tuple(("+I", i, part_of(i), f"b{i}") for i in range(0, 60, 3))
    + tuple(("-D", i, part_of(i), None) for i in range(1, 60, 5)),
    tuple(("+I", i, part_of(i), f"c{i}") for i in range(0, 60, 4)),
)


@dataclass(frozen=True)
class TableSpec:
    """A Paimon table to build: keys, options, and what to do after the writes."""

    name: str
    primary_keys: tuple[str, ...]
    partition_keys: tuple[str, ...]
    options: dict[str, str]
    expire: bool = False
    orphan: bool = False
    batches: tuple[tuple[Change, ...], ...] = field(default=BATCHES)
    # Append tables: delete the rows whose id is a multiple of this, by deletion vectors.
    delete_multiples_of: int = 0


DV = {"deletion-vectors.enabled": "true"}
SPECS = (
    TableSpec("pk_dv", ("id", "part"), ("part",), {**DV, "bucket": "2"}),
    TableSpec(
        "pk_dv_bitmap64", ("id",), (), {**DV, "bucket": "3", "deletion-vectors.bitmap64": "true"}
    ),
    TableSpec(
        "pk_dv_expired", ("id", "part"), ("part",), {**DV, "bucket": "2"}, expire=True, orphan=True
    ),
    TableSpec(
        "append_dv",
        (),
        (),
        {**DV, "bucket": "-1"},
        batches=(BATCHES[0][:30], BATCHES[0][30:]),
        delete_multiples_of=7,
    ),
)


def expected_rows(spec: TableSpec) -> list[dict[str, Any]]:
    """The rows the batches intend, sorted by id: upserts and deletes by primary key, or for
    an append table every insert but the deleted multiples."""
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    for n, (kind, i, part, v) in enumerate(c for batch in spec.batches for c in batch):
        row = {"id": i, "part": part, "v": v}
        key = tuple(row[k] for k in spec.primary_keys) or (n,)
        if kind == "+I":
            state[key] = row
        else:
            state.pop(key, None)
    k = spec.delete_multiples_of
    return sorted((r for r in state.values() if not k or r["id"] % k), key=lambda r: r["id"])


# Java snippets the fixture modules build theirs from (each runs in the engine's process).
JAVA_CATALOG = """
P = jvm.org.apache.paimon
opts = P.options.Options()
opts.set("warehouse", args["warehouse"])
catalog = P.catalog.CatalogFactory.createCatalog(P.catalog.CatalogContext.create(opts))
catalog.createDatabase(args["db"], True)
"""
"""The filesystem catalog on args["warehouse"] with database args["db"]."""

JAVA_CREATE_TABLE = (
    JAVA_CATALOG
    + """
DT = P.types.DataTypes
b = P.schema.Schema.newBuilder()
b.column("id", DT.INT().notNull()).column("part", DT.STRING().notNull()).column("v", DT.STRING())
b.primaryKey(args["primary_keys"]).partitionKeys(args["partition_keys"])
for key, value in args["options"].items():
    b.option(key, value)
ident = P.catalog.Identifier.create(args["db"], args["name"])
catalog.createTable(ident, b.build(), False)
table = catalog.getTable(ident)
kinds = {"+I": P.types.RowKind.INSERT, "-D": P.types.RowKind.DELETE}

def commit_batch(table, batch):
    builder = P.table.sink.BatchWriteBuilderImpl(table)
    write = builder.newWrite()
    write.withIOManager(P.disk.IOManager.create(args["tmp"]))
    for kind, i, part, v in batch:
        row = P.data.GenericRow(kinds[kind], 3)
        row.setField(0, i)
        row.setField(1, P.data.BinaryString.fromString(part))
        row.setField(2, None if v is None else P.data.BinaryString.fromString(v))
        write.write(row)
    commit = builder.newCommit()
    commit.commit(write.prepareCommit())
    write.close()
    commit.close()
"""
)
"""Table args["name"] (id INT, part STRING, v STRING) with args["primary_keys"],
args["partition_keys"], args["options"]; `kinds` maps `+I`/`-D` to row kinds;
`commit_batch(table, [(kind, id, part, v), ...])` commits one batch (args["tmp"]: spill)."""

JAVA_OPEN_BY_PATH = """
P = jvm.org.apache.paimon
table = P.table.FileStoreTableFactory.create(
    P.fs.local.LocalFileIO.create(), P.fs.Path(args["path"]))
"""
"""The table at args["path"] without a catalog (so copies work)."""

JAVA_READ_ROWS = """
    reader = read.createReader(split)
    batch = reader.readBatch()
    while batch is not None:
        row = batch.next()
        while row is not None:
            v = None if row.isNullAt(2) else str(row.getString(2))
            rows.append({"id": row.getInt(0), "part": str(row.getString(1)), "v": v})
            row = batch.next()
        batch.releaseBatch()
        batch = reader.readBatch()
    reader.close()
"""
"""Inside `for split in ...:` with `read` and `rows`: the split's rows appended to `rows`."""


# Runs in the engine's process: create table args["name"] and commit each batch.
WRITE = (
    JAVA_CREATE_TABLE
    + """
for batch in args["batches"]:
    commit_batch(table, batch)
if args["expire"]:
    config = P.options.ExpireConfig.builder().snapshotRetainMax(1).snapshotRetainMin(1)
    config = config.snapshotTimeRetain(jvm.java.time.Duration.ZERO).build()
    catalog.getTable(ident).newExpireSnapshots().config(config).expire()
result = str(table.location())
"""
)

# Runs in the engine's process: read the table at args["path"] (no catalog, so copies work)
# with Paimon's reader; also each split's data files, levels and deletion files (local
# paths, without `file:`).
READ = (
    JAVA_OPEN_BY_PATH
    + """
builder = P.table.source.ReadBuilderImpl(table)
splits = builder.newScan().plan().splits()
read = builder.newRead()
rows, files = [], []
def local(path):
    return str(path).removeprefix("file:")
for split in splits:
    dvs = split.deletionFiles()
    dvs = list(dvs.get()) if dvs.isPresent() else [None] * split.dataFiles().size()
    for meta, dv in zip(split.dataFiles(), dvs):
        files.append({
            "path": local(split.bucketPath()) + "/" + meta.fileName(),
            "level": meta.level(),
            "rows": meta.rowCount(),
            "dv": None if dv is None else {
                "path": local(dv.path()), "offset": dv.offset(), "length": dv.length(),
                "cardinality": dv.cardinality()},
        })
"""
    + JAVA_READ_ROWS
    + """result = {"rows": sorted(rows, key=lambda r: r["id"]), "files": files}
"""
)


# Runs in the engine's process: delete rows of the append table at args["path"] by
# deletion vectors, args["deletes"] = {data file name: [positions]} (unpartitioned).
DELETE_FROM_APPEND = """
P = jvm.org.apache.paimon
table = P.table.FileStoreTableFactory.create(
    P.fs.local.LocalFileIO.create(), P.fs.Path(args["path"]))
empty = P.data.BinaryRow.EMPTY_ROW
maintainer = P.deletionvectors.append.BaseAppendDeleteFileMaintainer.forUnawareAppend(
    table.store().newIndexFileHandler(), table.snapshotManager().latestSnapshot(), empty)
for name, positions in args["deletes"].items():
    dv = P.deletionvectors.BitmapDeletionVector()
    for position in positions:
        dv.delete(position)
    maintainer.notifyNewDeletionVector(name, dv)
List = jvm.java.util.ArrayList
added, removed, none = List(), List(), List()
for entry in maintainer.persist():
    (added if entry.kind() == P.manifest.FileKind.ADD else removed).add(entry.indexFile())
message = P.table.sink.CommitMessageImpl(
    empty, 0, None, P.io.DataIncrement(none, none, none, added, removed),
    P.io.CompactIncrement(none, none, none))
commit = P.table.sink.BatchWriteBuilderImpl(table).newCommit()
commit.commit([message])
commit.close()
result = added.size()
"""


def delete_multiples(session: JvmSession, location: Path, k: int) -> None:
    """Delete the append table's rows with id = 0 mod k by deletion vectors."""
    deletes = {}
    for f in read_table(session, location)["files"]:
        ids = pq.read_table(f["path"], columns=["id"]).column("id").to_pylist()
        deletes[Path(f["path"]).name] = [n for n, i in enumerate(ids) if i % k == 0]
    session.python(DELETE_FROM_APPEND, path=str(location), deletes=deletes)


def read_table(session: JvmSession, path: Path | str) -> dict[str, Any]:
    """Paimon's own read of the table at `path`: rows by id, and the files it used."""
    answer: dict[str, Any] = session.python(READ, path=str(path))
    return answer


def leave_orphan(location: Path) -> Path:
    """Copy one data file to a name no snapshot references (a failed write's leftover)."""
    data_file = next(location.glob("part=*/bucket-*/data-*.parquet"))
    orphan = data_file.with_name("data-00000000-orphan-0000-0000-000000000000-0.parquet")
    shutil.copyfile(data_file, orphan)
    return orphan


def build_table(session: JvmSession, spec: TableSpec, warehouse: Path) -> dict[str, Any]:
    """Create and write one table; its manifest entry."""
    location = Path(
        session.python(
            WRITE,
            warehouse=str(warehouse),
            tmp=str(session.workdir / "paimon-io"),
            db=DB,
            name=spec.name,
            primary_keys=list(spec.primary_keys),
            partition_keys=list(spec.partition_keys),
            options=spec.options,
            batches=[list(b) for b in spec.batches],
            expire=spec.expire,
        ).removeprefix("file:")
    )
    if spec.delete_multiples_of:
        delete_multiples(session, location, spec.delete_multiples_of)
    orphan = leave_orphan(location) if spec.orphan else None
    return {
        "path": str(location),
        "options": spec.options,
        "orphan": None if orphan is None else str(orphan),
        "expected": expected_rows(spec),
    }


def build_all(session: JvmSession, out: Path) -> Path:
    """Build every table of SPECS under OUT/paimon; write and return the manifest's path."""
    manifest = {spec.name: build_table(session, spec, out / "paimon") for spec in SPECS}
    return write_manifest(out / "paimon-manifest.json", manifest)


def write_manifest(path: Path, manifest: dict[str, Any]) -> Path:
    """Write a fixture builder's manifest (table name -> entry) as JSON; its path."""
    path.write_text(json.dumps(manifest, indent=1))
    return path


def copy_table(entry: dict[str, Any], dst: Path) -> Path:
    """A writable copy of a fixture table (Paimon's paths are relative to the table)."""
    shutil.copytree(entry["path"], dst)
    return dst


def main(argv: list[str]) -> int:
    return builder_main(argv, "tests.reference.paimon_tables", PAIMON_JAVA, build_all)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
