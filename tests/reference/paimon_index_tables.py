"""Paimon tables with more than deletion files in their metadata, written by Paimon's Java API.

Beside the tables of tests/reference/paimon_tables.py (same schema `(id INT, part STRING, v
STRING)`, the same three `BATCHES` of inserts, upserts and deletes, the same expected rows),
these carry what dvtool must keep and must not count as deletion vectors:

- `pk_dynamic_bucket`: primary key `(id, part)`, `PARTITIONED BY part`, `bucket` -1
  (dynamic bucket mode) with `dynamic-bucket.target-row-num` 8, so each partition spreads
  over several buckets; `deletion-vectors.enabled`. Each bucket has a `HASH` index file
  (the keys it holds) in the index manifest beside its deletion files.
- `pk_changelog_lookup`: primary key `id`, `bucket` 2, `deletion-vectors.enabled`,
  `changelog-producer` `lookup`: each commit's compaction writes changelog files
  (`changelog-*` in the bucket folders) listed by the snapshot's changelog manifest list.
  Snapshots are then expired down to the last two while changelogs are kept for ten
  (`changelog.num-retained.max`): the expired snapshots' changelogs move to `changelog/`
  (Paimon's decoupled changelogs) and keep their changelog files.
- `pk_changelog_input`: primary key `(id, part)`, partitioned, `bucket` 1,
  `deletion-vectors.enabled`, `changelog-producer` `input`: the changelog files are the
  input rows as written.
- `pk_tagged`: primary key `id`, `bucket` 2, `deletion-vectors.enabled`, `changelog-producer`
  `lookup`; tag `t1` after the first commit and `t2` after the second, then snapshots
  expired down to the latest: the tags pin the expired snapshots, whose data and deletion
  files the latest no longer uses. Tags keep no changelog: the expiry deleted the changelog
  manifest list `tag-t2` still names (and its changelog files).

Every table's manifest entry has its path, options, expected rows (now) and, per tag, the
rows it reads (`tags`). Fixture: `paimon_index_tables` (tests/reference/
test_paimon_index_kinds.py), built once per test run with the `paimon_java` session. By
hand: `python -m tests.reference.paimon_index_tables OUT_DIR`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.engines.jvm_engines import PAIMON_JAVA, JvmSession, builder_main
from tests.reference.paimon_tables import (
    BATCHES,
    DB,
    JAVA_CREATE_TABLE,
    TableSpec,
    expected_rows,
    write_manifest,
)


@dataclass(frozen=True)
class IndexTableSpec:
    """A table to build: keys, options, tags to create, and how to expire."""

    name: str
    primary_keys: tuple[str, ...]
    partition_keys: tuple[str, ...]
    options: dict[str, str]
    tags: dict[str, int] = field(default_factory=dict)
    """Tag name: the number of commits after which it is created."""
    retain_snapshots: int = 0
    """Expire snapshots down to this many (0: no expiry)."""
    retain_changelogs: int = 0
    """With expiry: keep this many changelogs (more than snapshots: decoupled changelogs)."""


DV = {"deletion-vectors.enabled": "true"}
SPECS = (
    IndexTableSpec(
        "pk_dynamic_bucket",
        ("id", "part"),
        ("part",),
        {**DV, "bucket": "-1", "dynamic-bucket.target-row-num": "8"},
    ),
    IndexTableSpec(
        "pk_changelog_lookup",
        ("id",),
        (),
        {**DV, "bucket": "2", "changelog-producer": "lookup"},
        retain_snapshots=2,
        retain_changelogs=10,
    ),
    IndexTableSpec(
        "pk_changelog_input",
        ("id", "part"),
        ("part",),
        # data files under `data/` (`data-file.path-directory`): the partition folders too
        {**DV, "bucket": "1", "changelog-producer": "input", "data-file.path-directory": "data"},
    ),
    IndexTableSpec(
        "pk_tagged",
        ("id",),
        (),
        {**DV, "bucket": "2", "changelog-producer": "lookup"},
        tags={"t1": 1, "t2": 2},
        retain_snapshots=1,
    ),
)

# Runs in the engine's process: create table args["name"], commit each batch, tag, expire.
WRITE = (
    JAVA_CREATE_TABLE
    + """
dynamic = args["options"].get("bucket") == "-1"
for n, batch in enumerate(args["batches"], start=1):
    builder = P.table.sink.BatchWriteBuilderImpl(table)
    write = builder.newWrite()
    write.withIOManager(P.disk.IOManager.create(args["tmp"]))
    if dynamic:  # what Flink's and Spark's bucket assigners do: keys to buckets by hash index
        extractor = table.createRowKeyExtractor()
        assigner = P.index.HashBucketAssigner(
            table.snapshotManager(), "fixtures", table.store().newIndexFileHandler(),
            1, 1, 0, int(args["options"]["dynamic-bucket.target-row-num"]), -1)
    for kind, i, part, v in batch:
        row = P.data.GenericRow(kinds[kind], 3)
        row.setField(0, i)
        row.setField(1, P.data.BinaryString.fromString(part))
        row.setField(2, None if v is None else P.data.BinaryString.fromString(v))
        if dynamic:
            extractor.setRecord(row)
            key = extractor.trimmedPrimaryKey().hashCode()
            write.write(row, assigner.assign(extractor.partition(), key))
        else:
            write.write(row)
    commit = builder.newCommit()
    commit.commit(write.prepareCommit())
    write.close()
    commit.close()
    table = catalog.getTable(ident)
    for tag, after in args["tags"].items():
        if after == n:
            table.createTag(tag, table.snapshotManager().latestSnapshotId())
if args["retain_snapshots"]:
    keep = args["retain_snapshots"]
    zero = jvm.java.time.Duration.ZERO
    config = P.options.ExpireConfig.builder().snapshotRetainMax(keep).snapshotRetainMin(keep)
    config = config.snapshotTimeRetain(zero)
    if args["retain_changelogs"]:
        changelogs = args["retain_changelogs"]
        config = config.changelogRetainMax(changelogs).changelogRetainMin(changelogs)
        config = config.changelogTimeRetain(jvm.java.time.Duration.ofDays(1))
    catalog.getTable(ident).newExpireSnapshots().config(config.build()).expire()
result = str(table.location())
"""
)


def _tag_rows(spec: IndexTableSpec) -> dict[str, list[dict[str, Any]]]:
    """The rows each tag reads: those of the commits before it."""
    return {
        tag: expected_rows(TableSpec(spec.name, spec.primary_keys, (), {}, batches=BATCHES[:n]))
        for tag, n in spec.tags.items()
    }


def build_table(session: JvmSession, spec: IndexTableSpec, warehouse: Path) -> dict[str, Any]:
    """Create and write one table; its manifest entry."""
    location = session.python(
        WRITE,
        warehouse=str(warehouse),
        tmp=str(session.workdir / "paimon-io"),
        db=DB,
        name=spec.name,
        primary_keys=list(spec.primary_keys),
        partition_keys=list(spec.partition_keys),
        options=spec.options,
        batches=[list(b) for b in BATCHES],
        tags=spec.tags,
        retain_snapshots=spec.retain_snapshots,
        retain_changelogs=spec.retain_changelogs,
    )
    plain = TableSpec(spec.name, spec.primary_keys, spec.partition_keys, spec.options)
    return {
        "path": location.removeprefix("file:"),
        "options": spec.options,
        "expected": expected_rows(plain),
        "tags": _tag_rows(spec),
    }


def build_all(session: JvmSession, out: Path) -> Path:
    """Build every table of SPECS under OUT/paimon-index; write and return the manifest."""
    warehouse = out / "paimon-index"
    manifest = {spec.name: build_table(session, spec, warehouse) for spec in SPECS}
    return write_manifest(out / "paimon-index-manifest.json", manifest)


def main(argv: list[str]) -> int:
    return builder_main(argv, "tests.reference.paimon_index_tables", PAIMON_JAVA, build_all)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
